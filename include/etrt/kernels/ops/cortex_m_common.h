// cortex_m:: kernels, shared part: the CMSIS-NN fixed-point requantization and the argument checks.
//
// Note [cortex_m requantize]: an int32 accumulator v is rescaled by a Q31 multiplier m and a shift s (the real
// factor is m * 2^s / 2^31) the way CMSIS-NN's scalar reference does it (arm_nn_requantize without
// CMSIS_NN_USE_SINGLE_ROUNDING), which is also what the wheel's requantize_cmsis models:
//   1. v' = v * 2^max(s, 0), wrapping in int32;
//   2. h  = (v' * m + 2^30) >> 31 in int64 (a doubling high multiply rounding half up), truncated to int32;
//   3. divide h by 2^max(-s, 0) rounding to nearest, ties away from zero.
// Everything is computed with defined arithmetic (no signed overflow, no shift by >= the width); the kernels check
// s in [-31, 31] and m in the int32 range before they run, so a corrupt program fails with an error naming the
// operator instead.
//
// Tensors are addressed through their strides: an activation of logical shape [N, C, H, W] may have any dim order
// (the Cortex-M flow makes them channels-last), and the *_nhwc variants are the same kernels over [N, H, W, C].
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels::cortex_m {

/// The accumulator scaled by 2^shift (shift >= 0) with int32 wrap-around, as the C kernel's int32 multiply does.
inline int32_t wrap_shift_left(int32_t v, int shift) {
  return static_cast<int32_t>(static_cast<uint32_t>(v) << shift);
}

/// Q31 doubling high multiply, rounding half up (step 2 of Note [cortex_m requantize]).
inline int32_t doubling_high_mult(int32_t a, int32_t b) {
  const int64_t p = static_cast<int64_t>(a) * static_cast<int64_t>(b) + (int64_t{1} << 30);
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(p >> 31)));  // arithmetic shift
}

/// Division by 2^exponent (0..31), rounding to nearest with ties away from zero.
inline int32_t divide_by_pow2(int32_t v, int exponent) {
  const int64_t mask = (int64_t{1} << exponent) - 1;
  const int64_t rem = static_cast<int64_t>(v) & mask;
  const int64_t q = static_cast<int64_t>(v) >> exponent;
  const int64_t threshold = (mask >> 1) + (q < 0 ? 1 : 0);
  return static_cast<int32_t>(q + (rem > threshold ? 1 : 0));
}

/// Note [cortex_m requantize]; `shift` must be in [-31, 31].
inline int32_t requantize(int32_t v, int32_t multiplier, int shift) {
  const int left = shift > 0 ? shift : 0, right = shift < 0 ? -shift : 0;
  return divide_by_pow2(doubling_high_mult(wrap_shift_left(v, left), multiplier), right);
}

/// An int64 reduced to int32 modulo 2^32 (an int32 accumulator's wrap-around).
inline int32_t wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

inline int32_t clamp_to(int64_t v, int64_t lo, int64_t hi) { return static_cast<int32_t>(v < lo ? lo : v > hi ? hi : v); }

// ---- argument checks -------------------------------------------------------------------------------------------

inline Status check_range(std::string_view op, std::string_view what, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) return fail(Error::InvalidArgument, op, ": ", what, " ", v, " is outside [", lo, ", ", hi, "]");
  return {};
}
inline Status check_zero_point(std::string_view op, std::string_view what, int64_t zp) {
  return check_range(op, what, zp, -128, 127);
}
/// An input/filter offset is a negated int8 zero point: [-127, 128].
inline Status check_offset(std::string_view op, std::string_view what, int64_t off) {
  return check_range(op, what, off, -127, 128);
}
inline Status check_multiplier(std::string_view op, std::string_view what, int64_t m) {
  return check_range(op, what, m, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
}
inline Status check_shift(std::string_view op, std::string_view what, int64_t s) {
  return check_range(op, what, s, -31, 31);
}
inline Status check_requant(std::string_view op, std::string_view what, int64_t multiplier, int64_t shift) {
  ETRT_CHECK_OK(check_multiplier(op, cat(what, " multiplier"), multiplier));
  return check_shift(op, cat(what, " shift"), shift);
}
/// activation_min <= activation_max, both in int8.
inline Status check_activation(std::string_view op, int64_t lo, int64_t hi) {
  ETRT_CHECK_OK(check_range(op, "activation_min", lo, -128, 127));
  ETRT_CHECK_OK(check_range(op, "activation_max", hi, -128, 127));
  if (lo > hi) return fail(Error::InvalidArgument, op, ": activation_min ", lo, " > activation_max ", hi);
  return {};
}
inline Status check_dtype(std::string_view op, std::string_view what, const Tensor& t, ScalarType st) {
  if (t.dtype() != st)
    return fail(Error::InvalidArgument, op, ": ", what, " must be ", name(st), ", got ", name(t.dtype()));
  return {};
}
inline Status check_rank(std::string_view op, std::string_view what, const Tensor& t, int rank) {
  if (t.dim() != rank) return fail(Error::InvalidArgument, op, ": ", what, " must be ", rank, "-D, got ", t.describe());
  return {};
}

/// Per-channel requantization parameters: two int32 tensors (or int[] lists) of `n` values, each checked.
struct ChannelQuant {
  std::array<int32_t, 1> one_m{}, one_s{};
  const Tensor* mt = nullptr;
  const Tensor* st = nullptr;
  int32_t multiplier(int64_t c) const { return mt->data_as<int32_t>()[c * (mt->dim() ? mt->stride(0) : 0)]; }
  int32_t shift(int64_t c) const { return st->data_as<int32_t>()[c * (st->dim() ? st->stride(0) : 0)]; }
};

inline Result<ChannelQuant> channel_quant(std::string_view op, const Tensor& mult, const Tensor& shift, int64_t n) {
  ETRT_CHECK_OK(check_dtype(op, "requantize_multipliers", mult, ScalarType::Int));
  ETRT_CHECK_OK(check_dtype(op, "requantize_shifts", shift, ScalarType::Int));
  if (mult.dim() > 1 || shift.dim() > 1 || mult.numel() != n || shift.numel() != n)
    return fail(Error::InvalidArgument, op, ": requantize_multipliers ", mult.describe(), " and requantize_shifts ",
                shift.describe(), " must have one value per output channel (", n, ")");
  ChannelQuant q;
  q.mt = &mult;
  q.st = &shift;
  for (int64_t c = 0; c < n; ++c) ETRT_CHECK_OK(check_shift(op, cat("requantize_shifts[", c, "]"), q.shift(c)));
  return q;
}

// ---- 4-D activations -------------------------------------------------------------------------------------------

/// An int8 activation addressed as (n, c, h, w) through element strides.
template <class T>
struct Act4 {
  T* data = nullptr;
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;
  T& at(int64_t n, int64_t c, int64_t h, int64_t w) const { return data[n * sn + c * sc + h * sh + w * sw]; }
};

/// `t` as (n, c, h, w): logical NCHW, or logical NHWC for the *_nhwc variants.
template <class T>
inline Act4<T> act4(const Tensor& t, bool nhwc) {
  Act4<T> a;
  a.data = t.data_as<T>();
  const int c = nhwc ? 3 : 1, h = nhwc ? 1 : 2, w = nhwc ? 2 : 3;
  a.N = t.size(0), a.C = t.size(c), a.H = t.size(h), a.W = t.size(w);
  a.sn = t.stride(0), a.sc = t.stride(c), a.sh = t.stride(h), a.sw = t.stride(w);
  return a;
}

/// The logical sizes of an activation (n, c, h, w) in the tensor's own convention.
inline std::array<int64_t, 4> act_sizes(int64_t n, int64_t c, int64_t h, int64_t w, bool nhwc) {
  return nhwc ? std::array<int64_t, 4>{n, h, w, c} : std::array<int64_t, 4>{n, c, h, w};
}

/// (h, w) from an int[] of one or two values.
inline Result<std::array<int64_t, 2>> pair(std::string_view op, std::string_view what, std::span<const int64_t> v) {
  if (v.size() == 1) return std::array<int64_t, 2>{v[0], v[0]};
  if (v.size() == 2) return std::array<int64_t, 2>{v[0], v[1]};
  return fail(Error::InvalidArgument, op, ": ", what, " must have 2 values, got ", shape_str(v));
}

/// The size of a windowed dimension: (in + 2 pad - dilation (k - 1) - 1) / stride + 1 (with ceil_mode, a last
/// window that starts inside the input or the leading padding counts too); fails when no window fits.
inline Result<int64_t> window_out(std::string_view op, int64_t in, int64_t k, int64_t stride, int64_t pad,
                                  int64_t dilation, bool ceil_mode) {
  constexpr int64_t kMax = int64_t{1} << 31;
  if (k < 1 || stride < 1 || dilation < 1 || pad < 0 || k > kMax || stride > kMax || dilation > kMax || pad > kMax)
    return fail(Error::InvalidArgument, op, ": kernel ", k, ", stride ", stride, ", padding ", pad, ", dilation ",
                dilation, " are invalid");
  const int64_t span = dilation * (k - 1) + 1;
  // Refused first, so that in + 2 * pad cannot overflow (an empty tensor's other dims may be near int64's maximum).
  if (in > INT64_MAX / 2)
    return fail(Error::InvalidArgument, op, ": input size ", in, " is too large for a window");
  const int64_t num = in + 2 * pad - span;
  if (num < 0)
    return fail(Error::InvalidArgument, op, ": a window of ", span, " does not fit an input of ", in, " with padding ",
                pad);
  int64_t out = num / stride + 1;
  if (ceil_mode && num % stride != 0) {
    ++out;
    if ((out - 1) * stride >= in + pad) --out;
  }
  return out;
}

}  // namespace etrt::kernels::cortex_m
