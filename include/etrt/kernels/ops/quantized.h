// quantized_decomposed:: quantize / dequantize, per tensor and per channel.
//
// quantize: q = clamp(nearbyint(x * (1 / scale)) + zero_point, quant_min, quant_max) (round half to even, as torch's
// decomposition computes it: in float32 for a float input and per-tensor scale). dequantize: (q - zero_point) *
// scale. Dtypes lists the quantized integer types; the real side is float, double, Half or BFloat16.
#pragma once

#include <cmath>
#include <cstdio>

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

using quant_types = types<uint8_t, int8_t, int16_t, int32_t, uint16_t>;

namespace quant_detail {

/// A real number for messages, in %g form (std::to_string's fixed six decimals print 1e-9 as 0.000000).
inline std::string real_str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

inline Status check_range(std::string_view op, int64_t qmin, int64_t qmax, ScalarType qt) {
  int64_t lo, hi;
  switch (qt) {
    case ScalarType::Byte: lo = 0; hi = 255; break;
    case ScalarType::Char: lo = -128; hi = 127; break;
    case ScalarType::Short: lo = -32768; hi = 32767; break;
    case ScalarType::UInt16: lo = 0; hi = 65535; break;
    case ScalarType::Int: lo = INT32_MIN; hi = INT32_MAX; break;
    default: return fail(Error::InvalidArgument, op, ": unsupported quantized dtype ", name(qt));
  }
  if (qmin > qmax || qmin < lo || qmax > hi)
    return fail(Error::InvalidArgument, op, ": quant_min ", qmin, " / quant_max ", qmax, " are invalid for ", name(qt));
  return {};
}

/// The channel index of each element is (flat logical index / inner) % C; walks in logical order.
/// f(in_off, out_off, channel) for every element (per tensor: channel 0).
template <class F>
inline void walk(const Tensor& in, const Tensor& out, int axis, F&& f) {
  const Shape sh = shape_of(in.sizes());
  if (in.numel() == 0) return;
  std::array<std::array<int64_t, kMaxDims>, 2> st{};
  for (int k = 0; k < in.dim(); ++k) {
    st[0][k] = in.stride(k);
    st[1][k] = out.stride(k);
  }
  if (axis < 0 && same_dense_layout(in, out)) {  // flat fast path
    const int64_t n = in.numel();
    for (int64_t i = 0; i < n; ++i) f(i, i, 0);
    return;
  }
  std::array<int64_t, kMaxDims> ctr{};
  const int last = in.dim() - 1;
  for_each_offset<2>(sh, st, [&](const std::array<int64_t, 2>& off) {
    f(off[0], off[1], axis >= 0 ? ctr[axis] : 0);
    for (int k = last; k >= 0; --k) {
      if (++ctr[k] < sh.sizes[k]) break;
      ctr[k] = 0;
    }
  });
}

template <class R>
inline R real_of_scalar_tensor(const Tensor& t, int64_t i) {
  const int64_t off = i * (t.dim() ? t.stride(0) : 0);
  // An int64 zero point read as double would round INT64_MAX up to 2^63, beyond int64.
  if constexpr (std::is_integral_v<R>)
    if (!is_floating(t.dtype())) return static_cast<R>(loader_for<int64_t>(t.dtype())(t.data(), off));
  return convert<R>(loader_for<double>(t.dtype())(t.data(), off));
}

/// Quantizes `in` (a real dtype) into `out` (dtype qt) with per-channel (axis >= 0) or per-tensor parameters.
template <class Q, class Scales, class Zps>
inline Status quantize(std::string_view op, const Tensor& in, Tensor& out, int axis, int64_t qmin, int64_t qmax,
                       bool in_double, Scales&& scale_of, Zps&& zp_of) {
  return visit(in.dtype(), float_types{}, op, [&]<class T>() -> Status {
    const T* x = in.data_as<T>();
    Q* q = out.data_as<Q>();
    auto body = [&]<class A>() {
      walk(in, out, axis, [&](int64_t io, int64_t oo, int64_t c) {
        const A inv = A(1) / static_cast<A>(scale_of(c));
        A v = std::nearbyint(static_cast<A>(static_cast<float>(x[io])) * inv) + static_cast<A>(zp_of(c));
        v = std::fmax(v, static_cast<A>(qmin));
        v = std::fmin(v, static_cast<A>(qmax));
        q[oo] = convert<Q>(v);  // saturating: float(INT32_MAX) rounds up to 2^31, beyond int32
      });
    };
    if (in_double || std::is_same_v<T, double>) body.template operator()<double>();
    else body.template operator()<float>();
    return Status{};
  });
}

template <class Q, class Scales, class Zps>
inline Status dequantize(std::string_view op, const Tensor& in, Tensor& out, int axis, bool in_double,
                         Scales&& scale_of, Zps&& zp_of) {
  return visit(out.dtype(), float_types{}, op, [&]<class T>() -> Status {
    const Q* q = in.data_as<Q>();
    T* y = out.data_as<T>();
    auto body = [&]<class A>() {
      walk(in, out, axis, [&](int64_t io, int64_t oo, int64_t c) {
        y[oo] = static_cast<T>((static_cast<A>(q[io]) - static_cast<A>(zp_of(c))) * static_cast<A>(scale_of(c)));
      });
    };
    if (in_double || std::is_same_v<T, double>) body.template operator()<double>();
    else body.template operator()<float>();
    return Status{};
  });
}

inline Status check_real(std::string_view op, const Tensor& t, std::string_view what) {
  if (!is_floating(t.dtype()))
    return fail(Error::InvalidArgument, op, ": ", what, " must be floating, got ", name(t.dtype()));
  return {};
}

inline Status check_params(std::string_view op, const Tensor& scale, const Tensor* zp, int64_t n) {
  if (!is_floating(scale.dtype())) return fail(Error::InvalidArgument, op, ": scale must be floating, got ", name(scale.dtype()));
  if (scale.numel() != n || scale.dim() > 1)
    return fail(Error::InvalidArgument, op, ": scale ", scale.describe(), " must have ", n, " element(s)");
  if (zp) {
    if (!is_integral(zp->dtype(), false) && !is_floating(zp->dtype()))
      return fail(Error::InvalidArgument, op, ": zero_point has unsupported dtype ", name(zp->dtype()));
    if (zp->numel() != n || zp->dim() > 1)
      return fail(Error::InvalidArgument, op, ": zero_point ", zp->describe(), " must have ", n, " element(s)");
    if (is_floating(zp->dtype())) {
      // As torch's item<int64_t>(): a floating zero point must convert to int64 without overflow.
      for (int64_t i = 0; i < n; ++i) {
        const double v = real_of_scalar_tensor<double>(*zp, i);
        if (!(v >= -0x1p63 && v < 0x1p63))
          return fail(Error::InvalidArgument, op, ": zero_point ", real_str(v),
                      " cannot be converted to int64 without overflow");
      }
    }
  }
  return {};
}

}  // namespace quant_detail

template <class Dtypes>
Status quantize_per_tensor_out(KernelContext& ctx, const Tensor& input, double scale, int64_t zero_point,
                               int64_t quant_min, int64_t quant_max, ScalarType dtype, Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::quantize_per_tensor.out";
  ETRT_CHECK_OK(quant_detail::check_real(op, input, "input"));
  if (out.dtype() != dtype)
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != requested dtype ", name(dtype));
  ETRT_CHECK_OK(quant_detail::check_range(op, quant_min, quant_max, dtype));
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  const float fs = static_cast<float>(scale);
  return visit(out.dtype(), Dtypes{}, op, [&]<class Q>() -> Status {
    return quant_detail::quantize<Q>(op, input, out, -1, quant_min, quant_max, false, [&](int64_t) { return fs; },
                                     [&](int64_t) { return zero_point; });
  });
}

template <class Dtypes>
Status quantize_per_tensor_tensor_out(KernelContext& ctx, const Tensor& input, const Tensor& scale,
                                      const Tensor& zero_point, int64_t quant_min, int64_t quant_max, ScalarType dtype,
                                      Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::quantize_per_tensor.tensor_out";
  ETRT_CHECK_OK(quant_detail::check_params(op, scale, &zero_point, 1));
  return quantize_per_tensor_out<Dtypes>(ctx, input, quant_detail::real_of_scalar_tensor<double>(scale, 0),
                                         quant_detail::real_of_scalar_tensor<int64_t>(zero_point, 0), quant_min,
                                         quant_max, dtype, out);
}

template <class Dtypes>
Status dequantize_per_tensor_out(KernelContext& ctx, const Tensor& input, double scale, int64_t zero_point,
                                 int64_t quant_min, int64_t quant_max, ScalarType dtype,
                                 std::optional<ScalarType> out_dtype, Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::dequantize_per_tensor.out";
  if (input.dtype() != dtype)
    return fail(Error::InvalidArgument, op, ": input dtype ", name(input.dtype()), " != dtype ", name(dtype));
  ETRT_CHECK_OK(quant_detail::check_range(op, quant_min, quant_max, dtype));
  ETRT_CHECK_OK(quant_detail::check_real(op, out, "out"));
  if (out_dtype && *out_dtype != out.dtype())
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != out_dtype ", name(*out_dtype));
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  const float fs = static_cast<float>(scale);
  return visit(input.dtype(), Dtypes{}, op, [&]<class Q>() -> Status {
    return quant_detail::dequantize<Q>(op, input, out, -1, false, [&](int64_t) { return fs; },
                                       [&](int64_t) { return zero_point; });
  });
}

template <class Dtypes>
Status dequantize_per_tensor_tensor_out(KernelContext& ctx, const Tensor& input, const Tensor& scale,
                                        const Tensor& zero_point, int64_t quant_min, int64_t quant_max,
                                        ScalarType dtype, std::optional<ScalarType> out_dtype, Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::dequantize_per_tensor.tensor_out";
  ETRT_CHECK_OK(quant_detail::check_params(op, scale, &zero_point, 1));
  return dequantize_per_tensor_out<Dtypes>(ctx, input, quant_detail::real_of_scalar_tensor<double>(scale, 0),
                                           quant_detail::real_of_scalar_tensor<int64_t>(zero_point, 0), quant_min,
                                           quant_max, dtype, out_dtype, out);
}

template <class Dtypes>
Status quantize_per_channel_out(KernelContext& ctx, const Tensor& input, const Tensor& scales,
                                const Tensor& zero_points, int64_t axis, int64_t quant_min, int64_t quant_max,
                                ScalarType dtype, Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::quantize_per_channel.out";
  ETRT_CHECK_OK(quant_detail::check_real(op, input, "input"));
  if (input.dim() == 0) return fail(Error::InvalidArgument, op, ": input must have at least one dim");
  ETRT_TRY(int ax, mv::wrap_dim(op, axis, input.dim()));
  ETRT_CHECK_OK(quant_detail::check_params(op, scales, &zero_points, input.size(ax)));
  if (out.dtype() != dtype)
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != requested dtype ", name(dtype));
  ETRT_CHECK_OK(quant_detail::check_range(op, quant_min, quant_max, dtype));
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  const bool dbl = scales.dtype() == ScalarType::Double;
  return visit(out.dtype(), Dtypes{}, op, [&]<class Q>() -> Status {
    return quant_detail::quantize<Q>(
        op, input, out, ax, quant_min, quant_max, dbl,
        [&](int64_t c) { return quant_detail::real_of_scalar_tensor<double>(scales, c); },
        [&](int64_t c) { return quant_detail::real_of_scalar_tensor<int64_t>(zero_points, c); });
  });
}

template <class Dtypes>
Status dequantize_per_channel_out(KernelContext& ctx, const Tensor& input, const Tensor& scales,
                                  const Tensor* zero_points, int64_t axis, int64_t quant_min, int64_t quant_max,
                                  ScalarType dtype, std::optional<ScalarType> out_dtype, Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::dequantize_per_channel.out";
  if (input.dtype() != dtype)
    return fail(Error::InvalidArgument, op, ": input dtype ", name(input.dtype()), " != dtype ", name(dtype));
  if (input.dim() == 0) return fail(Error::InvalidArgument, op, ": input must have at least one dim");
  ETRT_TRY(int ax, mv::wrap_dim(op, axis, input.dim()));
  ETRT_CHECK_OK(quant_detail::check_params(op, scales, zero_points, input.size(ax)));
  ETRT_CHECK_OK(quant_detail::check_range(op, quant_min, quant_max, dtype));
  ETRT_CHECK_OK(quant_detail::check_real(op, out, "out"));
  if (out_dtype && *out_dtype != out.dtype())
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != out_dtype ", name(*out_dtype));
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  const bool dbl = scales.dtype() == ScalarType::Double;
  return visit(input.dtype(), Dtypes{}, op, [&]<class Q>() -> Status {
    return quant_detail::dequantize<Q>(
        op, input, out, ax, dbl, [&](int64_t c) { return quant_detail::real_of_scalar_tensor<double>(scales, c); },
        [&](int64_t c) {
          return zero_points ? quant_detail::real_of_scalar_tensor<int64_t>(*zero_points, c) : int64_t{0};
        });
  });
}

}  // namespace etrt::kernels
