// cortex_m:: int8 pooling: quantized_avg_pool2d and quantized_max_pool2d (+ *_nhwc variants over [N, H, W, C]).
//
// avg (CMSIS-NN arm_avgpool_s8): over the window's taps that lie inside the input (count_include_pad = False), the
// int32 sum s of the raw int8 values and their count k; the result is s / k rounded to nearest with ties away from
// zero ((s + k/2) / k for s > 0, else (s - k/2) / k, truncating division), clamped to int8. The input and output
// share their quantization, so zero_point / multiplier / shift are checked but not needed. For windows whose mean is
// never a tie (for instance an odd tap count) this equals the wheel's float reference; on ties the wheel's
// round-half-to-even may differ by one from the integer kernel a device runs.
// max (arm_max_pool_s8): the largest tap inside the input, clamped to [activation_min, activation_max]; dilation 1,
// no ceil_mode and input_zero_point == output_zero_point, as the wheel requires.
#pragma once

#include "etrt/kernels/ops/cortex_m_common.h"

namespace etrt::kernels::cortex_m {

namespace pool_detail {

struct PoolGeo {
  std::array<int64_t, 2> k, s, p;
  int64_t OH, OW;
};

inline Result<PoolGeo> geometry(std::string_view op, const Tensor& input, const Tensor& out, bool nhwc,
                                std::span<const int64_t> kernel, std::span<const int64_t> stride,
                                std::span<const int64_t> padding, bool ceil_mode) {
  ETRT_CHECK_OK(check_dtype(op, "input", input, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "out", out, ScalarType::Char));
  ETRT_CHECK_OK(check_rank(op, "input", input, 4));
  PoolGeo g;
  ETRT_TRY(g.k, pair(op, "kernel_size", kernel));
  ETRT_TRY(g.s, pair(op, "stride", stride.empty() ? kernel : stride));
  ETRT_TRY(g.p, pair(op, "padding", padding));
  for (int d = 0; d < 2; ++d)
    if (g.p[d] < 0 || g.p[d] > g.k[d] / 2)
      return fail(Error::InvalidArgument, op, ": padding ", g.p[d], " must be in [0, kernel_size / 2 = ", g.k[d] / 2,
                  "]");
  const Act4<const int8_t> x = act4<const int8_t>(input, nhwc);
  ETRT_TRY(g.OH, window_out(op, x.H, g.k[0], g.s[0], g.p[0], 1, ceil_mode));
  ETRT_TRY(g.OW, window_out(op, x.W, g.k[1], g.s[1], g.p[1], 1, ceil_mode));
  return g;
}

/// f(n, c, oh, ow, h0, h1, w0, w1) for every output, with the window clipped to the input: [h0, h1) x [w0, w1).
template <class F>
inline void for_each_window(const Act4<const int8_t>& x, const PoolGeo& g, F&& f) {
  for (int64_t n = 0; n < x.N; ++n)
    for (int64_t c = 0; c < x.C; ++c)
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t hs = oh * g.s[0] - g.p[0];
        const int64_t h0 = std::max<int64_t>(hs, 0), h1 = std::min<int64_t>(hs + g.k[0], x.H);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t ws = ow * g.s[1] - g.p[1];
          const int64_t w0 = std::max<int64_t>(ws, 0), w1 = std::min<int64_t>(ws + g.k[1], x.W);
          f(n, c, oh, ow, h0, h1, w0, w1);
        }
      }
}

inline Status avg_pool(std::string_view op, KernelContext& ctx, const Tensor& input, std::span<const int64_t> kernel,
                       std::span<const int64_t> stride, std::span<const int64_t> padding, bool ceil_mode,
                       int64_t zero_point, int64_t multiplier, int64_t shift, bool nhwc, Tensor& out) {
  ETRT_CHECK_OK(check_zero_point(op, "zero_point", zero_point));
  ETRT_CHECK_OK(check_requant(op, "", multiplier, shift));
  ETRT_TRY(PoolGeo g, geometry(op, input, out, nhwc, kernel, stride, padding, ceil_mode));
  const Act4<const int8_t> x = act4<const int8_t>(input, nhwc);
  ETRT_CHECK_OK(ctx.resize(op, out, act_sizes(x.N, x.C, g.OH, g.OW, nhwc)));
  const Act4<int8_t> y = act4<int8_t>(out, nhwc);
  bool empty = false;
  for_each_window(x, g, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, int64_t h0, int64_t h1, int64_t w0,
                            int64_t w1) {
    int64_t sum = 0, count = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) sum += x.at(n, c, h, w), ++count;
    if (count == 0) {
      empty = true;
      y.at(n, c, oh, ow) = 0;
      return;
    }
    const int64_t avg = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
    y.at(n, c, oh, ow) = static_cast<int8_t>(clamp_to(avg, -128, 127));
  });
  if (empty) return fail(Error::InvalidArgument, op, ": a pooling window lies entirely in the padding");
  return {};
}

inline Status max_pool(std::string_view op, KernelContext& ctx, const Tensor& input, std::span<const int64_t> kernel,
                       std::span<const int64_t> stride, std::span<const int64_t> padding,
                       std::span<const int64_t> dilation, bool ceil_mode, int64_t in_zp, int64_t out_zp,
                       int64_t act_min, int64_t act_max, bool nhwc, Tensor& out) {
  ETRT_CHECK_OK(check_zero_point(op, "input_zero_point", in_zp));
  ETRT_CHECK_OK(check_zero_point(op, "output_zero_point", out_zp));
  if (in_zp != out_zp)
    return fail(Error::InvalidArgument, op, ": input_zero_point ", in_zp, " != output_zero_point ", out_zp);
  ETRT_CHECK_OK(check_activation(op, act_min, act_max));
  ETRT_TRY(auto dil, pair(op, "dilation", dilation.empty() ? std::span<const int64_t>(std::array<int64_t, 1>{1})
                                                            : dilation));
  if (dil[0] != 1 || dil[1] != 1) return fail(Error::InvalidArgument, op, ": only dilation 1 is supported");
  if (ceil_mode) return fail(Error::InvalidArgument, op, ": ceil_mode is not supported");
  ETRT_TRY(PoolGeo g, geometry(op, input, out, nhwc, kernel, stride, padding, false));
  const Act4<const int8_t> x = act4<const int8_t>(input, nhwc);
  ETRT_CHECK_OK(ctx.resize(op, out, act_sizes(x.N, x.C, g.OH, g.OW, nhwc)));
  const Act4<int8_t> y = act4<int8_t>(out, nhwc);
  for_each_window(x, g, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, int64_t h0, int64_t h1, int64_t w0,
                            int64_t w1) {
    int32_t m = -128;  // padding <= kernel / 2 leaves every window at least one tap
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) m = std::max<int32_t>(m, x.at(n, c, h, w));
    y.at(n, c, oh, ow) = static_cast<int8_t>(clamp_to(m, act_min, act_max));
  });
  return {};
}

}  // namespace pool_detail

template <class Dtypes>
Status quantized_avg_pool2d_out(KernelContext& ctx, const Tensor& input, std::span<const int64_t> kernel_size,
                                std::span<const int64_t> stride, std::span<const int64_t> padding, bool ceil_mode,
                                int64_t zero_point, int64_t multiplier, int64_t shift, const Tensor& /*scratch*/,
                                Tensor& out) {
  return pool_detail::avg_pool("cortex_m::quantized_avg_pool2d.out", ctx, input, kernel_size, stride, padding,
                               ceil_mode, zero_point, multiplier, shift, false, out);
}

template <class Dtypes>
Status quantized_avg_pool2d_nhwc_out(KernelContext& ctx, const Tensor& input, std::span<const int64_t> kernel_size,
                                     std::span<const int64_t> stride, std::span<const int64_t> padding,
                                     bool ceil_mode, int64_t zero_point, int64_t multiplier, int64_t shift,
                                     const Tensor& /*scratch*/, Tensor& out) {
  return pool_detail::avg_pool("cortex_m::quantized_avg_pool2d_nhwc.out", ctx, input, kernel_size, stride, padding,
                               ceil_mode, zero_point, multiplier, shift, true, out);
}

template <class Dtypes>
Status quantized_max_pool2d_out(KernelContext& ctx, const Tensor& input, std::span<const int64_t> kernel_size,
                                std::span<const int64_t> stride, std::span<const int64_t> padding,
                                std::span<const int64_t> dilation, bool ceil_mode, int64_t input_zero_point,
                                int64_t output_zero_point, int64_t activation_min, int64_t activation_max,
                                Tensor& out) {
  return pool_detail::max_pool("cortex_m::quantized_max_pool2d.out", ctx, input, kernel_size, stride, padding,
                               dilation, ceil_mode, input_zero_point, output_zero_point, activation_min,
                               activation_max, false, out);
}

template <class Dtypes>
Status quantized_max_pool2d_nhwc_out(KernelContext& ctx, const Tensor& input, std::span<const int64_t> kernel_size,
                                     std::span<const int64_t> stride, std::span<const int64_t> padding,
                                     std::span<const int64_t> dilation, bool ceil_mode, int64_t input_zero_point,
                                     int64_t output_zero_point, int64_t activation_min, int64_t activation_max,
                                     Tensor& out) {
  return pool_detail::max_pool("cortex_m::quantized_max_pool2d_nhwc.out", ctx, input, kernel_size, stride, padding,
                               dilation, ceil_mode, input_zero_point, output_zero_point, activation_min,
                               activation_max, true, out);
}

}  // namespace etrt::kernels::cortex_m
