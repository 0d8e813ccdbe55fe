// cortex_m::softmax.out: int8 softmax along one dimension (the Cortex-M flow lowers a quantized aten softmax to it).
//
// The program carries the input scale folded into a CMSIS-NN (multiplier, shift) pair for 5 integer bits; the
// reference semantics (the wheel's cortex_m reference implementation, which upstream's pip runtime has no kernel
// to compare with) recover the scale and run a float softmax:
//   scale = multiplier / 2^31 * 2^shift / 2^26
//   v     = float32(x - input_zero_point) * float32(scale)
//   p     = exp(v - max(v)) * (1 / sum(exp(v - max(v))))           (float32, along `dim`)
//   out   = clamp(nearbyint(p * 256) + output_zero_point, -128, 127)   (half to even)
// The output quantization is fixed by CMSIS-NN (scale 1/256, zero point -128); any other zero point is refused, as
// the reference refuses it. diff_min is the fixed-point kernel's cut-off and does not change the float result.
#pragma once

#include <cmath>
#include <vector>

#include "etrt/kernels/ops/cortex_m_common.h"

namespace etrt::kernels::cortex_m {

inline constexpr int kSoftmaxInputIntegerBits = 5;
inline constexpr int64_t kSoftmaxOutputZeroPoint = -128;

template <class Dtypes>
Status softmax_out(KernelContext& ctx, const Tensor& input, int64_t dim, int64_t input_zero_point,
                   int64_t output_zero_point, int64_t input_multiplier, int64_t input_shift, int64_t /*diff_min*/,
                   Tensor& out) {
  constexpr std::string_view op = "cortex_m::softmax.out";
  ETRT_CHECK_OK(check_dtype(op, "input", input, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "out", out, ScalarType::Char));
  ETRT_CHECK_OK(check_zero_point(op, "input_zero_point", input_zero_point));
  if (output_zero_point != kSoftmaxOutputZeroPoint)
    return fail(Error::InvalidArgument, op, ": output_zero_point must be ", kSoftmaxOutputZeroPoint,
                " (CMSIS-NN's fixed softmax output quantization), got ", output_zero_point);
  ETRT_CHECK_OK(check_range(op, "input_multiplier", input_multiplier, 1, std::numeric_limits<int32_t>::max()));
  ETRT_CHECK_OK(check_range(op, "input_shift", input_shift, -62, 62));
  const double scale = std::ldexp(static_cast<double>(input_multiplier) / 2147483648.0,
                                  static_cast<int>(input_shift) - (31 - kSoftmaxInputIntegerBits));
  const float fscale = static_cast<float>(scale);
  if (!(fscale > 0.0f) || !std::isfinite(fscale))
    return fail(Error::InvalidArgument, op, ": input_multiplier ", input_multiplier, " and input_shift ",
                input_shift, " give an input scale of ", scale, ", not a positive float32");
  const int rank = input.dim();
  int d = 0;
  if (rank > 0) {
    ETRT_TRY(d, mv::wrap_dim(op, dim, rank));
  } else if (dim != 0 && dim != -1) {
    return fail(Error::InvalidArgument, op, ": dim ", dim, " is out of range for a 0-D input");
  }
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  if (input.numel() == 0) return {};

  // Walk every lane along `dim`: the outer walk sees `dim` with size 1, the inner loop runs along it.
  Shape outer = shape_of(input.sizes());
  const int64_t n = rank > 0 ? outer.sizes[d] : 1;
  const int64_t xs = rank > 0 ? input.stride(d) : 0, ys = rank > 0 ? out.stride(d) : 0;
  if (rank > 0) outer.sizes[d] = 1;
  std::array<std::array<int64_t, kMaxDims>, 2> st{};
  for (int k = 0; k < rank; ++k) st[0][k] = out.stride(k), st[1][k] = input.stride(k);
  const int8_t* x = input.data_as<const int8_t>();
  int8_t* y = out.data_as<int8_t>();
  std::vector<float> e(static_cast<size_t>(n));
  for_each_offset<2>(outer, st, [&](const std::array<int64_t, 2>& off) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      e[i] = static_cast<float>(int64_t{x[off[1] + i * xs]} - input_zero_point) * fscale;
      mx = std::max(mx, e[i]);
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += (e[i] = std::exp(e[i] - mx));
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) {
      const float q = std::nearbyint(e[i] * inv * 256.0f) + static_cast<float>(output_zero_point);
      y[off[0] + i * ys] = static_cast<int8_t>(q < -128.0f ? -128.0f : q > 127.0f ? 127.0f : q);
    }
  });
  return {};
}

}  // namespace etrt::kernels::cortex_m
