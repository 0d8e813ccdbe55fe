#include <catch2/catch.hpp>

#include <climits>

#include "etrt/kernels/ops/cortex_m_conv.h"
#include "etrt/kernels/ops/cortex_m_elementwise.h"
#include "etrt/kernels/ops/cortex_m_linear.h"
#include "etrt/kernels/ops/cortex_m_movement.h"
#include "etrt/kernels/ops/cortex_m_pool.h"
#include "etrt/kernels/ops/cortex_m_qdq.h"
#include "etrt_generated/portable_kernels.h"

using namespace etrt;
using namespace etrt::kernels;
namespace cm = etrt::kernels::cortex_m;
using I8 = types<int8_t>;

namespace {
Tensor mk(ScalarType st, std::vector<int64_t> sizes, void* data, std::vector<uint8_t> order = {}) {
  return *Tensor::make(st, sizes, order, data);
}
const std::vector<uint8_t> kNHWC = {0, 2, 3, 1};
}  // namespace

TEST_CASE("cortex_m requantize: CMSIS-NN rounding, shifts and wrap-around", "[cortex_m]") {
  CHECK(cm::requantize(100, 1 << 30, 0) == 50);
  CHECK(cm::requantize(-3, 1 << 30, 0) == -1);  // -1.5: the high multiply rounds half up
  CHECK(cm::requantize(7, 1 << 30, -1) == 2);   // 1.75
  CHECK(cm::requantize(-6, 1 << 30, -1) == -2); // -1.5: the right shift rounds half away from zero
  CHECK(cm::requantize(6, 1 << 30, -1) == 2);   // 1.5
  CHECK(cm::requantize(3, 1 << 30, 2) == 6);
  CHECK(cm::requantize(1 << 30, 1 << 30, 2) == 0);  // 2^32 wraps in int32 first
  CHECK(cm::requantize(INT32_MIN, INT32_MIN, 0) == INT32_MIN);
  CHECK(cm::requantize(INT32_MAX, INT32_MAX, -31) == 1);
  CHECK(cm::requantize(-1, INT32_MAX, 31) == INT32_MIN + 1);  // -1 * 2^31 wraps to INT32_MIN
}

TEST_CASE("cortex_m quantized_conv2d: channels-last input, bias, padding, per-channel requantization", "[cortex_m]") {
  KernelContext ctx;
  // input [1, 2, 2, 2] NHWC in memory: (h, w, c)
  std::vector<int8_t> x = {1, 2, 3, 4, 5, 6, 7, 8};  // c0 = 1 3 5 7, c1 = 2 4 6 8
  std::vector<int8_t> w = {1, 1, 1, -1};              // [O=2, 1, 1, C=2]
  std::vector<int32_t> b = {10, -10}, mult = {1 << 30, 1 << 30}, sh = {0, 1};
  std::vector<int8_t> y(2 * 2 * 2 * 2, 99), scratch(1);
  Tensor tx = mk(ScalarType::Char, {1, 2, 2, 2}, x.data(), kNHWC), tw = mk(ScalarType::Char, {2, 1, 1, 2}, w.data()),
         tb = mk(ScalarType::Int, {2}, b.data()), tm = mk(ScalarType::Int, {2}, mult.data()),
         ts = mk(ScalarType::Int, {2}, sh.data()), tsc = mk(ScalarType::Char, {1}, scratch.data()),
         ty = mk(ScalarType::Char, {1, 2, 2, 2}, y.data(), kNHWC);
  const std::vector<int64_t> one = {1, 1}, zero = {0, 0};
  REQUIRE(cm::quantized_conv2d_out<I8>(ctx, tx, tw, &tb, one, zero, one, 1, -3, tm, ts, -128, 127, tsc, ty));
  // o0: acc = 10 + (c0+1) + (c1+1), *0.5 (round half up), -3. o1: acc = -10 + (c0+1) - (c1+1) = -11, *1 -> -11 - 3.
  for (int p = 0; p < 4; ++p) {
    const int c0 = x[2 * p], c1 = x[2 * p + 1];
    CHECK(y[2 * p] == (12 + c0 + c1 + 1) / 2 - 3);
    CHECK(y[2 * p + 1] == -14);
  }
  // 3x3 kernel with padding 1: only the in-image taps count
  std::vector<int8_t> w9(9, 1);
  std::vector<int32_t> m1 = {1 << 30}, s1 = {1};
  std::vector<int8_t> x1 = {1, 2, 3, 4}, y1(4);
  Tensor tx1 = mk(ScalarType::Char, {1, 1, 2, 2}, x1.data(), kNHWC), tw9 = mk(ScalarType::Char, {1, 3, 3, 1}, w9.data()),
         tm1 = mk(ScalarType::Int, {1}, m1.data()), ts1 = mk(ScalarType::Int, {1}, s1.data()),
         ty1 = mk(ScalarType::Char, {1, 1, 2, 2}, y1.data(), kNHWC);
  REQUIRE(cm::quantized_conv2d_out<I8>(ctx, tx1, tw9, nullptr, one, one, one, 0, 0, tm1, ts1, -128, 127, tsc, ty1));
  CHECK(y1 == std::vector<int8_t>{10, 10, 10, 10});
  // bad shift, multiplier tensor size and kernel that does not fit
  s1[0] = 32;
  auto st = cm::quantized_conv2d_out<I8>(ctx, tx1, tw9, nullptr, one, zero, one, 0, 0, tm1, ts1, -128, 127, tsc, ty1);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("cortex_m::quantized_conv2d.out"));
  s1[0] = 1;
  st = cm::quantized_conv2d_out<I8>(ctx, tx1, tw9, nullptr, one, zero, one, 0, 0, tm1, ts1, -128, 127, tsc, ty1);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("does not fit"));
  st = cm::quantized_conv2d_out<I8>(ctx, tx1, tw9, nullptr, one, one, one, 300, 0, tm1, ts1, -128, 127, tsc, ty1);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("input_offset"));
}

TEST_CASE("cortex_m depthwise conv, avg pool rounding, max pool", "[cortex_m]") {
  KernelContext ctx;
  std::vector<int8_t> x = {1, -2, 3, -4}, w = {2, 3, -1, 1}, y(8), scratch(1);  // C=2, depth_multiplier 2 -> O=4
  std::vector<int32_t> m(4, 1 << 30), s(4, 1);
  Tensor tx = mk(ScalarType::Char, {1, 2, 1, 2}, x.data()), tw = mk(ScalarType::Char, {1, 1, 1, 4}, w.data()),
         tm = mk(ScalarType::Int, {4}, m.data()), ts = mk(ScalarType::Int, {4}, s.data()),
         tsc = mk(ScalarType::Char, {1}, scratch.data()), ty = mk(ScalarType::Char, {1, 4, 1, 2}, y.data());
  const std::vector<int64_t> one = {1, 1}, zero = {0, 0};
  REQUIRE(cm::quantized_depthwise_conv2d_out<I8>(ctx, tx, tw, nullptr, one, zero, one, 2, 0, 0, tm, ts, -128, 127,
                                                 tsc, ty));
  // out channel o reads input channel o / 2; x[c=0] = {1, -2}, x[c=1] = {3, -4}; value * w * 1 (mult 0.5, shift 1)
  CHECK(y == std::vector<int8_t>{2, -4, 3, -6, -3, 4, 3, -4});
  // avg pool: sums 5 / 2 -> 3 (ties away from zero), -5 / 2 -> -3
  std::vector<int8_t> p = {2, 3, -2, -3}, q(2);
  Tensor tp = mk(ScalarType::Char, {1, 1, 2, 2}, p.data()), tq = mk(ScalarType::Char, {1, 1, 2, 1}, q.data());
  const std::vector<int64_t> k12 = {1, 2};
  REQUIRE(cm::quantized_avg_pool2d_out<I8>(ctx, tp, k12, k12, zero, false, 0, 1 << 30, 0, tsc, tq));
  CHECK(q == std::vector<int8_t>{3, -3});
  auto st = cm::quantized_avg_pool2d_out<I8>(ctx, tp, k12, k12, zero, false, 200, 1 << 30, 0, tsc, tq);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("zero_point"));
  // max pool with clamp
  REQUIRE(cm::quantized_max_pool2d_out<I8>(ctx, tp, k12, k12, zero, one, false, 0, 0, -128, 2, tq));
  CHECK(q == std::vector<int8_t>{2, -2});
}

TEST_CASE("cortex_m linear (bias and kernel_sum paths), batch matmul", "[cortex_m]") {
  KernelContext ctx;
  std::vector<int8_t> x = {1, 2, 3, -1, -2, -3}, w = {1, 0, -1, 2, 2, 2}, y(4);
  std::vector<int32_t> b = {5, -5};
  Tensor tx = mk(ScalarType::Char, {2, 3}, x.data()), tw = mk(ScalarType::Char, {2, 3}, w.data()),
         tb = mk(ScalarType::Int, {2}, b.data()), ty = mk(ScalarType::Char, {2, 2}, y.data());
  const std::vector<int64_t> mult = {1 << 30}, sh = {0};
  REQUIRE(cm::quantized_linear_out<I8>(ctx, tx, tw, &tb, nullptr, 1, 0, 2, mult, sh, 127, -128, ty));
  // row0: (2,3,4)·(1,0,-1)+5 = 3 -> 1.5 -> 2 (+2) = 4; (2,3,4)·(2,2,2)-5 = 13 -> 6.5 -> 7 (+2) = 9
  // row1: (0,-1,-2)·(1,0,-1)+5 = 7 -> 4 -> 6; (0,-1,-2)·(2,2,2)-5 = -11 -> -5.5 -> -5 (+2) = -3
  CHECK(y == std::vector<int8_t>{4, 9, 6, -3});
  // kernel_sum path: acc = ks + sum x w + filter_offset * sum x
  std::vector<int32_t> ks = {100, 0};
  Tensor tks = mk(ScalarType::Int, {2}, ks.data());
  REQUIRE(cm::quantized_linear_out<I8>(ctx, tx, tw, nullptr, &tks, 0, 1, 0, mult, sh, 127, -128, ty));
  // row0: 100 + (-2) + 6 = 104 -> 52; 0 + 12 + 6 = 18 -> 9. row1: 100 + 2 - 6 = 96 -> 48; -12 - 6 = -18 -> -9
  CHECK(y == std::vector<int8_t>{52, 9, 48, -9});
  const std::vector<int64_t> bad_shift = {-32};
  auto st = cm::quantized_linear_out<I8>(ctx, tx, tw, &tb, nullptr, 1, 0, 2, mult, bad_shift, 127, -128, ty);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("cortex_m::quantized_linear.out"));
  CHECK_THAT(st.error().what, Catch::Contains("shift"));
  std::vector<int8_t> l = {1, 2, 3, 4}, r = {1, 1, 2, 0}, o(4);  // B=1, M=2, K=2, N=2
  Tensor tl = mk(ScalarType::Char, {1, 2, 2}, l.data()), tr = mk(ScalarType::Char, {1, 2, 2}, r.data()),
         to = mk(ScalarType::Char, {1, 2, 2}, o.data()), tsc = mk(ScalarType::Char, {1}, l.data());
  REQUIRE(cm::quantized_batch_matmul_out<I8>(ctx, tl, 0, tr, 0, 1, 1 << 30, 1, tsc, to));
  CHECK(o == std::vector<int8_t>{4, 3, 8, 7});  // (3, 2, 7, 6) * 1 + 1
}

TEST_CASE("cortex_m add / mul / max / activation / pad / transpose / q-dq", "[cortex_m]") {
  KernelContext ctx;
  std::vector<int8_t> a = {10, -10, 0, 127}, b = {1}, y(4);
  Tensor ta = mk(ScalarType::Char, {4}, a.data()), tb = mk(ScalarType::Char, {1}, b.data()),
         ty = mk(ScalarType::Char, {4}, y.data());
  // add: each operand (x - 0) * 2^20 * 0.5 * 2^-19 = x; the output scale 0.5 * 2^1 = 1: a + b
  REQUIRE(cm::quantized_add_out<I8>(ctx, ta, 0, 1 << 30, -19, tb, 0, 1 << 30, -19, 0, 1 << 30, 1, -128, 127, ty));
  CHECK(y == std::vector<int8_t>{11, -9, 1, 127});
  REQUIRE(cm::quantized_mul_out<I8>(ctx, ta, 0, tb, -1, 1, 1 << 30, 0, ty));  // a * 2 / 2 + 1
  CHECK(y == std::vector<int8_t>{11, -9, 1, 127});
  auto st = cm::quantized_mul_out<I8>(ctx, ta, 0, tb, -1, 1, int64_t{1} << 40, 0, ty);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("cortex_m::quantized_mul.out: output multiplier"));
  REQUIRE(cm::maximum_out<I8>(ctx, ta, tb, ty));
  CHECK(y == std::vector<int8_t>{10, 1, 1, 127});
  std::vector<int8_t> lut(256);
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<int8_t>(255 - i - 128);
  Tensor tlut = mk(ScalarType::Char, {256}, lut.data());
  REQUIRE(cm::quantized_activation_out<I8>(ctx, ta, tlut, ty));
  CHECK(y == std::vector<int8_t>{-11, 9, -1, -128});
  // pad a channels-last [1, 2, 1, 1] tensor: pads are physical (N, H, W, C)
  std::vector<int8_t> px = {1, 2}, py(2 * 3 * 1 * 1 * 1, 0);
  Tensor tpx = mk(ScalarType::Char, {1, 2, 1, 1}, px.data(), kNHWC), tpy = mk(ScalarType::Char, {1, 3, 2, 1}, py.data(), kNHWC);
  const std::vector<int64_t> pre = {0, 1, 0, 1}, post = {0, 0, 0, 0};
  REQUIRE(cm::pad_out<I8>(ctx, tpx, pre, post, -7, tpy));
  CHECK(tpy.size(1) == 3);
  CHECK(tpy.size(2) == 2);
  CHECK(py == std::vector<int8_t>{-7, -7, -7, -7, 1, 2});  // (h, w, c): row h=0 and channel c=0 are padding
  std::vector<int8_t> tx = {1, 2, 3, 4, 5, 6}, ty2(6);
  Tensor ttx = mk(ScalarType::Char, {2, 3}, tx.data()), tty = mk(ScalarType::Char, {3, 2}, ty2.data());
  const std::vector<int64_t> perm = {1, 0};
  REQUIRE(cm::transpose_out<I8>(ctx, ttx, perm, tty));
  CHECK(ty2 == std::vector<int8_t>{1, 4, 2, 5, 3, 6});
  std::vector<float> f = {0.25f, 0.75f, -100.f, 1.f};
  std::vector<int8_t> qf(4);
  Tensor tf = mk(ScalarType::Float, {4}, f.data()), tqf = mk(ScalarType::Char, {4}, qf.data());
  REQUIRE(cm::quantize_per_tensor_out<I8>(ctx, tf, 0.5, 1, -128, 127, ScalarType::Char, tqf));
  CHECK(qf == std::vector<int8_t>{1, 3, -128, 3});
  REQUIRE(cm::dequantize_per_tensor_out<I8>(ctx, tqf, 0.5, 1, -128, 127, ScalarType::Char, tf));
  CHECK(f == std::vector<float>{0.f, 1.f, -64.5f, 1.f});
  st = cm::quantize_per_tensor_out<I8>(ctx, tf, 0.5, 300, -128, 127, ScalarType::Char, tqf);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("zero_point"));
  int n = 0;
  for (const auto& e : etrt::generated::portable_kernels()) n += e.name.starts_with("cortex_m::");
  CHECK(n == 23);  // every operator of the wheel's cortex_m operators.yaml (test_cortex_m.py checks the names)
}
