// where, masked_fill and the copy family (clone, alias_copy, detach_copy, lift_fresh_copy, copy, _to_copy,
// _to_dim_order_copy, _clone_dim_order, scalar_tensor).
//
// Copies go element by logical index, so the output may have another dim order than the input (the program decides
// the output's layout); a dense copy between identical layouts and dtypes is one memmove.
#pragma once

#include "etrt/kernels/util/pointwise_util.h"

namespace etrt::kernels {

template <class Dtypes>
Status where_self_out(KernelContext& ctx, const Tensor& condition, const Tensor& self, const Tensor& other,
                      Tensor& out) {
  constexpr std::string_view op = "where.self_out";
  if (condition.dtype() != ScalarType::Bool && condition.dtype() != ScalarType::Byte)
    return fail(Error::InvalidArgument, op, ": condition dtype must be Bool or Byte, got ", name(condition.dtype()));
  ETRT_TRY(Shape shape, broadcast_all(op, condition, self, other));
  ETRT_CHECK_OK(ctx.resize(op, out, shape.span()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    return map_mixed<T>(op, out, types<bool, T, T>{}, [](bool c, T a, T b) { return c ? a : b; }, condition, self,
                        other);
  });
}

template <class Dtypes>
Status masked_fill_scalar_out(KernelContext& ctx, const Tensor& self, const Tensor& mask, const Scalar& value,
                              Tensor& out) {
  constexpr std::string_view op = "masked_fill.Scalar_out";
  if (mask.dtype() != ScalarType::Bool)
    return fail(Error::InvalidArgument, op, ": mask dtype must be Bool, got ", name(mask.dtype()));
  ETRT_TRY(Shape shape, broadcast_all(op, self, mask));
  ETRT_CHECK_OK(ctx.resize(op, out, shape.span()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T v = convert<T>(scalar_as<compute_t<T>>(value));
    return map_mixed<T>(op, out, types<T, bool>{}, [v](T x, bool m) { return m ? v : x; }, self, mask);
  });
}

namespace detail {
template <class Dtypes>
Status same_dtype_copy(std::string_view op, KernelContext& ctx, const Tensor& self, Tensor& out) {
  if (self.dtype() != out.dtype())
    return fail(Error::InvalidArgument, op, ": output dtype ", name(out.dtype()), " must equal input dtype ",
                name(self.dtype()));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return copy_convert<Dtypes>(op, self, out);
}

/// The dim-order copies: out has self's rank and, when `dim_order` is given, that dim order.
inline Status check_dim_order(std::string_view op, const Tensor& self,
                              std::optional<std::span<const int64_t>> dim_order, const Tensor& out) {
  if (self.dim() != out.dim())
    return fail(Error::InvalidArgument, op, ": output rank ", out.dim(), " must equal input rank ", self.dim());
  if (!dim_order) return {};
  if (dim_order->size() != static_cast<size_t>(out.dim()))
    return fail(Error::InvalidArgument, op, ": dim_order has ", dim_order->size(), " entries, expected ", out.dim(),
                " (the output's rank)");
  for (int i = 0; i < out.dim(); ++i)
    if ((*dim_order)[i] != out.dim_order()[i])
      return fail(Error::InvalidArgument, op, ": dim_order argument does not match the output tensor's dim order");
  return {};
}
}  // namespace detail

template <class Dtypes>
Status clone_out(KernelContext& ctx, const Tensor& self, const EValue& /*memory_format*/, Tensor& out) {
  return detail::same_dtype_copy<Dtypes>("clone.out", ctx, self, out);
}
template <class Dtypes>
Status alias_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::same_dtype_copy<Dtypes>("alias_copy.out", ctx, self, out);
}
template <class Dtypes>
Status detach_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::same_dtype_copy<Dtypes>("detach_copy.out", ctx, self, out);
}
template <class Dtypes>
Status lift_fresh_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::same_dtype_copy<Dtypes>("lift_fresh_copy.out", ctx, self, out);
}

/// copy(self, src): the result has self's shape and dtype, with src's values broadcast into it.
template <class Dtypes>
Status copy_out(KernelContext& ctx, const Tensor& self, const Tensor& src, bool /*non_blocking*/, Tensor& out) {
  constexpr std::string_view op = "copy.out";
  ETRT_TRY(Shape shape, broadcast_shapes(op, self.sizes(), src.sizes()));
  if (!std::ranges::equal(shape.span(), self.sizes()))
    return fail(Error::InvalidArgument, op, ": src shape ", shape_str(src.sizes()),
                " cannot be broadcast to self shape ", shape_str(self.sizes()));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  if (std::ranges::equal(src.sizes(), out.sizes())) return copy_convert<Dtypes>(op, src, out);
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    return map_mixed<T>(op, out, types<T>{}, [](T x) { return x; }, src);
  });
}

/// _to_copy.out: dtype conversion; torch's out variant has no dtype argument: the target dtype is the output's.
template <class Dtypes>
Status to_copy_out(KernelContext& ctx, const Tensor& self, bool /*non_blocking*/, const EValue& /*memory_format*/,
                   Tensor& out) {
  constexpr std::string_view op = "_to_copy.out";
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return copy_convert<Dtypes>(op, self, out);
}

/// dim_order_ops::_to_dim_order_copy.out: dtype and layout conversion; the output's dim order is the program's.
template <class Dtypes>
Status to_dim_order_copy_out(KernelContext& ctx, const Tensor& self, bool /*non_blocking*/,
                             std::optional<std::span<const int64_t>> dim_order, Tensor& out) {
  constexpr std::string_view op = "_to_dim_order_copy.out";
  ETRT_CHECK_OK(detail::check_dim_order(op, self, dim_order, out));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return copy_convert<Dtypes>(op, self, out);
}

/// dim_order_ops::_clone_dim_order.out: a layout-changing copy without dtype conversion.
template <class Dtypes>
Status clone_dim_order_out(KernelContext& ctx, const Tensor& self, bool /*non_blocking*/,
                           std::optional<std::span<const int64_t>> dim_order, Tensor& out) {
  constexpr std::string_view op = "_clone_dim_order.out";
  ETRT_CHECK_OK(detail::check_dim_order(op, self, dim_order, out));
  return detail::same_dtype_copy<Dtypes>(op, ctx, self, out);
}

/// scalar_tensor.out(Scalar s, *, Tensor(a!) out): the output's dtype is the target dtype.
template <class Dtypes>
Status scalar_tensor_out(KernelContext& ctx, const Scalar& s, Tensor& out) {
  constexpr std::string_view op = "scalar_tensor.out";
  if (out.dim() != 0) {  // a rank-1 one-element output is tolerated
    std::array<int64_t, kMaxDims> ones;
    ones.fill(1);
    ETRT_CHECK_OK(ctx.resize(op, out, std::span<const int64_t>(ones.data(), out.dim())));
  }
  if (out.numel() != 1)
    return fail(Error::InvalidArgument, op, ": output must hold one element, got shape ", shape_str(out.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    *out.data_as<T>() = convert<T>(scalar_as<compute_t<T>>(s));
    return {};
  });
}

}  // namespace etrt::kernels
