#include <catch2/catch.hpp>

#include <random>

#include "etrt/kernels/ops/masked.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

TEST_CASE("masked_select: broadcast self and mask against a loop reference", "[masked]") {
  CHECK(slots_of("aten::masked_select.out") == 4);
  KernelContext ctx;
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::bernoulli_distribution coin(0.4);
  // self [3, 1, 5] and mask [4, 5] broadcast to [3, 4, 5]
  std::vector<float> x(15);
  for (auto& e : x) e = u(g);
  std::vector<uint8_t> m(20);
  for (auto& e : m) e = coin(g);
  m[3] = 2;  // any non-zero byte counts as true
  Tensor self = mk(ScalarType::Float, {3, 1, 5}, x.data()), mask = mk(ScalarType::Bool, {4, 5}, m.data());
  std::vector<float> want;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 5; ++c)
        if (m[b * 5 + c]) want.push_back(x[a * 5 + c]);
  std::vector<float> o(60, 99.f);
  Tensor out = mk(ScalarType::Float, {60}, o.data(), {}, ShapeDynamism::DynamicBound);
  REQUIRE(masked_select_out<real_bool_types>(ctx, self, mask, out));
  REQUIRE(out.size(0) == static_cast<int64_t>(want.size()));
  CHECK(std::vector<float>(o.begin(), o.begin() + static_cast<long>(want.size())) == want);
  CHECK(o[want.size()] == 99.f);
  // A channels-last self [2, 3, 2, 2] with a [3, 1, 1] mask: the result follows the logical order.
  std::vector<int16_t> y(24);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int16_t>(i * 3 - 20);  // memory order n, h, w, c
  Tensor cl = mk(ScalarType::Short, {2, 3, 2, 2}, y.data(), {0, 2, 3, 1});
  std::vector<uint8_t> cm = {1, 0, 1};
  Tensor tcm = mk(ScalarType::Bool, {3, 1, 1}, cm.data());
  std::vector<int16_t> yo(24), ywant;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w)
          if (cm[c]) ywant.push_back(y[((n * 2 + h) * 2 + w) * 3 + c]);
  Tensor tyo = mk(ScalarType::Short, {24}, yo.data(), {}, ShapeDynamism::DynamicUnbound);
  REQUIRE(masked_select_out<real_bool_types>(ctx, cl, tcm, tyo));
  REQUIRE(tyo.size(0) == 16);
  CHECK(std::vector<int16_t>(yo.begin(), yo.begin() + 16) == ywant);
}

TEST_CASE("masked_select: torch spot values, rank 0, nothing selected", "[masked]") {
  KernelContext ctx;
  // torch.masked_select(torch.arange(6.).reshape(2, 3), torch.tensor([True, False, True])) -> [0., 2., 3., 5.]
  std::vector<double> x = {0, 1, 2, 3, 4, 5}, o(6);
  std::vector<uint8_t> m = {1, 0, 1};
  Tensor out = mk(ScalarType::Double, {6}, o.data(), {}, ShapeDynamism::DynamicBound);
  REQUIRE(masked_select_out<real_bool_types>(ctx, mk(ScalarType::Double, {2, 3}, x.data()),
                                             mk(ScalarType::Bool, {3}, m.data()), out));
  CHECK(std::vector<double>(o.begin(), o.begin() + out.size(0)) == std::vector<double>{0, 2, 3, 5});
  // torch.masked_select(torch.tensor([1., 2.]), torch.tensor([[True], [False], [True]])) -> [1., 2., 1., 2.]
  std::vector<double> x2 = {1, 2};
  std::vector<uint8_t> m2 = {1, 0, 1};
  REQUIRE(masked_select_out<real_bool_types>(ctx, mk(ScalarType::Double, {2}, x2.data()),
                                             mk(ScalarType::Bool, {3, 1}, m2.data()), out));
  CHECK(std::vector<double>(o.begin(), o.begin() + out.size(0)) == std::vector<double>{1, 2, 1, 2});
  // torch.masked_select(torch.tensor(3.), torch.tensor(True)) -> tensor([3.])
  double s = 3;
  uint8_t t = 1, f = 0;
  REQUIRE(masked_select_out<real_bool_types>(ctx, mk(ScalarType::Double, {}, &s), mk(ScalarType::Bool, {}, &t), out));
  CHECK(out.size(0) == 1);
  CHECK(o[0] == 3);
  REQUIRE(masked_select_out<real_bool_types>(ctx, mk(ScalarType::Double, {2, 3}, x.data()), mk(ScalarType::Bool, {}, &f),
                                             out));
  CHECK(out.size(0) == 0);
  // bool self
  std::vector<uint8_t> bx = {1, 0, 0, 1}, bo(4, 7);
  Tensor tbo = mk(ScalarType::Bool, {4}, bo.data(), {}, ShapeDynamism::DynamicBound);
  REQUIRE(masked_select_out<real_bool_types>(ctx, mk(ScalarType::Bool, {4}, bx.data()), mk(ScalarType::Bool, {}, &t),
                                             tbo));
  CHECK(bo == std::vector<uint8_t>{1, 0, 0, 1});
}

TEST_CASE("masked_select: errors", "[masked]") {
  KernelContext ctx;
  std::vector<float> x = {0, 1, 2, 3, 4, 5}, o(6);
  std::vector<uint8_t> m = {1, 1, 1, 1, 0, 1};
  Tensor self = mk(ScalarType::Float, {2, 3}, x.data()), mask = mk(ScalarType::Bool, {2, 3}, m.data());
  // The result has 5 elements: a static out of another size cannot take it, nor can a bound below 5.
  Tensor fixed = mk(ScalarType::Float, {4}, o.data());
  auto st = masked_select_out<real_bool_types>(ctx, self, mask, fixed);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == Error::NotSupported);
  CHECK_THAT(st.error().what, Catch::Contains("masked_select.out: output shape [5] does not match the static shape [4]"));
  Tensor bounded = mk(ScalarType::Float, {4}, o.data(), {}, ShapeDynamism::DynamicBound);
  st = masked_select_out<real_bool_types>(ctx, self, mask, bounded);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("exceeds the upper bound [4]"));
  Tensor exact = mk(ScalarType::Float, {5}, o.data());
  REQUIRE(masked_select_out<real_bool_types>(ctx, self, mask, exact));
  CHECK(std::vector<float>(o.begin(), o.begin() + 5) == std::vector<float>{0, 1, 2, 3, 5});
  Tensor byte_mask = mk(ScalarType::Byte, {2, 3}, m.data());
  st = masked_select_out<real_bool_types>(ctx, self, byte_mask, exact);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("mask must be Bool, got Byte"));
  Tensor wrong_shape = mk(ScalarType::Bool, {2}, m.data());
  st = masked_select_out<real_bool_types>(ctx, self, wrong_shape, exact);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("cannot be broadcast together"));
  Tensor two_d = mk(ScalarType::Float, {5, 1}, o.data());
  st = masked_select_out<real_bool_types>(ctx, self, mask, two_d);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("out must be 1-D, got float32[5, 1]"));
  Tensor wrong_dtype = mk(ScalarType::Int, {5}, o.data());
  st = masked_select_out<real_bool_types>(ctx, self, mask, wrong_dtype);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("input dtype Float != output dtype Int"));
}

TEST_CASE("masked_scatter: against a loop reference, source read in logical order", "[masked]") {
  CHECK(slots_of("aten::masked_scatter.out") == 5);
  KernelContext ctx;
  std::mt19937 g(9);
  std::uniform_int_distribution<int32_t> u(-1000, 1000);
  std::bernoulli_distribution coin(0.5);
  // self [2, 3, 4] int32, mask [3, 1] broadcast over it; source [5, 6] stored transposed (dim order 1, 0).
  std::vector<int32_t> x(24), src(30);
  for (auto& e : x) e = u(g);
  for (auto& e : src) e = u(g);
  std::vector<uint8_t> m(3);
  for (auto& e : m) e = coin(g);
  m[1] = 1;
  Tensor self = mk(ScalarType::Int, {2, 3, 4}, x.data()), mask = mk(ScalarType::Bool, {3, 1}, m.data());
  Tensor source = mk(ScalarType::Int, {5, 6}, src.data(), {1, 0});  // element (i, j) at memory j * 5 + i
  std::vector<int32_t> want(24);
  size_t next = 0;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) {
        const size_t at = static_cast<size_t>((a * 3 + b) * 4 + c);
        if (m[b]) {
          const size_t i = next / 6, j = next % 6;
          want[at] = src[j * 5 + i];
          ++next;
        } else {
          want[at] = x[at];
        }
      }
  std::vector<int32_t> o(24);
  Tensor out = mk(ScalarType::Int, {2, 3, 4}, o.data());
  REQUIRE(masked_scatter_out<real_bool_types>(ctx, self, mask, source, out));
  CHECK(o == want);
  // Channels-last output: the same values, stored NHWC.
  std::vector<float> fx(8, -1.f), fs = {10, 11, 12, 13, 14, 15, 16, 17}, fo(8);
  std::vector<uint8_t> fm = {1, 0, 1, 1, 0, 0, 1, 1};  // over [1, 2, 2, 2] logical order
  Tensor fout = mk(ScalarType::Float, {1, 2, 2, 2}, fo.data(), {0, 2, 3, 1});
  REQUIRE(masked_scatter_out<real_bool_types>(ctx, mk(ScalarType::Float, {1, 2, 2, 2}, fx.data()),
                                              mk(ScalarType::Bool, {1, 2, 2, 2}, fm.data()),
                                              mk(ScalarType::Float, {8}, fs.data()), fout));
  const std::vector<float> logical = {10, -1, 11, 12, -1, -1, 13, 14};
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w) CHECK(fo[(h * 2 + w) * 2 + c] == logical[(c * 2 + h) * 2 + w]);
}

TEST_CASE("masked_scatter: torch spot values, broadcast self, errors", "[masked]") {
  KernelContext ctx;
  // torch.zeros(3).masked_scatter(torch.ones(2, 3, dtype=torch.bool), torch.arange(6.)) -> [[0, 1, 2], [3, 4, 5]]
  std::vector<float> z3(3, 0.f), src = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, o(6);
  std::vector<uint8_t> ones(6, 1);
  Tensor out = mk(ScalarType::Float, {2, 3}, o.data());
  REQUIRE(masked_scatter_out<real_bool_types>(ctx, mk(ScalarType::Float, {3}, z3.data()),
                                              mk(ScalarType::Bool, {2, 3}, ones.data()),
                                              mk(ScalarType::Float, {6}, src.data()), out));
  CHECK(o == std::vector<float>{0, 1, 2, 3, 4, 5});
  // torch.zeros(2, 3).masked_scatter(torch.tensor([True, False, True]), torch.arange(10.).reshape(2, 5))
  //   -> [[0, 0, 1], [2, 0, 3]]
  std::vector<float> z6(6, 0.f);
  std::vector<uint8_t> m = {1, 0, 1};
  Tensor self = mk(ScalarType::Float, {2, 3}, z6.data()), mask = mk(ScalarType::Bool, {3}, m.data());
  REQUIRE(masked_scatter_out<real_bool_types>(ctx, self, mask, mk(ScalarType::Float, {2, 5}, src.data()), out));
  CHECK(o == std::vector<float>{0, 0, 1, 2, 0, 3});
  // src = torch.arange(6.).reshape(2, 3).t()
  // torch.zeros(2, 3).masked_scatter(torch.tensor([[True, False, True], [True, True, False]]), src)
  //   -> [[0, 0, 3], [1, 4, 0]]
  std::vector<uint8_t> m2 = {1, 0, 1, 1, 1, 0};
  REQUIRE(masked_scatter_out<real_bool_types>(ctx, self, mk(ScalarType::Bool, {2, 3}, m2.data()),
                                              mk(ScalarType::Float, {3, 2}, src.data(), {1, 0}), out));
  CHECK(o == std::vector<float>{0, 0, 3, 1, 4, 0});
  // An empty source is fine while the mask selects nothing.
  std::vector<uint8_t> none(3, 0);
  REQUIRE(masked_scatter_out<real_bool_types>(ctx, self, mk(ScalarType::Bool, {3}, none.data()),
                                              mk(ScalarType::Float, {0}, src.data()), out));
  CHECK(o == z6);

  // torch: "Number of elements of source < number of ones in mask"
  auto st = masked_scatter_out<real_bool_types>(ctx, self, mask, mk(ScalarType::Float, {3}, src.data()), out);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("the mask selects 4 elements but source float32[3] has only 3"));
  std::vector<int64_t> isrc(6);
  st = masked_scatter_out<real_bool_types>(ctx, self, mask, mk(ScalarType::Long, {6}, isrc.data()), out);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("source dtype Long != self dtype Float"));
  st = masked_scatter_out<real_bool_types>(ctx, self, mk(ScalarType::Byte, {3}, m.data()),
                                           mk(ScalarType::Float, {6}, src.data()), out);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("mask must be Bool, got Byte"));
  Tensor small = mk(ScalarType::Float, {3}, o.data());
  st = masked_scatter_out<real_bool_types>(ctx, mk(ScalarType::Float, {3}, z3.data()),
                                           mk(ScalarType::Bool, {2, 3}, ones.data()),
                                           mk(ScalarType::Float, {6}, src.data()), small);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("cannot change rank from 1 to 2"));
  st = masked_scatter_out<real_bool_types>(ctx, self, mk(ScalarType::Bool, {2}, m.data()),
                                           mk(ScalarType::Float, {6}, src.data()), out);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("cannot be broadcast together"));
}
