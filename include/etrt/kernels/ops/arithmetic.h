// add, sub, mul, div, rsub and their Scalar forms.
#pragma once

#include <cmath>

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
    return binary_arith<Dtypes>("add.out", ctx, self, other, out, [](auto x, auto y) { return x + y; });
  return visit(out.dtype(), Dtypes{}, "add.out", [&]<class T>() -> Status {
    using C = compute_t<T>;
    const C a = scalar_as<C>(alpha);
    return binary_arith<types<T>>("add.out", ctx, self, other, out, [a](C x, C y) { return x + a * y; });
  });
}

template <class Dtypes>
Status sub_out(KernelContext& ctx, const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  return visit(out.dtype(), Dtypes{}, "sub.out", [&]<class T>() -> Status {
    using C = compute_t<T>;
    const C a = scalar_as<C>(alpha);
    return binary_arith<types<T>>("sub.out", ctx, self, other, out, [a](C x, C y) { return x - a * y; });
  });
}

template <class Dtypes>
Status mul_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return binary_arith<Dtypes>("mul.out", ctx, self, other, out, [](auto x, auto y) { return x * y; });
}

/// True division: the output is floating (the exporter gives it a float dtype).
template <class Dtypes>
Status div_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  if (!is_floating(out.dtype()) && !is_complex(out.dtype()))
    return fail(Error::InvalidArgument, "div.out: output dtype ", name(out.dtype()), " is not floating");
  return binary_arith<Dtypes>("div.out", ctx, self, other, out, [](auto x, auto y) { return x / y; });
}

template <class Dtypes>
Status div_out_mode(KernelContext& ctx, const Tensor& self, const Tensor& other, std::optional<std::string_view> mode,
                    Tensor& out) {
  if (!mode) return div_out<Dtypes>(ctx, self, other, out);
  if (*mode == "trunc")
    return binary_arith<Dtypes>("div.out_mode", ctx, self, other, out, [](auto x, auto y) {
      using C = decltype(x);
      if constexpr (std::is_floating_point_v<C>) return std::trunc(x / y);
      else return y == 0 ? C{0} : static_cast<C>(x / y);
    });
  if (*mode == "floor")
    return binary_arith<Dtypes>("div.out_mode", ctx, self, other, out, [](auto x, auto y) {
      using C = decltype(x);
      if constexpr (std::is_floating_point_v<C>) {
        return std::floor(x / y);
      } else {
        if (y == 0) return C{0};
        C q = static_cast<C>(x / y);
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return q;
      }
    });
  return fail(Error::InvalidArgument, "div.out_mode: unknown rounding_mode '", *mode, "'");
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
