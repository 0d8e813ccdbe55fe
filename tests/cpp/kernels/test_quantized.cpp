#include <catch2/catch.hpp>

#include <cmath>

#include "etrt/kernels/ops/quantized.h"
#include "etrt_generated/portable_kernels.h"

using namespace etrt;
using namespace etrt::kernels;

namespace {
Tensor mk(ScalarType st, std::vector<int64_t> sizes, void* data) { return *Tensor::make(st, sizes, {}, data); }
}  // namespace

TEST_CASE("quantize / dequantize per tensor: half-to-even rounding and clamping", "[quantized]") {
  KernelContext ctx;
  std::vector<float> x = {0.25f, 0.75f, -0.25f, 100.f, -100.f, 0.5f};
  std::vector<int8_t> q(6);
  Tensor tx = mk(ScalarType::Float, {2, 3}, x.data()), tq = mk(ScalarType::Char, {2, 3}, q.data());
  using Q = types<uint8_t, int8_t, int16_t, int32_t, uint16_t>;
  REQUIRE(quantize_per_tensor_out<Q>(ctx, tx, 0.5, 1, -128, 127, ScalarType::Char, tq));
  // x / 0.5 = 0.5, 1.5, -0.5, 200, -200, 1 -> nearbyint 0, 2, -0, ... + 1
  CHECK(q == std::vector<int8_t>{1, 3, 1, 127, -128, 2});
  std::vector<float> y(6);
  Tensor ty = mk(ScalarType::Float, {2, 3}, y.data());
  REQUIRE(dequantize_per_tensor_out<Q>(ctx, tq, 0.5, 1, -128, 127, ScalarType::Char, std::nullopt, ty));
  for (int i = 0; i < 6; ++i) CHECK(y[i] == Approx((q[i] - 1) * 0.5));
  // tensor_out variants with uint8
  double sc = 0.1;
  int64_t zp = 128;
  Tensor tsc = mk(ScalarType::Double, {1}, &sc), tzp = mk(ScalarType::Long, {1}, &zp);
  std::vector<uint8_t> qu(6);
  Tensor tqu = mk(ScalarType::Byte, {2, 3}, qu.data());
  REQUIRE(quantize_per_tensor_tensor_out<Q>(ctx, tx, tsc, tzp, 0, 255, ScalarType::Byte, tqu));
  for (int i = 0; i < 6; ++i) {
    const double ref = std::clamp(std::nearbyint(double(x[i] * float(1.0 / 0.1))) + 128, 0.0, 255.0);
    CHECK(qu[i] == static_cast<uint8_t>(ref));
  }
  std::vector<double> yd(6);
  Tensor tyd = mk(ScalarType::Double, {2, 3}, yd.data());
  REQUIRE(dequantize_per_tensor_tensor_out<Q>(ctx, tqu, tsc, tzp, 0, 255, ScalarType::Byte, ScalarType::Double, tyd));
  CHECK(yd[0] == Approx((qu[0] - 128) * 0.1));
  // empty input
  Tensor te = mk(ScalarType::Float, {0}, nullptr), tqe = mk(ScalarType::Char, {0}, nullptr);
  REQUIRE(quantize_per_tensor_out<Q>(ctx, te, 0.5, 0, -128, 127, ScalarType::Char, tqe));
  auto st = quantize_per_tensor_out<Q>(ctx, tx, 0.5, 0, -128, 300, ScalarType::Char, tq);
  REQUIRE(!st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("quant_max"));
  int slots = -1;
  for (const auto& e : etrt::generated::portable_kernels())
    if (e.name == "quantized_decomposed::dequantize_per_tensor.out") slots = e.num_slots;
  CHECK(slots == 9);
}

TEST_CASE("quantize / dequantize per channel", "[quantized]") {
  KernelContext ctx;
  using Q = types<uint8_t, int8_t, int16_t, int32_t, uint16_t>;
  std::vector<float> x = {1, 2, 3, -1, -2, -3};  // [2, 3], axis 1
  std::vector<double> sc = {0.5, 1.0, 2.0};
  std::vector<int64_t> zp = {0, 1, -1};
  std::vector<int16_t> q(6);
  Tensor tx = mk(ScalarType::Float, {2, 3}, x.data()), tsc = mk(ScalarType::Double, {3}, sc.data()),
         tzp = mk(ScalarType::Long, {3}, zp.data()), tq = mk(ScalarType::Short, {2, 3}, q.data());
  REQUIRE(quantize_per_channel_out<Q>(ctx, tx, tsc, tzp, -1, -1000, 1000, ScalarType::Short, tq));
  // 1/0.5=2 -> 2; 2/1+1=3; 3/2=1.5->2, -1 -> 1; -2; -1; -1.5 -> -2 - 1 = -3
  CHECK(q == std::vector<int16_t>{2, 3, 1, -2, -1, -3});
  std::vector<float> y(6);
  Tensor ty = mk(ScalarType::Float, {2, 3}, y.data());
  REQUIRE(dequantize_per_channel_out<Q>(ctx, tq, tsc, &tzp, 1, -1000, 1000, ScalarType::Short, std::nullopt, ty));
  for (int i = 0; i < 6; ++i) CHECK(y[i] == Approx((q[i] - zp[i % 3]) * sc[i % 3]));
  REQUIRE(dequantize_per_channel_out<Q>(ctx, tq, tsc, nullptr, 1, -1000, 1000, ScalarType::Short, std::nullopt, ty));
  CHECK(y[1] == Approx(3.0));
  auto st = quantize_per_channel_out<Q>(ctx, tx, tsc, tzp, 0, -1000, 1000, ScalarType::Short, tq);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("must have 2 element(s)"));
}
