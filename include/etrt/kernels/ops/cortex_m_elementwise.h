// cortex_m:: int8 elementwise kernels: quantized_add, quantized_mul, quantized_div, maximum, minimum and the
// table-lookup quantized_activation. Operands broadcast numpy-style and may have any dim order.
//
// add (arm_elementwise_add_s8): each operand a' = requantize((a - zp) * 2^20, m, s); out = requantize(a' + b',
//   out_m, out_s) + out_zp, clamped to [activation_min, activation_max] (int32 wrap-around in the sum).
// mul (arm_elementwise_mul_s8): out = requantize((a - zp_a) (b - zp_b), out_m, out_s) + out_zp, clamped to int8.
// div (int8 / int16, as the wheel's reference): q = (a - zp_a) / (b - zp_b) in float32 (0 where the divisor is 0),
//   out = nearbyint(q * float32(output_scale)) + out_zp (half to even), clamped to the dtype.
// maximum / minimum: plain int8 max / min. activation: out = lut[x + 128] (a 256-entry int8 table).
#pragma once

#include <cmath>

#include "etrt/kernels/ops/cortex_m_common.h"

namespace etrt::kernels::cortex_m {

namespace ew_detail {

/// Walks out = f(a, b) over the broadcast shape of a and b (both of dtype T), resizing out.
template <class T, class F>
inline Status binary(std::string_view op, KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out, F&& f) {
  constexpr ScalarType st = std::is_same_v<T, int8_t> ? ScalarType::Char : ScalarType::Short;
  ETRT_CHECK_OK(check_dtype(op, "self", a, st));
  ETRT_CHECK_OK(check_dtype(op, "other", b, st));
  ETRT_CHECK_OK(check_dtype(op, "out", out, st));
  ETRT_TRY(Shape sh, broadcast_shapes(op, a.sizes(), b.sizes()));
  ETRT_CHECK_OK(ctx.resize(op, out, sh.span()));
  std::array<std::array<int64_t, kMaxDims>, 3> strides{};
  strides[0] = broadcast_strides(out, sh);
  strides[1] = broadcast_strides(a, sh);
  strides[2] = broadcast_strides(b, sh);
  T* y = out.data_as<T>();
  const T* x0 = a.data_as<const T>();
  const T* x1 = b.data_as<const T>();
  for_each_offset<3>(sh, strides, [&](const std::array<int64_t, 3>& off) {
    y[off[0]] = static_cast<T>(f(int32_t{x0[off[1]]}, int32_t{x1[off[2]]}));
  });
  return {};
}

}  // namespace ew_detail

template <class Dtypes>
Status quantized_add_out(KernelContext& ctx, const Tensor& self, int64_t self_zp, int64_t self_mult,
                         int64_t self_shift, const Tensor& other, int64_t other_zp, int64_t other_mult,
                         int64_t other_shift, int64_t out_zp, int64_t out_mult, int64_t out_shift, int64_t act_min,
                         int64_t act_max, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_add.out";
  ETRT_CHECK_OK(check_zero_point(op, "self_zero_point", self_zp));
  ETRT_CHECK_OK(check_zero_point(op, "other_zero_point", other_zp));
  ETRT_CHECK_OK(check_zero_point(op, "output_zero_point", out_zp));
  ETRT_CHECK_OK(check_requant(op, "self", self_mult, self_shift));
  ETRT_CHECK_OK(check_requant(op, "other", other_mult, other_shift));
  ETRT_CHECK_OK(check_requant(op, "output", out_mult, out_shift));
  ETRT_CHECK_OK(check_activation(op, act_min, act_max));
  constexpr int kLeftShift = 20;
  return ew_detail::binary<int8_t>(op, ctx, self, other, out, [&](int32_t a, int32_t b) {
    const int32_t a2 = requantize((a - static_cast<int32_t>(self_zp)) * (1 << kLeftShift),
                                  static_cast<int32_t>(self_mult), static_cast<int>(self_shift));
    const int32_t b2 = requantize((b - static_cast<int32_t>(other_zp)) * (1 << kLeftShift),
                                  static_cast<int32_t>(other_mult), static_cast<int>(other_shift));
    const int32_t s = requantize(wrap32(int64_t{a2} + b2), static_cast<int32_t>(out_mult), static_cast<int>(out_shift));
    return clamp_to(int64_t{s} + out_zp, act_min, act_max);
  });
}

template <class Dtypes>
Status quantized_mul_out(KernelContext& ctx, const Tensor& self, int64_t self_zp, const Tensor& other,
                         int64_t other_zp, int64_t out_zp, int64_t out_mult, int64_t out_shift, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_mul.out";
  ETRT_CHECK_OK(check_zero_point(op, "self_zero_point", self_zp));
  ETRT_CHECK_OK(check_zero_point(op, "other_zero_point", other_zp));
  ETRT_CHECK_OK(check_zero_point(op, "output_zero_point", out_zp));
  ETRT_CHECK_OK(check_requant(op, "output", out_mult, out_shift));
  return ew_detail::binary<int8_t>(op, ctx, self, other, out, [&](int32_t a, int32_t b) {
    const int32_t p = (a - static_cast<int32_t>(self_zp)) * (b - static_cast<int32_t>(other_zp));
    const int32_t s = requantize(p, static_cast<int32_t>(out_mult), static_cast<int>(out_shift));
    return clamp_to(int64_t{s} + out_zp, -128, 127);
  });
}

template <class Dtypes>
Status quantized_div_out(KernelContext& ctx, const Tensor& self, int64_t self_zp, const Tensor& other,
                         int64_t other_zp, int64_t out_zp, double output_scale, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_div.out";
  if (!std::isfinite(output_scale)) return fail(Error::InvalidArgument, op, ": output_scale must be finite");
  if (self.sizes().size() != other.sizes().size() || !std::ranges::equal(self.sizes(), other.sizes()))
    return fail(Error::InvalidArgument, op, ": self ", self.describe(), " and other ", other.describe(),
                " must have the same shape");
  auto run = [&]<class T>(int64_t lo, int64_t hi) -> Status {
    ETRT_CHECK_OK(check_range(op, "self_zero_point", self_zp, lo, hi));
    ETRT_CHECK_OK(check_range(op, "other_zero_point", other_zp, lo, hi));
    ETRT_CHECK_OK(check_range(op, "output_zero_point", out_zp, lo, hi));
    const float scale = static_cast<float>(output_scale);
    return ew_detail::binary<T>(op, ctx, self, other, out, [&](int32_t a, int32_t b) {
      const float fa = static_cast<float>(a - static_cast<int32_t>(self_zp));
      const float fb = static_cast<float>(b - static_cast<int32_t>(other_zp));
      const float qt = fb != 0.0f ? fa / fb : 0.0f;
      const float r = std::nearbyint(qt * scale) + static_cast<float>(out_zp);
      if (!(r >= static_cast<float>(lo))) return static_cast<int32_t>(lo);  // NaN cannot occur; -inf clamps
      return r > static_cast<float>(hi) ? static_cast<int32_t>(hi) : static_cast<int32_t>(r);
    });
  };
  if (self.dtype() == ScalarType::Short) return run.template operator()<int16_t>(-32768, 32767);
  return run.template operator()<int8_t>(-128, 127);
}

template <class Dtypes>
Status maximum_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return ew_detail::binary<int8_t>("cortex_m::maximum.out", ctx, self, other, out,
                                   [](int32_t a, int32_t b) { return std::max(a, b); });
}

template <class Dtypes>
Status minimum_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return ew_detail::binary<int8_t>("cortex_m::minimum.out", ctx, self, other, out,
                                   [](int32_t a, int32_t b) { return std::min(a, b); });
}

template <class Dtypes>
Status quantized_activation_out(KernelContext& ctx, const Tensor& input, const Tensor& lut, Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_activation.out";
  ETRT_CHECK_OK(check_dtype(op, "input", input, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "lut", lut, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "out", out, ScalarType::Char));
  if (lut.numel() != 256 || lut.dim() != 1)
    return fail(Error::InvalidArgument, op, ": lut ", lut.describe(), " must have 256 entries");
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  const Shape sh = shape_of(input.sizes());
  std::array<std::array<int64_t, kMaxDims>, 2> st{};
  for (int d = 0; d < input.dim(); ++d) st[0][d] = out.stride(d), st[1][d] = input.stride(d);
  const int8_t* x = input.data_as<const int8_t>();
  const int8_t* t = lut.data_as<const int8_t>();
  const int64_t ts = lut.stride(0);
  int8_t* y = out.data_as<int8_t>();
  for_each_offset<2>(sh, st, [&](const std::array<int64_t, 2>& off) { y[off[0]] = t[(int64_t{x[off[1]]} + 128) * ts]; });
  return {};
}

}  // namespace etrt::kernels::cortex_m
