// add, sub, mul, div (true, trunc and floor rounding), rsub and their Scalar forms.
#pragma once

#include <cmath>

#include "etrt/kernels/ops/unary.h"  // FloorDivFn, int_checked_binary: floor division as floor_divide does it
#include "etrt/kernels/util/elementwise.h"

namespace etrt::kernels {

namespace detail {
/// A rank-0 view of a Scalar in the compute type, so Scalar forms reuse the tensor path.
template <class C>
struct ScalarBox {
  C value;
};
}  // namespace detail

template <class Dtypes>
Status add_out(KernelContext& ctx, const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  if (alpha.is_integral() && alpha.to_int() == 1)
    return binary_arith<Dtypes>("add.out", ctx, self, other, out, []<class C>(C x, C y) { return wrapping_add(x, y); });
  return visit(out.dtype(), Dtypes{}, "add.out", [&]<class T>() -> Status {
    using C = compute_t<T>;
    const C a = scalar_as<C>(alpha);
    return binary_arith<types<T>>("add.out", ctx, self, other, out, [a](C x, C y) { return wrapping_add(x, wrapping_mul(a, y)); });
  });
}

template <class Dtypes>
Status sub_out(KernelContext& ctx, const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  return visit(out.dtype(), Dtypes{}, "sub.out", [&]<class T>() -> Status {
    using C = compute_t<T>;
    const C a = scalar_as<C>(alpha);
    return binary_arith<types<T>>("sub.out", ctx, self, other, out, [a](C x, C y) { return wrapping_sub(x, wrapping_mul(a, y)); });
  });
}

template <class Dtypes>
Status mul_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return binary_arith<Dtypes>("mul.out", ctx, self, other, out, []<class C>(C x, C y) { return wrapping_mul(x, y); });
}

/// True division: the output is floating (the exporter gives it a float dtype).
template <class Dtypes>
Status div_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  if (!is_floating(out.dtype()) && !is_complex(out.dtype()))
    return fail(Error::InvalidArgument, "div.out: output dtype ", name(out.dtype()), " is not floating");
  return binary_arith<Dtypes>("div.out", ctx, self, other, out, [](auto x, auto y) { return x / y; });
}

namespace detail {
/// Division rounded toward zero.
struct TruncDivFn {
  template <class C>
  C operator()(C x, C y, bool& dz) const {
    if constexpr (std::is_integral_v<C>) {
      return guarded_int_div<true>(x, y, dz, [](C a, C b) { return static_cast<C>(a / b); });
    } else {
      return std::trunc(x / y);
    }
  }
};

inline Status check_rounding_mode(std::string_view op, std::optional<std::string_view> mode) {
  if (mode && *mode != "trunc" && *mode != "floor")
    return fail(Error::InvalidArgument, op, ": rounding_mode must be one of None, 'trunc' or 'floor', got '", *mode,
                "'");
  return {};
}
}  // namespace detail

/// div with a rounding mode. Floor rounding is torch's div_floor (the same as floor_divide): floor(x / y) computed
/// from fmod, so 1.0 // 0.1 is 9 as in torch, not floor(10.0). Integer division by zero is an error, as torch raises
/// ZeroDivisionError.
template <class Dtypes>
Status div_out_mode(KernelContext& ctx, const Tensor& self, const Tensor& other, std::optional<std::string_view> mode,
                    Tensor& out) {
  constexpr std::string_view op = "div.out_mode";
  ETRT_CHECK_OK(detail::check_rounding_mode(op, mode));
  if (!mode) return div_out<Dtypes>(ctx, self, other, out);
  if (*mode == "trunc") return detail::int_checked_binary<Dtypes>(op, ctx, self, other, out, detail::TruncDivFn{});
  return detail::int_checked_binary<Dtypes>(op, ctx, self, other, out, detail::FloorDivFn{});
}

/// div.Scalar_mode_out: the tensor divided by a Scalar with a rounding mode. The scalar stays in the compute type
/// (float for Half/BFloat16 outputs) instead of being rounded to the output dtype first, as torch's CPU kernels use
/// the wrapped number's original value.
template <class Dtypes>
Status div_scalar_mode_out(KernelContext& ctx, const Tensor& self, const Scalar& other,
                           std::optional<std::string_view> mode, Tensor& out) {
  constexpr std::string_view op = "div.Scalar_mode_out";
  ETRT_CHECK_OK(detail::check_rounding_mode(op, mode));
  ScalarType common = result_type_with_scalar(self.dtype(), other.is_floating(), other.is_bool());
  if (!mode && !is_floating(common)) common = ScalarType::Float;  // true division of integers
  if (is_floating(common) && !is_floating(out.dtype()))
    return fail(Error::InvalidArgument, op, ": result type ", name(common), " can't be cast to the output dtype ",
                name(out.dtype()));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    const C y = scalar_as<C>(other);
    if constexpr (std::is_integral_v<C>) {
      // An integral output means a rounding mode was given (true division was refused above).
      if (y == 0) return fail(Error::InvalidArgument, op, ": integer division by zero");
    } else {
      if (!mode) return map_elementwise<C, C>(op, out, [y](C x) { return x / y; }, self);
    }
    bool dz = false;  // never set: y is a nonzero integer here, and floating division by zero gives inf/NaN
    if (*mode == "trunc")
      return map_elementwise<C, C>(op, out, [y, &dz](C x) { return detail::TruncDivFn{}(x, y, dz); }, self);
    return map_elementwise<C, C>(op, out, [y, &dz](C x) { return detail::FloorDivFn{}(x, y, dz); }, self);
  });
}

/// Scalar forms: the scalar is materialised as a rank-0 tensor of the output dtype (torch's wrapped number rule
/// makes the result dtype that of the tensor, which the exporter already chose for `out`).
template <class Dtypes, class F>
Status with_scalar_tensor(std::string_view op, const Scalar& s, ScalarType dtype, F&& body) {
  return visit(dtype, Dtypes{}, op, [&]<class T>() -> Status {
    T value = convert<T>(scalar_as<compute_t<T>>(s));
    auto t = Tensor::make(dtype_of<T>, {}, {}, &value);
    if (!t) return std::move(t).error();
    return body(*t);
  });
}

template <class Dtypes>
Status add_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& other, const Scalar& alpha, Tensor& out) {
  return with_scalar_tensor<Dtypes>("add.Scalar_out", other, out.dtype(),
                                    [&](const Tensor& o) { return add_out<Dtypes>(ctx, self, o, alpha, out); });
}
template <class Dtypes>
Status sub_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& other, const Scalar& alpha, Tensor& out) {
  return with_scalar_tensor<Dtypes>("sub.Scalar_out", other, out.dtype(),
                                    [&](const Tensor& o) { return sub_out<Dtypes>(ctx, self, o, alpha, out); });
}
template <class Dtypes>
Status mul_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& other, Tensor& out) {
  return with_scalar_tensor<Dtypes>("mul.Scalar_out", other, out.dtype(),
                                    [&](const Tensor& o) { return mul_out<Dtypes>(ctx, self, o, out); });
}
template <class Dtypes>
Status div_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& other, Tensor& out) {
  return with_scalar_tensor<Dtypes>("div.Scalar_out", other, out.dtype(),
                                    [&](const Tensor& o) { return div_out<Dtypes>(ctx, self, o, out); });
}
/// rsub(self, other, alpha) = other - alpha * self
template <class Dtypes>
Status rsub_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& other, const Scalar& alpha, Tensor& out) {
  return with_scalar_tensor<Dtypes>("rsub.Scalar_out", other, out.dtype(),
                                    [&](const Tensor& o) { return sub_out<Dtypes>(ctx, o, self, alpha, out); });
}

}  // namespace etrt::kernels
