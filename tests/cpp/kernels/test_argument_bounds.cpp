// Scalar arguments the tensors do not bound: a file can pass any int64 or double as a size, pad, stride, zero point
// or range, and a tensor with one zero dim can declare others near int64's maximum without any storage. Each case
// below once overflowed, converted out of range or allocated without bound before the kernel checked it.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "etrt/kernels/ops/conv.h"
#include "etrt/kernels/ops/cortex_m_conv.h"
#include "etrt/kernels/ops/cortex_m_movement.h"
#include "etrt/kernels/ops/cortex_m_pool.h"
#include "etrt/kernels/ops/fill.h"
#include "etrt/kernels/ops/pad.h"
#include "etrt/kernels/ops/pool.h"
#include "etrt/kernels/ops/quantized.h"
#include "etrt/kernels/ops/quantized_embedding.h"
#include "etrt/kernels/ops/quantized_mixed.h"
#include "etrt/kernels/ops/quantized_per_token.h"
#include "etrt/kernels/ops/shape.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
namespace cm = etrt::kernels::cortex_m;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
using I8 = types<int8_t>;
}  // namespace

TEST_CASE("Scalar::to_int saturates a double and maps NaN to 0", "[kernels][bounds]") {
  CHECK(Scalar{1e300}.to_int() == kMax);
  CHECK(Scalar{-1e300}.to_int() == kMin);
  CHECK(Scalar{std::nan("")}.to_int() == 0);
  CHECK(Scalar{0x1p63}.to_int() == kMax);
  CHECK(Scalar{-0x1p63}.to_int() == kMin);
  CHECK(Scalar{2.9}.to_int() == 2);
  CHECK(Scalar{-2.9}.to_int() == -2);
  CHECK(Scalar{int64_t{kMin}}.to_int() == kMin);
}

TEST_CASE("arange over int64's whole range", "[kernels][bounds]") {
  KernelContext ctx;
  // torch.arange(-2**63, 2**63 - 1, 2**62) -> [-2**63, -2**62, 0, 2**62]
  std::vector<int64_t> o(4, 7);
  Tensor t4 = mk(o, {4});
  REQUIRE(arange_start_out<real_types>(ctx, Scalar{kMin}, Scalar{kMax}, Scalar{int64_t{1} << 62}, t4));
  CHECK(o == std::vector<int64_t>{kMin, -(int64_t{1} << 62), 0, int64_t{1} << 62});
  // 2**64 - 1 elements: refused, not wrapped to an empty result
  auto st = arange_start_out<real_types>(ctx, Scalar{kMin}, Scalar{kMax}, Scalar{int64_t{1}}, t4);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("too many elements"));
  // integer start and step with a floating end: start + i * step wraps as int64 arithmetic does
  std::vector<int64_t> o3(3);
  Tensor t3 = mk(o3, {3});
  REQUIRE(arange_start_out<real_types>(ctx, Scalar{int64_t{1} << 62}, Scalar{1.7e19}, Scalar{int64_t{1} << 62}, t3));
  CHECK(o3 == std::vector<int64_t>{int64_t{1} << 62, kMin, -(int64_t{1} << 62)});
  // floating start and step far beyond int64 into an integer output: empty, and nothing converted out of range
  std::vector<int64_t> o0(1);
  Tensor t0 = mk(o0, {0});
  REQUIRE(arange_start_out<real_types>(ctx, Scalar{1e300}, Scalar{1e300}, Scalar{1.0}, t0));
}

TEST_CASE("constant_pad_nd with pads at int64's extremes", "[kernels][bounds]") {
  KernelContext ctx;
  std::vector<float> x = {1, 2}, y(1, -1);
  Tensor tx = mk(x, {2}), ty = mk(y, {1});
  const std::vector<int64_t> huge = {kMax, kMax};
  auto st = constant_pad_nd_out<real_types>(ctx, tx, huge, Scalar{5.0}, ty);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("too large"));
  // 2 + (-2**63) + (2**63 - 1) = 1 element, all of it padding: the crop reaches past the whole input
  const std::vector<int64_t> crop = {kMin, kMax};
  REQUIRE(constant_pad_nd_out<real_types>(ctx, tx, crop, Scalar{5.0}, ty));
  CHECK(y == std::vector<float>{5});
}

TEST_CASE("narrow_copy and as_strided_copy: ranges past int64", "[kernels][bounds]") {
  KernelContext ctx;
  std::vector<float> x = {1, 2, 3, 4}, y(3);
  Tensor tx = mk(x, {4}), t1 = mk(y, {1});
  auto st = narrow_copy_out<real_bool_types>(ctx, tx, 0, 4, kMax, t1);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("exceeds dim size"));

  Tensor t3 = mk(y, {3});
  const std::vector<int64_t> size3 = {3}, stride_huge = {int64_t{1} << 62};
  st = as_strided_copy_out<real_bool_types>(ctx, tx, size3, stride_huge, std::nullopt, t3);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("reaches element"));
  // an empty view may name any offset (as in torch); nothing is read
  Tensor t0 = mk(y, {0});
  const std::vector<int64_t> size0 = {0}, stride1 = {1};
  REQUIRE(as_strided_copy_out<real_bool_types>(ctx, tx, size0, stride1, int64_t{1} << 62, t0));
}

TEST_CASE("pooling: output sizes and int64 averages at the extremes", "[kernels][bounds]") {
  KernelContext ctx;
  std::vector<float> none(1);
  Tensor empty_hw = mk(ScalarType::Float, {1, 0, 1}, none.data()), o111 = mk(ScalarType::Float, {1, 1, 1}, none.data());
  const std::vector<int64_t> os = {int64_t{1} << 32, int64_t{1} << 32};
  auto st = adaptive_avg_pool2d_out<real_types>(ctx, empty_hw, os, o111);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("empty spatial input"));

  // one int64 element of 2**63 - 1 averaged over a 1x1 window is itself (the double sum rounds up to 2**63)
  std::vector<int64_t> xi = {kMax}, yi = {0};
  Tensor txi = mk(xi, {1, 1, 1, 1}), tyi = mk(yi, {1, 1, 1, 1});
  const std::vector<int64_t> k1 = {1, 1}, p0 = {0, 0}, k2 = {2, 2}, p1 = {1, 1};
  REQUIRE(avg_pool2d_out<types<int64_t>>(ctx, txi, k1, k1, p0, false, true, std::nullopt, tyi));
  CHECK(yi[0] == kMax);

  // an empty input whose width is near int64's maximum: refused before the output size is worked out
  std::vector<int8_t> b(1);
  Tensor wide = mk(ScalarType::Char, {1, 0, 1, kMax}, b.data()), o = mk(ScalarType::Char, {1}, b.data());
  std::vector<int64_t> idx(1);
  Tensor ti = mk(idx, {1});
  st = max_pool2d_with_indices_out<real_types>(ctx, wide, k2, k1, p1, k1, false, o, ti);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("too large to pool"));
}

TEST_CASE("quantize / choose_qparams / quantized add at their types' extremes", "[kernels][bounds]") {
  KernelContext ctx;
  // 3e9 quantized to int32 with quant_max INT32_MAX saturates (float(INT32_MAX) rounds up to 2**31)
  std::vector<float> x = {3e9f, -3e9f};
  std::vector<int32_t> q(2);
  Tensor tx = mk(x, {2}), tq = mk(q, {2});
  REQUIRE(quantize_per_tensor_out<types<int32_t>>(ctx, tx, 1.0, 0, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max(), ScalarType::Int, tq));
  CHECK(q == std::vector<int32_t>{std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()});

  // a floating zero point that does not convert to int64 is refused, as torch's item<int64_t>() refuses it
  std::vector<float> one = {1.f}, zp = {std::nanf("")};
  std::vector<double> scale = {1.0};
  std::vector<int8_t> q8(1);
  Tensor t1 = mk(one, {1}), tzp = mk(zp, {1}), tsc = mk(scale, {1}), tq8 = mk(q8, {1});
  auto st = quantize_per_tensor_tensor_out<I8>(ctx, t1, tsc, tzp, -128, 127, ScalarType::Char, tq8);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("cannot be converted to int64"));
  zp[0] = 1e19f;
  st = dequantize_per_tensor_tensor_out<I8>(ctx, tq8, tsc, tzp, -128, 127, ScalarType::Char, std::nullopt, t1);
  REQUIRE_FALSE(st);
  // an int64 zero point of INT64_MAX is read exactly (not through a double rounding it to 2**63)
  std::vector<int64_t> zpl = {kMax};
  Tensor tzpl = mk(zpl, {1});
  REQUIRE(quantize_per_tensor_tensor_out<I8>(ctx, t1, tsc, tzpl, -128, 127, ScalarType::Char, tq8));
  CHECK(q8[0] == 127);

  // the whole int32 range: qmax - qmin does not fit int32; the zero point lands near 0 for a symmetric range
  std::vector<float> r = {-1.f, 1.f};
  std::vector<double> so(1);
  std::vector<int64_t> zo(1);
  Tensor tr = mk(r, {2}), tso = mk(so, {1}), tzo = mk(zo, {1});
  REQUIRE(choose_qparams_tensor_out<float_types>(ctx, tr, std::numeric_limits<int32_t>::min(),
                                                 std::numeric_limits<int32_t>::max(), 1e-7, ScalarType::Int, tso, tzo));
  CHECK(so[0] == Approx(6.1e-5));
  CHECK(std::abs(zo[0]) <= 1024);

  // int64 quantized add: INT64_MIN minus a zero point of 1 must not wrap to a large positive value
  std::vector<int64_t> a = {kMin}, bz = {0}, out = {0};
  Tensor ta = mk(a, {1}), tb = mk(bz, {1}), to = mk(out, {1});
  REQUIRE(quantized_add_out<types<int64_t>>(ctx, ta, 1.0, 1, kMin, kMax, tb, 1.0, 0, kMin, kMax, 1.0, 0, kMin, kMax,
                                            to));
  CHECK(out[0] == kMin);
}

TEST_CASE("embedding_4bit: an empty weight with rows too long to unpack", "[kernels][bounds]") {
  KernelContext ctx;
  std::vector<uint8_t> w(1);
  std::vector<float> s(1), o(1);
  std::vector<int64_t> idx(1);
  Tensor tw = mk(ScalarType::Byte, {0, int64_t{1} << 62}, w.data()), ts = mk(s, {0}), ti = mk(idx, {0}),
         to = mk(o, {0});
  auto st = embedding_4bit_out<float_types>(ctx, tw, ts, nullptr, -8, 7, ti, to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("too long to unpack"));
}

TEST_CASE("convolution: groups beyond the channels in the error message", "[kernels][bounds]") {
  KernelContext ctx;
  std::vector<float> d(1);
  Tensor in = mk(ScalarType::Float, {1, 0, 4, 4}, d.data()), w = mk(ScalarType::Float, {0, 2, 3, 3}, d.data()),
         out = mk(ScalarType::Float, {1, 0, 2, 2}, d.data());
  const std::vector<int64_t> s1 = {1, 1}, p0 = {0, 0};
  auto st = convolution_out<float_types>(ctx, in, w, nullptr, s1, p0, s1, false, p0, kMax, out);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("does not match 0 input channels"));
}

TEST_CASE("cortex_m: sizes of empty tensors near int64's maximum", "[kernels][bounds][cortex_m]") {
  KernelContext ctx;
  std::vector<int8_t> b(4);
  std::vector<int32_t> m(1, 1 << 30), sh(1, 1);
  const std::vector<int64_t> one = {1, 1}, zero = {0, 0};
  Tensor scratch = mk(ScalarType::Char, {1}, b.data());
  // depthwise: 2**44 channels x depth_multiplier 2**20 wraps to 0 output channels
  {
    Tensor x = mk(ScalarType::Char, {0, int64_t{1} << 44, 1, 1}, b.data()),
           w = mk(ScalarType::Char, {1, 1, 1, 0}, b.data()), tm = mk(ScalarType::Int, {0}, m.data()),
           ts = mk(ScalarType::Int, {0}, sh.data()), y = mk(ScalarType::Char, {0, 0, 1, 1}, b.data());
    auto st = cm::quantized_depthwise_conv2d_out<I8>(ctx, x, w, nullptr, one, zero, one, int64_t{1} << 20, 0, 0, tm,
                                                     ts, -128, 127, scratch, y);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().what, Catch::Contains("depth_multiplier"));
  }
  Tensor tm = mk(ScalarType::Int, {1}, m.data()), ts = mk(ScalarType::Int, {1}, sh.data());
  // transposed: (2**44 - 1) * stride 2**20 overflows int64
  {
    Tensor x = mk(ScalarType::Char, {0, 1, int64_t{1} << 44, 1}, b.data()),
           w = mk(ScalarType::Char, {1, 1, 1, 1}, b.data()), y = mk(ScalarType::Char, {0, 1, 1, 1}, b.data());
    const std::vector<int64_t> stride = {int64_t{1} << 20, 1};
    auto st = cm::quantized_transpose_conv2d_out<I8>(ctx, x, w, nullptr, stride, zero, zero, one, 0, 0, tm, ts, -128,
                                                     127, scratch, scratch, y);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().what, Catch::Contains("too large"));
  }
  // transposed, empty batch with a (2**20 + 1)^2 plane: no accumulators are allocated for it
  {
    const int64_t side = (int64_t{1} << 20) + 1;
    Tensor x = mk(ScalarType::Char, {0, 1, 1, 1}, b.data()), w = mk(ScalarType::Char, {1, 2, 2, 1}, b.data()),
           y = mk(ScalarType::Char, {0, 1, side, side}, b.data());
    const std::vector<int64_t> dil = {int64_t{1} << 20, int64_t{1} << 20};
    REQUIRE(cm::quantized_transpose_conv2d_out<I8>(ctx, x, w, nullptr, one, zero, zero, dil, 0, 0, tm, ts, -128, 127,
                                                   scratch, scratch, y));
  }
  // max pool: padding 2**62 doubled overflows
  {
    Tensor x = mk(ScalarType::Char, {1, 1, 2, 2}, b.data()), y = mk(ScalarType::Char, {1, 1, 2, 2}, b.data());
    const std::vector<int64_t> pad = {int64_t{1} << 62, 0};
    auto st = cm::quantized_max_pool2d_out<I8>(ctx, x, one, one, pad, one, false, 0, 0, -128, 127, y);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().what, Catch::Contains("must be in [0"));
  }
  // pad: 2**63 - 1 + 2 * 2**31
  {
    Tensor x = mk(ScalarType::Char, {0, kMax}, b.data()), y = mk(ScalarType::Char, {0, 1}, b.data());
    const std::vector<int64_t> pre = {0, 0, 0, int64_t{1} << 31}, post = {0, 0, 0, int64_t{1} << 31};
    auto st = cm::pad_out<I8>(ctx, x, pre, post, 0, y);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().what, Catch::Contains("too large"));
  }
}
