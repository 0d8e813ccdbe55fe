// Reductions: sum, mean, amax, amin, max/min (unary and dim), argmax, argmin, prod, any, var, var_mean, cumsum.
//
// The shared engine (the reduction plan and the accumulators) is in kernels/util/reduction.h (Note [reduction plan]).
#pragma once

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "etrt/kernels/util/pointwise_util.h"
#include "etrt/kernels/util/reduction.h"

namespace etrt::kernels {

namespace detail {

/// The reduction's mask of reduced dims, with `out` (and `out2`, when given) resized to the reduced shape.
inline Result<ReduceMask> resize_reduced(std::string_view op, KernelContext& ctx, const Tensor& self,
                                         std::optional<std::span<const int64_t>> dim, bool keepdim, Tensor& out,
                                         Tensor* out2 = nullptr) {
  ETRT_TRY(ReduceMask m, reduce_mask(op, self.dim(), dim));
  const Shape os = reduced_shape(self.sizes(), m, keepdim);
  ETRT_CHECK_OK(ctx.resize(op, out, os.span()));
  if (out2) ETRT_CHECK_OK(ctx.resize(op, *out2, os.span()));
  return m;
}

/// Shared body of sum / mean / prod: compute in out's dtype, input converted to it.
template <class Dtypes, template <class> class R>
Status sum_like(std::string_view op, KernelContext& ctx, const Tensor& self,
                std::optional<std::span<const int64_t>> dim, bool keepdim, std::optional<ScalarType> dtype,
                Tensor& out, bool is_mean) {
  ETRT_CHECK_OK(check_dtype_arg(op, dtype, out));
  if (is_mean && !is_floating(out.dtype()))
    return fail(Error::InvalidArgument, op, ": output dtype must be floating, got ", name(out.dtype()));
  ETRT_TRY(ReduceMask m, resize_reduced(op, ctx, self, dim, keepdim, out));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if (out.numel() == 0) return {};
    ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, self));
    const ReducePlan p = make_plan(self.sizes(), in.strides, m, keepdim, out);
    R<T> r;
    if constexpr (requires { r.is_mean; }) {
      r.is_mean = is_mean;
      r.scale = p.count == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / static_cast<double>(p.count);
    }
    run_plan<T>(p, in.data, out.data_as<T>(), r);
    return {};
  });
}

template <class Dtypes, bool IsMax>
Status extreme(std::string_view op, KernelContext& ctx, const Tensor& self, std::optional<std::span<const int64_t>> dim,
               bool keepdim, Tensor& out) {
  if (out.dtype() != self.dtype())
    return fail(Error::InvalidArgument, op, ": output dtype ", name(out.dtype()), " must equal input dtype ",
                name(self.dtype()));
  ETRT_TRY(ReduceMask m, resize_reduced(op, ctx, self, dim, keepdim, out));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if (out.numel() == 0) return {};
    const ReducePlan p = make_plan(self.sizes(), strides_array(self), m, keepdim, out);
    if (p.count == 0)
      return fail(Error::InvalidArgument, op, ": cannot reduce over a zero-size dimension of input shape ",
                  shape_str(self.sizes()));
    run_plan<T>(p, self.data_as<const T>(), out.data_as<T>(), ExtremeR<T, IsMax>{});
    return {};
  });
}

/// argmax/argmin along one line: the first extreme, or the first NaN.
template <bool IsMax, class T>
inline std::pair<compute_t<T>, int64_t> arg_line(const T* p, int64_t n, int64_t s) {
  using C = compute_t<T>;
  C best = static_cast<C>(p[0]);
  int64_t bi = 0;
  if constexpr (std::is_floating_point_v<C>) {
    if (best != best) return {best, 0};
  }
  for (int64_t i = 1; i < n; ++i) {
    const C v = static_cast<C>(p[i * s]);
    if constexpr (std::is_floating_point_v<C>) {
      if (v != v) return {v, i};
    }
    if (IsMax ? v > best : v < best) {
      best = v;
      bi = i;
    }
  }
  return {best, bi};
}

/// argmax/argmin/max.dim/min.dim. `values` may be null (arg* only). `dim` None reduces the flattened input.
template <class Dtypes, bool IsMax>
Status arg_extreme(std::string_view op, KernelContext& ctx, const Tensor& self, std::optional<int64_t> dim,
                   bool keepdim, Tensor* values, Tensor& indices) {
  if (indices.dtype() != ScalarType::Long)
    return fail(Error::InvalidArgument, op, ": indices dtype must be Long, got ", name(indices.dtype()));
  if (values && values->dtype() != self.dtype())
    return fail(Error::InvalidArgument, op, ": values dtype ", name(values->dtype()), " must equal input dtype ",
                name(self.dtype()));
  ReduceMask m;
  if (dim) {
    ETRT_TRY(const int d, wrap_dim(op, *dim, self.dim()));
    if (self.dim() > 0) {
      m.reduce[d] = true;
      m.count = 1;
    }
  } else {
    for (int d = 0; d < self.dim(); ++d) m.reduce[d] = true;
    m.count = self.dim();
  }
  const Shape os = reduced_shape(self.sizes(), m, keepdim);
  ETRT_CHECK_OK(ctx.resize(op, indices, os.span()));
  if (values) ETRT_CHECK_OK(ctx.resize(op, *values, os.span()));
  return visit(self.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if (indices.numel() == 0) return {};
    if (self.numel() == 0)
      return fail(Error::InvalidArgument, op, ": cannot reduce over a zero-size dimension of input shape ",
                  shape_str(self.sizes()));
    int64_t* io = indices.data_as<int64_t>();
    T* vo = values ? values->data_as<T>() : nullptr;
    if (!dim) {  // flattened, in logical (row-major) order
      ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, self, /*force_contiguous=*/true));
      const auto [v, i] = arg_line<IsMax>(in.data, self.numel(), 1);
      io[0] = i;
      if (vo) vo[0] = static_cast<T>(v);
      return {};
    }
    const ReducePlan p = make_plan(self.sizes(), strides_array(self), m, keepdim, indices, values);
    const std::array<std::array<int64_t, kMaxDims>, 3> kst{p.kin, p.kout, p.kout2};
    const T* in = self.data_as<const T>();
    for_each_offset<3>(p.kept, kst, [&](const std::array<int64_t, 3>& off) {
      const auto [v, i] = arg_line<IsMax>(in + off[0], p.line_n, p.line_s);
      io[off[1]] = i;
      if (vo) vo[off[2]] = static_cast<T>(v);
    });
    return {};
  });
}

/// var (and mean) with a correction, two passes in double per output.
template <class Dtypes>
Status var_impl(std::string_view op, KernelContext& ctx, const Tensor& self,
                std::optional<std::span<const int64_t>> dim, const std::optional<Scalar>& correction, bool keepdim,
                Tensor& var_out, Tensor* mean_out) {
  if (!is_floating(self.dtype()))
    return fail(Error::InvalidArgument, op, ": std and var only support floating point inputs, got ",
                name(self.dtype()));
  if (!is_floating(var_out.dtype()))
    return fail(Error::InvalidArgument, op, ": output dtype must be floating, got ", name(var_out.dtype()));
  if (mean_out && mean_out->dtype() != var_out.dtype())
    return fail(Error::InvalidArgument, op, ": mean output dtype ", name(mean_out->dtype()),
                " must equal the variance output dtype ", name(var_out.dtype()));
  const double corr = correction ? correction->to_double() : 1.0;
  ETRT_TRY(ReduceMask m, resize_reduced(op, ctx, self, dim, keepdim, var_out, mean_out));
  return visit(var_out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if (var_out.numel() == 0) return {};
    ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, self));
    const ReducePlan p = make_plan(self.sizes(), in.strides, m, keepdim, var_out, mean_out);
    const std::array<std::array<int64_t, kMaxDims>, 3> kst{p.kin, p.kout, p.kout2};
    const std::array<std::array<int64_t, kMaxDims>, 1> rst{p.rin};
    T* vo = var_out.data_as<T>();
    T* mo = mean_out ? mean_out->data_as<T>() : nullptr;
    const double n = static_cast<double>(p.count);
    const double denom = std::max(0.0, n - corr);
    const SumR<T> sum;
    for_each_offset<3>(p.kept, kst, [&](const std::array<int64_t, 3>& off) {
      const T* base = in.data + off[0];
      double s = 0;
      for_each_offset<1>(p.outer, rst, [&](const std::array<int64_t, 1>& r) {
        s += static_cast<double>(sum.line(base + r[0], p.line_n, p.line_s));
      });
      const double mean = s / n;
      double ss = 0;
      for_each_offset<1>(p.outer, rst, [&](const std::array<int64_t, 1>& r) {
        const T* q = base + r[0];
        for (int64_t i = 0; i < p.line_n; ++i) {
          const double dv = static_cast<double>(static_cast<compute_t<T>>(q[i * p.line_s])) - mean;
          ss += dv * dv;
        }
      });
      vo[off[1]] = convert<T>(ss / denom);
      if (mo) mo[off[2]] = convert<T>(mean);
    });
    return {};
  });
}

}  // namespace detail

// ---- sum, mean, prod ---------------------------------------------------------------------------------------------

template <class Dtypes>
Status sum_intlist_out(KernelContext& ctx, const Tensor& self, std::optional<std::span<const int64_t>> dim,
                       bool keepdim, std::optional<ScalarType> dtype, Tensor& out) {
  return detail::sum_like<Dtypes, detail::SumR>("sum.IntList_out", ctx, self, dim, keepdim, dtype, out, false);
}

template <class Dtypes>
Status mean_out(KernelContext& ctx, const Tensor& self, std::optional<std::span<const int64_t>> dim, bool keepdim,
                std::optional<ScalarType> dtype, Tensor& out) {
  return detail::sum_like<Dtypes, detail::SumR>("mean.out", ctx, self, dim, keepdim, dtype, out, true);
}

template <class Dtypes>
Status mean_dtype_out(KernelContext& ctx, const Tensor& self, std::optional<ScalarType> dtype, Tensor& out) {
  return detail::sum_like<Dtypes, detail::SumR>("mean.dtype_out", ctx, self, std::nullopt, false, dtype, out, true);
}

template <class Dtypes>
Status prod_out(KernelContext& ctx, const Tensor& self, std::optional<ScalarType> dtype, Tensor& out) {
  return detail::sum_like<Dtypes, detail::ProdR>("prod.out", ctx, self, std::nullopt, false, dtype, out, false);
}

template <class Dtypes>
Status prod_int_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool keepdim,
                    std::optional<ScalarType> dtype, Tensor& out) {
  const int64_t dims[1] = {dim};
  return detail::sum_like<Dtypes, detail::ProdR>("prod.int_out", ctx, self, std::span<const int64_t>(dims), keepdim,
                                                 dtype, out, false);
}

// ---- amax, amin, max, min ----------------------------------------------------------------------------------------

template <class Dtypes>
Status amax_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> dim, bool keepdim, Tensor& out) {
  return detail::extreme<Dtypes, true>("amax.out", ctx, self, dim, keepdim, out);
}
template <class Dtypes>
Status amin_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> dim, bool keepdim, Tensor& out) {
  return detail::extreme<Dtypes, false>("amin.out", ctx, self, dim, keepdim, out);
}
template <class Dtypes>
Status max_unary_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::extreme<Dtypes, true>("max.unary_out", ctx, self, std::nullopt, false, out);
}
template <class Dtypes>
Status min_unary_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::extreme<Dtypes, false>("min.unary_out", ctx, self, std::nullopt, false, out);
}

template <class Dtypes>
Status argmax_out(KernelContext& ctx, const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  return detail::arg_extreme<Dtypes, true>("argmax.out", ctx, self, dim, keepdim, nullptr, out);
}
template <class Dtypes>
Status argmin_out(KernelContext& ctx, const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  return detail::arg_extreme<Dtypes, false>("argmin.out", ctx, self, dim, keepdim, nullptr, out);
}
/// max.dim_max(self, dim, keepdim, *, max, max_values): values then indices.
template <class Dtypes>
Status max_dim_max_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool keepdim, Tensor& max,
                       Tensor& max_values) {
  return detail::arg_extreme<Dtypes, true>("max.dim_max", ctx, self, dim, keepdim, &max, max_values);
}
template <class Dtypes>
Status min_dim_min_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool keepdim, Tensor& min,
                       Tensor& min_indices) {
  return detail::arg_extreme<Dtypes, false>("min.dim_min", ctx, self, dim, keepdim, &min, min_indices);
}

// ---- any -----------------------------------------------------------------------------------------------------------

namespace detail {
template <class Dtypes>
Status any_impl(std::string_view op, KernelContext& ctx, const Tensor& self,
                std::optional<std::span<const int64_t>> dim, bool keepdim, Tensor& out) {
  if (out.dtype() != ScalarType::Bool && out.dtype() != ScalarType::Byte)
    return fail(Error::InvalidArgument, op, ": output dtype must be Bool or Byte, got ", name(out.dtype()));
  ETRT_TRY(ReduceMask m, resize_reduced(op, ctx, self, dim, keepdim, out));
  return visit(self.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if (out.numel() == 0) return {};
    const ReducePlan p = make_plan(self.sizes(), strides_array(self), m, keepdim, out);
    if (out.dtype() == ScalarType::Bool)
      run_plan<bool>(p, self.data_as<const T>(), out.data_as<bool>(), AnyR<T>{});
    else
      run_plan<uint8_t>(p, self.data_as<const T>(), out.data_as<uint8_t>(), AnyR<T>{});
    return {};
  });
}
}  // namespace detail

template <class Dtypes>
Status any_all_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::any_impl<Dtypes>("any.all_out", ctx, self, std::nullopt, false, out);
}
template <class Dtypes>
Status any_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  const int64_t dims[1] = {dim};
  return detail::any_impl<Dtypes>("any.out", ctx, self, std::span<const int64_t>(dims), keepdim, out);
}
template <class Dtypes>
Status any_dims_out(KernelContext& ctx, const Tensor& self, std::optional<std::span<const int64_t>> dim, bool keepdim,
                    Tensor& out) {
  return detail::any_impl<Dtypes>("any.dims_out", ctx, self, dim, keepdim, out);
}

// ---- var, var_mean -------------------------------------------------------------------------------------------------

template <class Dtypes>
Status var_correction_out(KernelContext& ctx, const Tensor& self, std::optional<std::span<const int64_t>> dim,
                          const std::optional<Scalar>& correction, bool keepdim, Tensor& out) {
  return detail::var_impl<Dtypes>("var.correction_out", ctx, self, dim, correction, keepdim, out, nullptr);
}

/// var.out: the older overload, where `unbiased` selects a correction of 1 (Bessel's) or 0.
template <class Dtypes>
Status var_out(KernelContext& ctx, const Tensor& self, std::optional<std::span<const int64_t>> dim, bool unbiased,
               bool keepdim, Tensor& out) {
  const std::optional<Scalar> correction = Scalar{int64_t{unbiased ? 1 : 0}};
  return detail::var_impl<Dtypes>("var.out", ctx, self, dim, correction, keepdim, out, nullptr);
}

template <class Dtypes>
Status var_mean_correction_out(KernelContext& ctx, const Tensor& self, std::optional<std::span<const int64_t>> dim,
                               const std::optional<Scalar>& correction, bool keepdim, Tensor& out0, Tensor& out1) {
  return detail::var_impl<Dtypes>("var_mean.correction_out", ctx, self, dim, correction, keepdim, out0, &out1);
}

// ---- cumsum --------------------------------------------------------------------------------------------------------

template <class Dtypes>
Status cumsum_out(KernelContext& ctx, const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, Tensor& out) {
  constexpr std::string_view op = "cumsum.out";
  ETRT_CHECK_OK(check_dtype_arg(op, dtype, out));
  ETRT_TRY(const int d, wrap_dim(op, dim, self.dim()));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if (out.numel() == 0) return {};
    ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, self));
    using A = detail::sum_acc_t<T>;
    T* o = out.data_as<T>();
    if (self.dim() == 0) {
      o[0] = in.data[0];
      return {};
    }
    Shape walk = shape_of(self.sizes());
    const int64_t n = walk.sizes[d];
    walk.sizes[d] = 1;
    const int64_t si = in.strides[d], so = out.stride(d);
    const std::array<std::array<int64_t, kMaxDims>, 2> st{in.strides, strides_array(out)};
    for_each_offset<2>(walk, st, [&](const std::array<int64_t, 2>& off) {
      A acc = 0;
      const T* p = in.data + off[0];
      T* q = o + off[1];
      for (int64_t i = 0; i < n; ++i) {
        acc += static_cast<A>(static_cast<compute_t<T>>(p[i * si]));
        q[i * so] = convert<T>(acc);
      }
    });
    return {};
  });
}

}  // namespace etrt::kernels
