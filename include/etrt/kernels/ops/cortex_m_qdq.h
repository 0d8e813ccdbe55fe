// cortex_m:: quantize_per_tensor (float32 -> int8) and dequantize_per_tensor (int8 -> float32).
//
// quantize: q = clamp(nearbyint(x * (1.0f / float(scale))) + zero_point, quant_min, quant_max), in float32 with
// round half to even (the wheel's reference is the edge quantize_per_tensor, computed the same way).
// dequantize: (float(q) - float(zero_point)) * float(scale).
#pragma once

#include <cmath>

#include "etrt/kernels/ops/cortex_m_common.h"

namespace etrt::kernels::cortex_m {

namespace qdq_detail {
inline Status check(std::string_view op, double scale, int64_t zero_point, int64_t qmin, int64_t qmax,
                    ScalarType dtype) {
  if (dtype != ScalarType::Char) return fail(Error::InvalidArgument, op, ": dtype must be Char (int8), got ", name(dtype));
  ETRT_CHECK_OK(check_zero_point(op, "zero_point", zero_point));
  ETRT_CHECK_OK(check_range(op, "quant_min", qmin, -128, 127));
  ETRT_CHECK_OK(check_range(op, "quant_max", qmax, -128, 127));
  if (qmin > qmax) return fail(Error::InvalidArgument, op, ": quant_min ", qmin, " > quant_max ", qmax);
  const float fs = static_cast<float>(scale);
  if (!std::isfinite(fs) || !(fs > 0.0f))
    return fail(Error::InvalidArgument, op, ": scale ", scale, " must be finite and positive");
  return {};
}

/// Both ops once check() passed: input holds I, out (resized to input's sizes) gets O = f(x) per element.
template <class I, class O, class F>
inline Status map(std::string_view op, KernelContext& ctx, const Tensor& in, Tensor& out, F&& f) {
  ETRT_CHECK_OK(check_dtype(op, "input", in, dtype_of<I>));
  ETRT_CHECK_OK(check_dtype(op, "out", out, dtype_of<O>));
  ETRT_CHECK_OK(ctx.resize(op, out, in.sizes()));
  const Shape sh = shape_of(in.sizes());
  std::array<std::array<int64_t, kMaxDims>, 2> st{};
  for (int d = 0; d < in.dim(); ++d) st[0][d] = out.stride(d), st[1][d] = in.stride(d);
  const I* x = in.data_as<const I>();
  O* y = out.data_as<O>();
  for_each_offset<2>(sh, st, [&](const std::array<int64_t, 2>& off) { y[off[0]] = f(x[off[1]]); });
  return {};
}
}  // namespace qdq_detail

template <class Dtypes>
Status quantize_per_tensor_out(KernelContext& ctx, const Tensor& input, double scale, int64_t zero_point,
                               int64_t quant_min, int64_t quant_max, ScalarType dtype, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantize_per_tensor.out";
  ETRT_CHECK_OK(qdq_detail::check(op, scale, zero_point, quant_min, quant_max, dtype));
  const float inv = 1.0f / static_cast<float>(scale);
  const float lo = static_cast<float>(quant_min), hi = static_cast<float>(quant_max), zp = static_cast<float>(zero_point);
  return qdq_detail::map<float, int8_t>(op, ctx, input, out, [&](float x) {
    float v = std::nearbyint(x * inv) + zp;
    v = std::fmax(v, lo);  // NaN -> lo
    v = std::fmin(v, hi);
    return static_cast<int8_t>(v);
  });
}

template <class Dtypes>
Status dequantize_per_tensor_out(KernelContext& ctx, const Tensor& input, double scale, int64_t zero_point,
                                 int64_t quant_min, int64_t quant_max, ScalarType dtype, Tensor& out) {
  constexpr std::string_view op = "cortex_m::dequantize_per_tensor.out";
  ETRT_CHECK_OK(qdq_detail::check(op, scale, zero_point, quant_min, quant_max, dtype));
  const float fs = static_cast<float>(scale), zp = static_cast<float>(zero_point);
  return qdq_detail::map<int8_t, float>(op, ctx, input, out,
                                        [&](int8_t q) { return (static_cast<float>(q) - zp) * fs; });
}

}  // namespace etrt::kernels::cortex_m
