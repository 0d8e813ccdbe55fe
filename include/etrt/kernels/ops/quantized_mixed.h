// quantized_decomposed:: kernels that mix quantized and real operands:
//   mixed_mm.out      out[m, p] = input[m, n] @ (weight[n, p] * scales[n, None])        (int8 weight, row scales)
//   mixed_linear.out  out[m, p] = input[m, n] @ (weight[p, n] * scales[p, group(k)]).T  (int8 weight, group scales)
//   add.out           out = Q(DQ(a) + DQ(b)), elementwise on same-shaped quantized tensors.
//
// Arithmetic follows upstream's reference kernels so that float results match bit for bit: mixed_mm accumulates
// (x * w) * s over k in the output type; mixed_linear accumulates x * w within a group, then adds psum * scale per
// group; add dequantizes each operand in double from float scales, adds in float and requantizes with a float
// reciprocal of the output scale, rounding half to even. Half inputs compute in float and round once at the end
// (upstream rounds every Half operation, so Half results can differ from upstream's in the last bits).
// Zero points of the mixed kernels are refused, as upstream refuses them ("not supported yet").
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "etrt/kernels/ops/quantized.h"

namespace etrt::kernels {

namespace qmix {

inline Status check_2d(std::string_view op, const Tensor& t, std::string_view what) {
  if (t.dim() != 2) return fail(Error::InvalidArgument, op, ": ", what, " must be 2-D, got ", t.describe());
  return {};
}

/// Scales in logical order as float, each positive and finite.
inline Status read_scales(std::string_view op, const Tensor& s, std::vector<float>& out) {
  const LoadFn<float> load = loader_for<float>(s.dtype());
  out.clear();
  mv::for_each_view_offset(mv::view_of(s), [&](int64_t o) { out.push_back(load(s.data(), o)); });
  for (size_t i = 0; i < out.size(); ++i)
    if (!(out[i] > 0.f) || !std::isfinite(out[i]))
      return fail(Error::InvalidArgument, op, ": weight_scales element ", i, " = ", quant_detail::real_str(out[i]),
                  " is not a positive finite scale");
  return {};
}

inline Status check_operands(std::string_view op, const Tensor& input, const Tensor& weight, const Tensor& scales,
                             const Tensor* zero_points) {
  ETRT_CHECK_OK(check_2d(op, input, "input"));
  ETRT_CHECK_OK(check_2d(op, weight, "weight"));
  if (weight.dtype() != ScalarType::Char)
    return fail(Error::InvalidArgument, op, ": weight must be int8, got ", weight.describe());
  if (!is_floating(input.dtype()))
    return fail(Error::InvalidArgument, op, ": input must be floating, got ", input.describe());
  if (scales.dtype() != input.dtype())
    return fail(Error::InvalidArgument, op, ": weight_scales dtype ", name(scales.dtype()), " != input dtype ",
                name(input.dtype()));
  if (zero_points) return fail(Error::NotSupported, op, ": weight_zero_points are not supported (upstream neither)");
  return {};
}

/// Both matmuls once their operands are checked: out resized to [m, p] and the scales read.
inline Status resize_and_read_scales(std::string_view op, KernelContext& ctx, const Tensor& scales, int64_t m,
                                     int64_t p, Tensor& out, std::vector<float>& s) {
  ETRT_CHECK_OK(check_2d(op, out, "out"));
  const std::array<int64_t, 2> os{m, p};
  ETRT_CHECK_OK(ctx.resize(op, out, os));
  return read_scales(op, scales, s);
}

}  // namespace qmix

template <class Dtypes>
Status mixed_mm_out(KernelContext& ctx, const Tensor& input, const Tensor& weight, const Tensor& weight_scales,
                    const Tensor* weight_zero_points, Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::mixed_mm.out";
  ETRT_CHECK_OK(qmix::check_operands(op, input, weight, weight_scales, weight_zero_points));
  const int64_t m = input.size(0), n = input.size(1), p = weight.size(1);
  if (weight.size(0) != n)
    return fail(Error::InvalidArgument, op, ": input ", input.describe(), " and weight ", weight.describe(),
                " do not chain (", n, " != ", weight.size(0), ")");
  if (weight_scales.dim() != 1 || weight_scales.size(0) != n)
    return fail(Error::InvalidArgument, op, ": weight_scales ", weight_scales.describe(), " must be [", n, "]");
  if (out.dtype() != input.dtype() || !contains(Dtypes{}, out.dtype()))
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " must be the input's (",
                name(input.dtype()), ")");
  std::vector<float> s;
  ETRT_CHECK_OK(qmix::resize_and_read_scales(op, ctx, weight_scales, m, p, out, s));
  if (out.numel() == 0) return {};
  const LoadFn<float> lx = loader_for<float>(input.dtype());
  const int8_t* w = weight.data_as<int8_t>();
  const int64_t xs0 = input.stride(0), xs1 = input.stride(1), ws0 = weight.stride(0), ws1 = weight.stride(1);
  const int64_t zs0 = out.stride(0), zs1 = out.stride(1);
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    T* z = out.data_as<T>();
    std::vector<float> acc(static_cast<size_t>(p));
    for (int64_t i = 0; i < m; ++i) {
      std::fill(acc.begin(), acc.end(), 0.f);
      // k outermost keeps the weight reads sequential; each acc[j] still sums over k in increasing order.
      for (int64_t k = 0; k < n; ++k) {
        const float x = lx(input.data(), i * xs0 + k * xs1), sk = s[static_cast<size_t>(k)];
        const int8_t* wk = w + k * ws0;
        for (int64_t j = 0; j < p; ++j) acc[j] += x * static_cast<float>(wk[j * ws1]) * sk;
      }
      for (int64_t j = 0; j < p; ++j) z[i * zs0 + j * zs1] = convert<T>(acc[j]);
    }
    return Status{};
  });
}

template <class Dtypes>
Status mixed_linear_out(KernelContext& ctx, const Tensor& input, const Tensor& weight, const Tensor& weight_scales,
                        const Tensor* weight_zero_points, std::optional<ScalarType> dtype, Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::mixed_linear.out";
  ETRT_CHECK_OK(qmix::check_operands(op, input, weight, weight_scales, weight_zero_points));
  const int64_t m = input.size(0), n = input.size(1), p = weight.size(0);
  if (weight.size(1) != n)
    return fail(Error::InvalidArgument, op, ": input ", input.describe(), " and weight ", weight.describe(),
                " differ in the reduced dim (", n, " != ", weight.size(1), ")");
  if ((weight_scales.dim() != 1 && weight_scales.dim() != 2) || weight_scales.size(0) != p)
    return fail(Error::InvalidArgument, op, ": weight_scales ", weight_scales.describe(), " must be [", p,
                "] or [", p, ", groups]");
  const int64_t groups = weight_scales.dim() == 2 ? weight_scales.size(1) : 1;
  if (groups < 1 || n % groups != 0)
    return fail(Error::InvalidArgument, op, ": ", groups, " scale group(s) do not divide the row length ", n);
  if (dtype && *dtype != out.dtype())
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != requested dtype ", name(*dtype));
  if (!is_floating(out.dtype()) || !contains(Dtypes{}, out.dtype()))
    return fail(Error::InvalidArgument, op, ": unsupported output dtype ", name(out.dtype()));
  std::vector<float> s;  // [p, groups] in logical order
  ETRT_CHECK_OK(qmix::resize_and_read_scales(op, ctx, weight_scales, m, p, out, s));
  if (out.numel() == 0) return {};
  const int64_t g = n / groups;
  const LoadFn<float> lx = loader_for<float>(input.dtype());
  const int8_t* w = weight.data_as<int8_t>();
  const int64_t xs0 = input.stride(0), xs1 = input.stride(1), ws0 = weight.stride(0), ws1 = weight.stride(1);
  const int64_t zs0 = out.stride(0), zs1 = out.stride(1);
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    T* z = out.data_as<T>();
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t k = 0; k < n; ++k) x[k] = lx(input.data(), i * xs0 + k * xs1);
      for (int64_t j = 0; j < p; ++j) {
        const int8_t* wj = w + j * ws0;
        float sum = 0.f;
        for (int64_t gi = 0; gi < groups; ++gi) {
          float psum = 0.f;
          for (int64_t k = gi * g; k < (gi + 1) * g; ++k) psum += x[k] * static_cast<float>(wj[k * ws1]);
          sum += psum * s[static_cast<size_t>(j * groups + gi)];
        }
        z[i * zs0 + j * zs1] = convert<T>(sum);
      }
    }
    return Status{};
  });
}

template <class Dtypes>
Status quantized_add_out(KernelContext& ctx, const Tensor& a, double a_scale, int64_t a_zero_point,
                         int64_t a_quant_min, int64_t a_quant_max, const Tensor& b, double b_scale,
                         int64_t b_zero_point, int64_t b_quant_min, int64_t b_quant_max, double out_scale,
                         int64_t out_zero_point, int64_t out_quant_min, int64_t out_quant_max, Tensor& out) {
  constexpr std::string_view op = "quantized_decomposed::add.out";
  if (a.dtype() != b.dtype() || a.dtype() != out.dtype())
    return fail(Error::InvalidArgument, op, ": a, b and out must share a dtype, got ", a.describe(), ", ",
                b.describe(), " and ", out.describe());
  if (!std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end()))
    return fail(Error::InvalidArgument, op, ": a ", a.describe(), " and b ", b.describe(),
                " must have the same shape (no broadcasting)");
  const struct {
    std::string_view what;
    double scale;
    int64_t zp, lo, hi;
  } params[] = {{"a", a_scale, a_zero_point, a_quant_min, a_quant_max},
                {"b", b_scale, b_zero_point, b_quant_min, b_quant_max},
                {"out", out_scale, out_zero_point, out_quant_min, out_quant_max}};
  return visit(out.dtype(), Dtypes{}, op, [&]<class Q>() -> Status {
    for (const auto& p : params) {
      const float fs = static_cast<float>(p.scale);
      if (!(fs > 0.f) || !std::isfinite(fs))
        return fail(Error::InvalidArgument, op, ": ", p.what, "_scale ", quant_detail::real_str(p.scale),
                    " is not a positive finite scale");
      if (p.lo > p.hi || p.lo < static_cast<int64_t>(std::numeric_limits<Q>::lowest()) ||
          p.hi > static_cast<int64_t>(std::numeric_limits<Q>::max()))
        return fail(Error::InvalidArgument, op, ": ", p.what, "_quant_min ", p.lo, " / ", p.what, "_quant_max ", p.hi,
                    " are invalid for ", name(out.dtype()));
    }
    ETRT_CHECK_OK(ctx.resize(op, out, a.sizes()));
    // Upstream narrows scales to float and zero points to int32 ("numerical consistency with fbgemm").
    const double sa = static_cast<float>(a_scale), sb = static_cast<float>(b_scale);
    const int64_t za = static_cast<int32_t>(a_zero_point), zb = static_cast<int32_t>(b_zero_point);
    const float inv = 1.f / static_cast<float>(out_scale);
    const float zo = static_cast<float>(static_cast<int32_t>(out_zero_point));
    const mv::View va = mv::view_of(a), vb = mv::view_of(b), vo = mv::view_of(out);
    std::vector<int64_t> ob, oo;
    mv::for_each_view_offset(vb, [&](int64_t o) { ob.push_back(o); });
    mv::for_each_view_offset(vo, [&](int64_t o) { oo.push_back(o); });
    const Q* pa = a.data_as<Q>();
    const Q* pb = b.data_as<Q>();
    Q* po = out.data_as<Q>();
    size_t k = 0;
    mv::for_each_view_offset(va, [&](int64_t o) {
      // Subtracted in double: an int64 element minus a zero point can overflow int64.
      const float da = static_cast<float>((static_cast<double>(pa[o]) - static_cast<double>(za)) * sa);
      const float db = static_cast<float>((static_cast<double>(pb[ob[k]]) - static_cast<double>(zb)) * sb);
      const int64_t q = convert<int64_t>(static_cast<double>(zo + std::nearbyint(inv * (da + db))));
      po[oo[k]] = static_cast<Q>(std::clamp(q, out_quant_min, out_quant_max));
      ++k;
    });
    return Status{};
  });
}

}  // namespace etrt::kernels
