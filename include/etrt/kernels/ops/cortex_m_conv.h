// cortex_m:: int8 convolutions: quantized_conv2d, quantized_depthwise_conv2d, quantized_transpose_conv2d and their
// *_nhwc variants (the same kernels with activations of logical shape [N, H, W, C]).
//
// Semantics (CMSIS-NN arm_convolve_s8 / arm_depthwise_conv_s8 / arm_transpose_conv_s8, as the wheel's reference
// implementations model them): acc = bias[o] + sum over the taps inside the input of (x + input_offset) * w (padded
// taps contribute nothing), accumulated in int32 (wrap-around); then requantize(acc, multiplier[o], shift[o]) (Note
// [cortex_m requantize]) + output_offset, clamped to [activation_min, activation_max].
// Weights: conv [O, KH, KW, C / groups] (OHWI; groups = C / weight.size(3)); depthwise [1, KH, KW, O] with
// O = C * depth_multiplier (output channel o reads input channel o / depth_multiplier); transpose conv
// [O, KH, KW, C] (groups 1). The scratch tensors are CMSIS-NN work buffers: never read.
#pragma once

#include <algorithm>
#include <vector>

#include "etrt/kernels/ops/cortex_m_common.h"

namespace etrt::kernels::cortex_m {

namespace conv_detail {

struct ConvArgs {
  std::array<int64_t, 2> stride, pad, dil;
  int32_t in_off, out_off, act_min, act_max;
};

inline Result<ConvArgs> conv_args(std::string_view op, std::span<const int64_t> stride, std::span<const int64_t> padding,
                                  std::span<const int64_t> dilation, int64_t input_offset, int64_t output_offset,
                                  int64_t act_min, int64_t act_max) {
  ConvArgs a;
  ETRT_TRY(a.stride, pair(op, "stride", stride));
  ETRT_TRY(a.pad, pair(op, "padding", padding));
  ETRT_TRY(a.dil, pair(op, "dilation", dilation));
  ETRT_CHECK_OK(check_offset(op, "input_offset", input_offset));
  ETRT_CHECK_OK(check_zero_point(op, "output_offset", output_offset));
  ETRT_CHECK_OK(check_activation(op, act_min, act_max));
  a.in_off = static_cast<int32_t>(input_offset);
  a.out_off = static_cast<int32_t>(output_offset);
  a.act_min = static_cast<int32_t>(act_min);
  a.act_max = static_cast<int32_t>(act_max);
  return a;
}

inline Status check_io(std::string_view op, const Tensor& input, const Tensor& weight, const Tensor* bias,
                       int64_t out_channels) {
  ETRT_CHECK_OK(check_dtype(op, "input", input, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "weight", weight, ScalarType::Char));
  ETRT_CHECK_OK(check_rank(op, "input", input, 4));
  ETRT_CHECK_OK(check_rank(op, "weight", weight, 4));
  if (bias) {
    ETRT_CHECK_OK(check_dtype(op, "bias", *bias, ScalarType::Int));
    if (bias->dim() != 1 || bias->size(0) != out_channels)
      return fail(Error::InvalidArgument, op, ": bias ", bias->describe(), " must have ", out_channels, " values");
  }
  return {};
}

inline int32_t bias_at(const Tensor* bias, int64_t o) { return bias ? bias->data_as<int32_t>()[o * bias->stride(0)] : 0; }

inline int32_t finish(int64_t acc, const ChannelQuant& q, int64_t o, const ConvArgs& a) {
  const int64_t v = static_cast<int64_t>(requantize(wrap32(acc), q.multiplier(o), q.shift(o))) + a.out_off;
  return clamp_to(v, a.act_min, a.act_max);
}

/// conv (depth_multiplier == 0) or depthwise conv (depth_multiplier >= 1) over (n, c, h, w) views.
inline Status run_conv(std::string_view op, KernelContext& ctx, const Tensor& input, const Tensor& weight,
                       const Tensor* bias, const ConvArgs& a, const Tensor& mult, const Tensor& shift,
                       int64_t depth_multiplier, bool nhwc, Tensor& out) {
  const bool dw = depth_multiplier > 0;
  const int64_t O = dw ? weight.size(3) : weight.size(0);
  ETRT_CHECK_OK(check_io(op, input, weight, bias, O));
  ETRT_CHECK_OK(check_dtype(op, "out", out, ScalarType::Char));
  const Act4<const int8_t> x = act4<const int8_t>(input, nhwc);
  const int64_t KH = weight.size(1), KW = weight.size(2), Cg = dw ? 1 : weight.size(3);
  int64_t groups = 1;
  if (dw) {
    if (weight.size(0) != 1 || O % depth_multiplier != 0 || O / depth_multiplier != x.C)
      return fail(Error::InvalidArgument, op, ": weight ", weight.describe(), " does not match ", x.C,
                  " input channels with depth_multiplier ", depth_multiplier);
  } else {
    if (Cg < 1 || x.C % Cg != 0 || O % (x.C / Cg) != 0)
      return fail(Error::InvalidArgument, op, ": weight ", weight.describe(), " does not match ", x.C,
                  " input channels");
    groups = x.C / Cg;
  }
  ETRT_TRY(int64_t OH, window_out(op, x.H, KH, a.stride[0], a.pad[0], a.dil[0], false));
  ETRT_TRY(int64_t OW, window_out(op, x.W, KW, a.stride[1], a.pad[1], a.dil[1], false));
  ETRT_TRY(ChannelQuant q, channel_quant(op, mult, shift, O));
  const auto osz = act_sizes(x.N, O, OH, OW, nhwc);
  ETRT_CHECK_OK(ctx.resize(op, out, osz));
  const Act4<int8_t> y = act4<int8_t>(out, nhwc);
  const int8_t* w = weight.data_as<const int8_t>();
  const int64_t w0 = weight.stride(0), w1 = weight.stride(1), w2 = weight.stride(2), w3 = weight.stride(3);
  const int64_t Og = O / groups;
  for (int64_t n = 0; n < x.N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t c0 = dw ? o / depth_multiplier : (o / Og) * Cg;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t acc = bias_at(bias, o);
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * a.stride[0] - a.pad[0] + kh * a.dil[0];
            if (ih < 0 || ih >= x.H) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * a.stride[1] - a.pad[1] + kw * a.dil[1];
              if (iw < 0 || iw >= x.W) continue;
              if (dw) {
                acc += (int64_t{x.at(n, c0, ih, iw)} + a.in_off) * w[kh * w1 + kw * w2 + o * w3];
              } else {
                const int8_t* wp = w + o * w0 + kh * w1 + kw * w2;
                for (int64_t c = 0; c < Cg; ++c) acc += (int64_t{x.at(n, c0 + c, ih, iw)} + a.in_off) * wp[c * w3];
              }
            }
          }
          y.at(n, o, oh, ow) = static_cast<int8_t>(finish(acc, q, o, a));
        }
    }
  return {};
}

inline Status run_transpose_conv(std::string_view op, KernelContext& ctx, const Tensor& input, const Tensor& weight,
                                 const Tensor* bias, const ConvArgs& a, std::span<const int64_t> output_padding,
                                 const Tensor& mult, const Tensor& shift, bool nhwc, Tensor& out) {
  ETRT_CHECK_OK(check_io(op, input, weight, bias, weight.size(0)));
  ETRT_CHECK_OK(check_dtype(op, "out", out, ScalarType::Char));
  const Act4<const int8_t> x = act4<const int8_t>(input, nhwc);
  const int64_t O = weight.size(0), KH = weight.size(1), KW = weight.size(2);
  if (weight.size(3) != x.C)
    return fail(Error::InvalidArgument, op, ": weight ", weight.describe(), " does not match ", x.C,
                " input channels (groups must be 1, as the Cortex-M quantizer requires of transposed convolutions)");
  ETRT_TRY(auto opad, pair(op, "output_padding", output_padding));
  std::array<int64_t, 2> osp{};
  const int64_t in_sp[2] = {x.H, x.W}, k[2] = {KH, KW};
  for (int d = 0; d < 2; ++d) {
    if (a.stride[d] < 1 || a.dil[d] < 1 || a.pad[d] < 0 || opad[d] < 0 || a.stride[d] > (1 << 20) ||
        a.dil[d] > (1 << 20) || a.pad[d] > (1 << 20) || opad[d] > (1 << 20))
      return fail(Error::InvalidArgument, op, ": stride, padding, output_padding or dilation is invalid");
    // In 128 bits: an empty input's or weight's sizes are not bounded by their storage.
    using I = __int128;
    const I size = (I{in_sp[d]} - 1) * a.stride[d] - 2 * I{a.pad[d]} + I{a.dil[d]} * (k[d] - 1) + opad[d] + 1;
    if (size < 1 || size > INT64_MAX)
      return fail(Error::InvalidArgument, op, ": the output size at spatial dim ", d, " would be ",
                  size < 1 ? "empty" : "too large", " (input ", input.describe(), ", weight ", weight.describe(), ")");
    osp[d] = static_cast<int64_t>(size);
  }
  ETRT_TRY(ChannelQuant q, channel_quant(op, mult, shift, O));
  ETRT_CHECK_OK(ctx.resize(op, out, act_sizes(x.N, O, osp[0], osp[1], nhwc)));
  if (out.numel() == 0) return {};  // before the accumulators: an empty batch may still declare a huge plane
  const Act4<int8_t> y = act4<int8_t>(out, nhwc);
  const int8_t* w = weight.data_as<const int8_t>();
  const int64_t w0 = weight.stride(0), w1 = weight.stride(1), w2 = weight.stride(2), w3 = weight.stride(3);
  std::vector<int64_t> acc(static_cast<size_t>(osp[0] * osp[1]));
  for (int64_t n = 0; n < x.N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      std::fill(acc.begin(), acc.end(), int64_t{bias_at(bias, o)});
      for (int64_t ih = 0; ih < x.H; ++ih)
        for (int64_t iw = 0; iw < x.W; ++iw)
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t oh = ih * a.stride[0] - a.pad[0] + kh * a.dil[0];
            if (oh < 0 || oh >= osp[0]) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t ow = iw * a.stride[1] - a.pad[1] + kw * a.dil[1];
              if (ow < 0 || ow >= osp[1]) continue;
              int64_t s = 0;
              for (int64_t c = 0; c < x.C; ++c)
                s += (int64_t{x.at(n, c, ih, iw)} + a.in_off) * w[o * w0 + kh * w1 + kw * w2 + c * w3];
              acc[oh * osp[1] + ow] += s;
            }
          }
      for (int64_t oh = 0; oh < osp[0]; ++oh)
        for (int64_t ow = 0; ow < osp[1]; ++ow)
          y.at(n, o, oh, ow) = static_cast<int8_t>(finish(acc[oh * osp[1] + ow], q, o, a));
    }
  return {};
}

}  // namespace conv_detail

template <class Dtypes>
Status quantized_conv2d_out(KernelContext& ctx, const Tensor& input, const Tensor& weight, const Tensor* bias,
                            std::span<const int64_t> stride, std::span<const int64_t> padding,
                            std::span<const int64_t> dilation, int64_t input_offset, int64_t output_offset,
                            const Tensor& mult, const Tensor& shift, int64_t act_min, int64_t act_max,
                            const Tensor& /*scratch*/, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_conv2d.out";
  ETRT_TRY(auto a, conv_detail::conv_args(op, stride, padding, dilation, input_offset, output_offset, act_min, act_max));
  return conv_detail::run_conv(op, ctx, input, weight, bias, a, mult, shift, 0, false, out);
}

template <class Dtypes>
Status quantized_conv2d_nhwc_out(KernelContext& ctx, const Tensor& input, const Tensor& weight, const Tensor* bias,
                                 std::span<const int64_t> stride, std::span<const int64_t> padding,
                                 std::span<const int64_t> dilation, int64_t input_offset, int64_t output_offset,
                                 const Tensor& mult, const Tensor& shift, int64_t act_min, int64_t act_max,
                                 const Tensor& /*scratch*/, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_conv2d_nhwc.out";
  ETRT_TRY(auto a, conv_detail::conv_args(op, stride, padding, dilation, input_offset, output_offset, act_min, act_max));
  return conv_detail::run_conv(op, ctx, input, weight, bias, a, mult, shift, 0, true, out);
}

template <class Dtypes>
Status quantized_depthwise_conv2d_out(KernelContext& ctx, const Tensor& input, const Tensor& weight,
                                      const Tensor* bias, std::span<const int64_t> stride,
                                      std::span<const int64_t> padding, std::span<const int64_t> dilation,
                                      int64_t depth_multiplier, int64_t input_offset, int64_t output_offset,
                                      const Tensor& mult, const Tensor& shift, int64_t act_min, int64_t act_max,
                                      const Tensor& /*scratch*/, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_depthwise_conv2d.out";
  ETRT_CHECK_OK(check_range(op, "depth_multiplier", depth_multiplier, 1, int64_t{1} << 20));
  ETRT_TRY(auto a, conv_detail::conv_args(op, stride, padding, dilation, input_offset, output_offset, act_min, act_max));
  return conv_detail::run_conv(op, ctx, input, weight, bias, a, mult, shift, depth_multiplier, false, out);
}

template <class Dtypes>
Status quantized_depthwise_conv2d_nhwc_out(KernelContext& ctx, const Tensor& input, const Tensor& weight,
                                           const Tensor* bias, std::span<const int64_t> stride,
                                           std::span<const int64_t> padding, std::span<const int64_t> dilation,
                                           int64_t depth_multiplier, int64_t input_offset, int64_t output_offset,
                                           const Tensor& mult, const Tensor& shift, int64_t act_min, int64_t act_max,
                                           const Tensor& /*scratch*/, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_depthwise_conv2d_nhwc.out";
  ETRT_CHECK_OK(check_range(op, "depth_multiplier", depth_multiplier, 1, int64_t{1} << 20));
  ETRT_TRY(auto a, conv_detail::conv_args(op, stride, padding, dilation, input_offset, output_offset, act_min, act_max));
  return conv_detail::run_conv(op, ctx, input, weight, bias, a, mult, shift, depth_multiplier, true, out);
}

template <class Dtypes>
Status quantized_transpose_conv2d_out(KernelContext& ctx, const Tensor& input, const Tensor& weight,
                                      const Tensor* bias, std::span<const int64_t> stride,
                                      std::span<const int64_t> padding, std::span<const int64_t> output_padding,
                                      std::span<const int64_t> dilation, int64_t input_offset, int64_t output_offset,
                                      const Tensor& mult, const Tensor& shift, int64_t act_min, int64_t act_max,
                                      const Tensor& /*scratch*/, const Tensor& /*output_scratch*/, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_transpose_conv2d.out";
  ETRT_TRY(auto a, conv_detail::conv_args(op, stride, padding, dilation, input_offset, output_offset, act_min, act_max));
  return conv_detail::run_transpose_conv(op, ctx, input, weight, bias, a, output_padding, mult, shift, false, out);
}

template <class Dtypes>
Status quantized_transpose_conv2d_nhwc_out(KernelContext& ctx, const Tensor& input, const Tensor& weight,
                                           const Tensor* bias, std::span<const int64_t> stride,
                                           std::span<const int64_t> padding, std::span<const int64_t> output_padding,
                                           std::span<const int64_t> dilation, int64_t input_offset,
                                           int64_t output_offset, const Tensor& mult, const Tensor& shift,
                                           int64_t act_min, int64_t act_max, const Tensor& /*scratch*/,
                                           const Tensor& /*output_scratch*/, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_transpose_conv2d_nhwc.out";
  ETRT_TRY(auto a, conv_detail::conv_args(op, stride, padding, dilation, input_offset, output_offset, act_min, act_max));
  return conv_detail::run_transpose_conv(op, ctx, input, weight, bias, a, output_padding, mult, shift, true, out);
}

}  // namespace etrt::kernels::cortex_m
