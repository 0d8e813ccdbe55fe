// The elementwise engine (kernels/util/elementwise.h): its general path (broadcasting, strided and converted
// operands, converted results, rows longer than one conversion block) against a plain loop over logical indices.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "etrt/kernels/util/elementwise.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

TEST_CASE("map_mixed: broadcast, a permuted int32 operand, a Half result, rows over one block", "[kernels][engine]") {
  // a: float [3, 1, 600] (broadcast along dim 1); b: int32 [3, 5, 600] stored with dim order (1, 0, 2);
  // out: Half [3, 5, 600]. 600 > the engine's 256-element block, so each row takes three blocks.
  constexpr int64_t D0 = 3, D1 = 5, D2 = 600;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uf(-4.f, 4.f);
  std::uniform_int_distribution<int32_t> ui(-50, 50);
  std::vector<float> av(D0 * D2);
  for (float& v : av) v = uf(rng);
  std::vector<int32_t> bv(D0 * D1 * D2);  // physical order [D1][D0][D2]
  for (int32_t& v : bv) v = ui(rng);
  std::vector<Half> ov(D0 * D1 * D2);
  Tensor a = mk(av, {D0, 1, D2});
  Tensor b = mk(ScalarType::Int, {D0, D1, D2}, bv.data(), {1, 0, 2});
  Tensor o = mk(ScalarType::Half, {D0, D1, D2}, ov.data());
  REQUIRE(map_mixed<float>("test", o, types<float, float>{}, [](float x, float y) { return x * 0.5f + y; }, a, b));
  for (int64_t i = 0; i < D0; ++i)
    for (int64_t j = 0; j < D1; ++j)
      for (int64_t k = 0; k < D2; ++k) {
        const float want = av[i * D2 + k] * 0.5f + static_cast<float>(bv[(j * D0 + i) * D2 + k]);
        const float got = ov[(i * D1 + j) * D2 + k];
        INFO(i << "," << j << "," << k);
        REQUIRE(got == static_cast<float>(Half(want)));
      }
}

TEST_CASE("map_mixed: a scalar operand, a transposed output, dims of size one", "[kernels][engine]") {
  std::vector<double> xv(4 * 1 * 7);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<double>(i) - 10.0;
  std::vector<double> sv{3.0};
  std::vector<double> ov(4 * 1 * 7);
  Tensor x = mk(xv, {4, 1, 7});
  Tensor s = mk(sv, {});
  Tensor o = mk(ScalarType::Double, {4, 1, 7}, ov.data(), {2, 1, 0});  // o's innermost stride is along dim 0
  REQUIRE(map_elementwise<double, double>("test", o, [](double p, double q) { return p - q; }, x, s));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t k = 0; k < 7; ++k) CHECK(ov[k * 4 + i] == xv[i * 7 + k] - 3.0);
}

TEST_CASE("map_mixed: a single-element operand on either side of a dense one, its order kept", "[kernels][engine]") {
  // The flat single-element path: a 0-d tensor and a [1, 1, 1] one, first and second, against a [2, 3, 50] operand
  // and output of one layout (and a bool result from float operands, as a Scalar comparison computes it).
  std::vector<float> xv(2 * 3 * 50);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.25f * static_cast<float>(i) - 30.f;
  std::vector<float> s0{1.5f}, s3{-2.f};
  Tensor x = mk(xv, {2, 3, 50}), zero_d = mk(s0, {}), ones = mk(s3, {1, 1, 1});
  for (bool single_first : {false, true})
    for (const Tensor* single : {&zero_d, &ones}) {
      const float v = single->data_as<float>()[0];
      std::vector<float> ov(xv.size(), 99.f);
      Tensor o = mk(ov, {2, 3, 50});
      const auto sub = [](float p, float q) { return p - q; };
      REQUIRE((single_first ? map_elementwise<float, float>("test", o, sub, *single, x)
                            : map_elementwise<float, float>("test", o, sub, x, *single)));
      int wrong = 0;
      for (size_t i = 0; i < xv.size(); ++i) wrong += ov[i] != (single_first ? v - xv[i] : xv[i] - v);
      INFO("single first " << single_first << ", rank " << single->dim());
      CHECK(wrong == 0);
      std::vector<uint8_t> bv(xv.size(), 7);
      Tensor ob = mk(ScalarType::Bool, {2, 3, 50}, bv.data());
      const auto less = [](float p, float q) { return p < q; };
      REQUIRE((single_first ? map_mixed<bool>("test", ob, types<float, float>{}, less, *single, x)
                            : map_mixed<bool>("test", ob, types<float, float>{}, less, x, *single)));
      wrong = 0;
      for (size_t i = 0; i < xv.size(); ++i) wrong += bv[i] != (single_first ? v < xv[i] : xv[i] < v);
      CHECK(wrong == 0);
    }
}

TEST_CASE("map_mixed: bool operands are read as bytes on both paths", "[kernels][engine]") {
  // Memory planning may hand a bool tensor bytes another dtype wrote: any nonzero byte reads as true.
  std::vector<uint8_t> bytes{0, 1, 2, 0xff, 0};
  std::vector<uint8_t> out(5, 7);
  Tensor in = mk(ScalarType::Bool, {5}, bytes.data());
  Tensor o = mk(ScalarType::Bool, {5}, out.data());
  REQUIRE(map_mixed<bool>("test", o, types<bool>{}, [](bool v) { return !v; }, in));  // the flat path
  CHECK(out == std::vector<uint8_t>{1, 0, 0, 0, 1});
  std::vector<float> fout(5);
  Tensor of = mk(fout, {5});
  REQUIRE(map_mixed<float>("test", of, types<bool>{}, [](bool v) { return v ? 1.f : 0.f; }, in));  // converted
  CHECK(fout == std::vector<float>{0.f, 1.f, 1.f, 1.f, 0.f});
}

TEST_CASE("map_mixed: empty and rank-0 outputs, unsupported dtypes", "[kernels][engine]") {
  std::vector<float> none;
  std::vector<float> outv(1, -1.f);
  Tensor e = mk(ScalarType::Float, {0, 3}, none.data());
  Tensor eo = mk(ScalarType::Float, {0, 3}, none.data());
  CHECK(map_elementwise<float, float>("test", eo, [](float v) { return v + 1; }, e));
  std::vector<int64_t> one{41};
  Tensor s = mk(one, {});
  Tensor so = mk(outv, {});
  REQUIRE(map_elementwise<float, float>("test", so, [](float v) { return v + 1; }, s));
  CHECK(outv[0] == 42.f);
  std::vector<uint8_t> raw(16);
  Tensor q = mk(ScalarType::QInt8, {4}, raw.data());
  std::vector<float> fo(4);
  Tensor fot = mk(fo, {4});
  auto st = map_elementwise<float, float>("test", fot, [](float v) { return v; }, q);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("unsupported input dtype"));
}
