// quantized_decomposed:: dynamic quantization: choose_qparams.Tensor_out (one asymmetric scale / zero point for a
// whole tensor), choose_qparams_per_token_asymmetric.out (one per token, a token being a run of the last dim), and
// quantize_per_token.out / dequantize_per_token.out (each token with its own scale and zero point).
//
// Note [choosing qparams]: upstream's runtime (not torch eager, which differs in the last bits) is the reference:
// the range [min, max] is widened to contain 0; scale = (max - min) / (qmax - qmin) in double; a scale whose float is
// 0 or whose float reciprocal overflows becomes 0.1; a scale under 6.1e-5 is raised to it (widening the range to
// match); the zero point comes from whichever end of the range gives the smaller rounding error, clamped to
// [qmin, qmax] and rounded half to even. eps is unused (as upstream). The per-token variant always uses [-128, 127].
// Unlike upstream, an empty, NaN or infinite input is an error rather than undefined behaviour.
//
// Per-token quantize: q = clamp(zp + nearbyint(float(x * (1 / float(scale)))), qmin, qmax); dequantize:
// (q - zp) * float(scale). Both in float, as upstream's per-channel kernels they delegate to. Scales must be positive
// and finite.
#pragma once

#include <cmath>
#include <vector>

#include "etrt/kernels/ops/quantized.h"

namespace etrt::kernels {

namespace qtok {

struct QParams {
  double scale;
  int64_t zero_point;
};

/// Note [choosing qparams], for the observed range [mn, mx] (both finite).
/// qmin and qmax are 32-bit values held in int64: qmax - qmin and abs(qmin) overflow int32 at the type's extremes.
inline QParams choose(float mn, float mx, int64_t qmin, int64_t qmax) {
  constexpr float kSmallScale = 6.1e-5f;
  mn = std::min(mn, 0.f);
  mx = std::max(mx, 0.f);
  double scale = (static_cast<double>(mx) - mn) / (qmax - qmin);
  if (static_cast<float>(scale) == 0.f || std::isinf(1.f / static_cast<float>(scale))) scale = 0.1;
  if (scale < kSmallScale) {
    const float old = static_cast<float>(scale);
    scale = kSmallScale;
    if (mn == 0.f) {
      mx = kSmallScale * static_cast<float>(qmax - qmin);
    } else if (mx == 0.f) {
      mn = -kSmallScale * static_cast<float>(qmax - qmin);
    } else {
      const float amp = kSmallScale / old;
      mn *= amp;
      mx *= amp;
    }
  }
  const double from_min = qmin - mn / scale, from_max = qmax - mx / scale;
  const double err_min = std::abs(qmin) - std::abs(mn / scale), err_max = std::abs(qmax) - std::abs(mx / scale);
  const double initial = err_min < err_max ? from_min : from_max;
  int64_t zp;
  if (initial < qmin) zp = qmin;
  else if (initial > qmax) zp = qmax;
  else zp = static_cast<int64_t>(std::nearbyint(static_cast<float>(initial)));
  return {scale, zp};
}

/// Calls f(row_offset) for every token (all dims but the last) of `t` in logical order; elements of a token are at
/// row_offset + k * t.stride(last).
template <class F>
inline void for_each_token(const Tensor& t, F&& f) {
  mv::View v = mv::view_of(t);
  v.rank -= 1;
  mv::for_each_view_offset(v, f);
}

inline int64_t num_tokens(const Tensor& t) {
  int64_t n = 1;
  for (int d = 0; d + 1 < t.dim(); ++d) n *= t.size(d);
  return n;
}

/// The range of one token (or of the whole tensor); fails on NaN or infinity.
inline Status token_range(std::string_view op, LoadFn<float> load, const Tensor& t, int64_t row, int64_t n,
                          int64_t stride, float& mn, float& mx) {
  for (int64_t k = 0; k < n; ++k) {
    const float v = load(t.data(), row + k * stride);
    if (!std::isfinite(v)) return fail(Error::InvalidArgument, op, ": input holds a non-finite value (", quant_detail::real_str(v), ")");
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  return {};
}

/// Per-token scales (float, checked positive and finite) and zero points, in token order.
inline Status token_params(std::string_view op, const Tensor& scales, const Tensor& zero_points, int64_t tokens,
                           std::vector<float>& sc, std::vector<int64_t>& zp) {
  if (!is_floating(scales.dtype())) return fail(Error::InvalidArgument, op, ": scales must be floating, got ", scales.describe());
  if (!is_integral(zero_points.dtype(), false) && !is_floating(zero_points.dtype()))
    return fail(Error::InvalidArgument, op, ": zero_points has unsupported dtype ", name(zero_points.dtype()));
  if (scales.numel() != tokens || zero_points.numel() != tokens)
    return fail(Error::InvalidArgument, op, ": scales ", scales.describe(), " and zero_points ",
                zero_points.describe(), " must have one element per token (", tokens, ")");
  const LoadFn<double> ls = loader_for<double>(scales.dtype());
  const LoadFn<double> lz = loader_for<double>(zero_points.dtype());
  sc.clear();
  zp.clear();
  mv::for_each_view_offset(mv::view_of(scales), [&](int64_t o) { sc.push_back(static_cast<float>(ls(scales.data(), o))); });
  mv::for_each_view_offset(mv::view_of(zero_points), [&](int64_t o) { zp.push_back(convert<int64_t>(lz(zero_points.data(), o))); });
  for (size_t i = 0; i < sc.size(); ++i)
    if (!(sc[i] > 0.f) || !std::isfinite(sc[i]))
      return fail(Error::InvalidArgument, op, ": scale ", quant_detail::real_str(sc[i]), " of token ", i,
                  " is not a positive finite scale");
  return {};
}

/// What quantize and dequantize per token share: each token's scale and zero point, out resized to the input's
/// sizes, and where out's tokens start.
struct Tokens {
  std::vector<float> sc;
  std::vector<int64_t> zp, out_rows;
  int64_t n = 0, is = 0, os = 0;  // elements per token, their stride in input and in out
};
inline Status plan(std::string_view op, KernelContext& ctx, const Tensor& input, const Tensor& scales,
                   const Tensor& zero_points, Tensor& out, Tokens& t) {
  ETRT_CHECK_OK(token_params(op, scales, zero_points, num_tokens(input), t.sc, t.zp));
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  if (input.numel() == 0) return {};
  const int last = input.dim() - 1;
  t.n = input.size(last);
  t.is = input.stride(last);
  t.os = out.stride(last);
  for_each_token(out, [&](int64_t o) { t.out_rows.push_back(o); });
  return {};
}

}  // namespace qtok

template <class Dtypes>
Status choose_qparams_tensor_out(KernelContext&, const Tensor& input, int64_t quant_min, int64_t quant_max,
                                 double eps, ScalarType dtype, Tensor& scale_out, Tensor& zero_point_out) {
  (void)eps;
  (void)dtype;
  constexpr std::string_view op = "quantized_decomposed::choose_qparams.Tensor_out";
  if (!(quant_min < quant_max) || quant_min < INT32_MIN || quant_max > INT32_MAX)
    return fail(Error::InvalidArgument, op, ": quant_min ", quant_min, " must be less than quant_max ", quant_max,
                " (both 32-bit)");
  ETRT_CHECK_OK(quant_detail::check_real(op, input, "input"));
  if (scale_out.dtype() != ScalarType::Double || scale_out.numel() != 1)
    return fail(Error::InvalidArgument, op, ": scale_out must be one float64 element, got ", scale_out.describe());
  if (zero_point_out.dtype() != ScalarType::Long || zero_point_out.numel() != 1)
    return fail(Error::InvalidArgument, op, ": zero_point_out must be one int64 element, got ",
                zero_point_out.describe());
  if (input.numel() == 0) return fail(Error::InvalidArgument, op, ": input is empty");
  float mn = INFINITY, mx = -INFINITY;
  const LoadFn<float> load = loader_for<float>(input.dtype());
  Status st;
  if (input.is_contiguous_order()) {
    st = qtok::token_range(op, load, input, 0, input.numel(), 1, mn, mx);
  } else {
    mv::for_each_view_offset(mv::view_of(input), [&](int64_t o) {
      if (st) st = qtok::token_range(op, load, input, o, 1, 0, mn, mx);
    });
  }
  if (!st) return st;
  const qtok::QParams p = qtok::choose(mn, mx, quant_min, quant_max);
  scale_out.data_as<double>()[0] = p.scale;
  zero_point_out.data_as<int64_t>()[0] = p.zero_point;
  return {};
}

template <class Dtypes>
Status choose_qparams_per_token_asymmetric_out(KernelContext& ctx, const Tensor& input, ScalarType dtype,
                                               Tensor& scale_out, Tensor& zero_point_out) {
  (void)dtype;
  constexpr std::string_view op = "quantized_decomposed::choose_qparams_per_token_asymmetric.out";
  ETRT_CHECK_OK(quant_detail::check_real(op, input, "input"));
  if (input.dim() == 0) return fail(Error::InvalidArgument, op, ": input must have at least one dim");
  if (scale_out.dtype() != ScalarType::Double)
    return fail(Error::InvalidArgument, op, ": scale_out must be float64, got ", scale_out.describe());
  if (zero_point_out.dtype() != ScalarType::Long)
    return fail(Error::InvalidArgument, op, ": zero_point_out must be int64, got ", zero_point_out.describe());
  Shape ps = shape_of(input.sizes());
  ps.sizes[ps.rank - 1] = 1;
  ETRT_CHECK_OK(ctx.resize(op, scale_out, ps.span()));
  ETRT_CHECK_OK(ctx.resize(op, zero_point_out, ps.span()));
  const int last = input.dim() - 1;
  const int64_t n = input.size(last), stride = input.stride(last);
  if (n == 0 && qtok::num_tokens(input) > 0) return fail(Error::InvalidArgument, op, ": tokens are empty");
  const LoadFn<float> load = loader_for<float>(input.dtype());
  std::vector<qtok::QParams> params;
  Status st;
  qtok::for_each_token(input, [&](int64_t row) {
    if (!st) return;
    float mn = INFINITY, mx = -INFINITY;
    st = qtok::token_range(op, load, input, row, n, stride, mn, mx);
    params.push_back(qtok::choose(mn, mx, -128, 127));
  });
  if (!st) return st;
  // Both outputs in token order, whatever their dim order.
  size_t k = 0;
  mv::for_each_view_offset(mv::view_of(scale_out), [&](int64_t o) { scale_out.data_as<double>()[o] = params[k++].scale; });
  k = 0;
  mv::for_each_view_offset(mv::view_of(zero_point_out),
                           [&](int64_t o) { zero_point_out.data_as<int64_t>()[o] = params[k++].zero_point; });
  return {};
}

template <class Dtypes>
Status quantize_per_token_out(KernelContext& ctx, const Tensor& input, const Tensor& scales,
                              const Tensor& zero_points, int64_t quant_min, int64_t quant_max, ScalarType dtype,
                              Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::quantize_per_token.out";
  ETRT_CHECK_OK(quant_detail::check_real(op, input, "input"));
  if (input.dim() == 0) return fail(Error::InvalidArgument, op, ": input must have at least one dim");
  if (out.dtype() != dtype)
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != requested dtype ", name(dtype));
  ETRT_CHECK_OK(quant_detail::check_range(op, quant_min, quant_max, dtype));
  qtok::Tokens tk;
  ETRT_CHECK_OK(qtok::plan(op, ctx, input, scales, zero_points, out, tk));
  if (input.numel() == 0) return {};
  const int64_t n = tk.n, is = tk.is, os = tk.os;
  const bool dbl = input.dtype() == ScalarType::Double;
  const LoadFn<double> load = loader_for<double>(input.dtype());
  return visit(out.dtype(), Dtypes{}, op, [&]<class Q>() -> Status {
    Q* q = out.data_as<Q>();
    size_t t = 0;
    qtok::for_each_token(input, [&](int64_t row) {
      const float inv = 1.f / tk.sc[t];
      const float z = static_cast<float>(static_cast<int32_t>(tk.zp[t]));
      Q* orow = q + tk.out_rows[t];
      for (int64_t k = 0; k < n; ++k) {
        const double x = load(input.data(), row + k * is);
        const float prod = dbl ? static_cast<float>(inv * x) : inv * static_cast<float>(x);
        const int64_t v = convert<int64_t>(static_cast<double>(z + std::nearbyint(prod)));
        orow[k * os] = static_cast<Q>(std::clamp(v, quant_min, quant_max));
      }
      ++t;
    });
    return Status{};
  });
}

template <class Dtypes>
Status dequantize_per_token_out(KernelContext& ctx, const Tensor& input, const Tensor& scales,
                                const Tensor& zero_points, int64_t quant_min, int64_t quant_max, ScalarType dtype,
                                ScalarType output_dtype, Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::dequantize_per_token.out";
  if (input.dtype() != dtype)
    return fail(Error::InvalidArgument, op, ": input dtype ", name(input.dtype()), " != dtype ", name(dtype));
  if (input.dim() == 0) return fail(Error::InvalidArgument, op, ": input must have at least one dim");
  ETRT_CHECK_OK(quant_detail::check_range(op, quant_min, quant_max, dtype));
  ETRT_CHECK_OK(quant_detail::check_real(op, out, "out"));
  if (out.dtype() != output_dtype)
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != output_dtype ",
                name(output_dtype));
  qtok::Tokens tk;
  ETRT_CHECK_OK(qtok::plan(op, ctx, input, scales, zero_points, out, tk));
  if (input.numel() == 0) return {};
  const int64_t n = tk.n, is = tk.is, os = tk.os;
  return visit(input.dtype(), Dtypes{}, op, [&]<class Q>() -> Status {
    return visit(out.dtype(), float_types{}, op, [&]<class T>() -> Status {
      const Q* q = input.data_as<Q>();
      T* y = out.data_as<T>();
      size_t t = 0;
      qtok::for_each_token(input, [&](int64_t row) {
        T* orow = y + tk.out_rows[t];
        for (int64_t k = 0; k < n; ++k) {
          // In double: exact for every real zero point, and a file's int64 extreme cannot overflow.
          const double centered = static_cast<double>(q[row + k * is]) - static_cast<double>(tk.zp[t]);
          orow[k * os] = convert<T>(static_cast<float>(centered) * tk.sc[t]);
        }
        ++t;
      });
      return Status{};
    });
  });
}

}  // namespace etrt::kernels
