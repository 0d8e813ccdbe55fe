// Comparisons (eq, ne, lt, le, gt, ge), logical_and/or/xor, bitwise_and/or/xor.
//
// Comparisons compute in the promoted dtype of the operands and store 0/1 into out's dtype (usually Bool). A Scalar
// operand joins as a rank-0 tensor of the dtype torch's wrapped-number rule gives it.
#pragma once

#include "etrt/kernels/util/pointwise_util.h"

namespace etrt::kernels {

namespace detail {
template <class Dtypes, class F>
Status compare_scalar(std::string_view op, KernelContext& ctx, const Tensor& self, const Scalar& other, Tensor& out,
                      F&& f) {
  const ScalarType st = result_type_with_scalar(self.dtype(), other.is_floating(), other.is_bool());
  return with_scalar_as<real_bool_types>(op, other, st, [&](const Tensor& o) {
    return binary_compare<Dtypes>(op, ctx, self, o, out, f);
  });
}
}  // namespace detail

#define ETRT_COMPARE_OP(NAME, EXPR)                                                                            \
  template <class Dtypes>                                                                                      \
  Status NAME##_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {        \
    return binary_compare<Dtypes>(#NAME ".Tensor_out", ctx, self, other, out, [](auto x, auto y) { return EXPR; }); \
  }                                                                                                            \
  template <class Dtypes>                                                                                      \
  Status NAME##_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& other, Tensor& out) {         \
    return detail::compare_scalar<Dtypes>(#NAME ".Scalar_out", ctx, self, other, out,                         \
                                          [](auto x, auto y) { return EXPR; });                                \
  }

ETRT_COMPARE_OP(eq, x == y)
ETRT_COMPARE_OP(ne, x != y)
ETRT_COMPARE_OP(lt, x < y)
ETRT_COMPARE_OP(le, x <= y)
ETRT_COMPARE_OP(gt, x > y)
ETRT_COMPARE_OP(ge, x >= y)
#undef ETRT_COMPARE_OP

namespace detail {
template <class Dtypes, class F>
Status logical_binary(std::string_view op, KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out, F&& f) {
  ETRT_TRY(Shape shape, broadcast_all(op, a, b));
  ETRT_CHECK_OK(ctx.resize(op, out, shape.span()));
  if (!contains(Dtypes{}, out.dtype()))
    return fail(Error::InvalidArgument, op, ": unsupported output dtype ", name(out.dtype()));
  return map_mixed<bool>(op, out, types<bool, bool>{}, f, a, b);
}
}  // namespace detail

template <class Dtypes>
Status logical_and_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return detail::logical_binary<Dtypes>("logical_and.out", ctx, self, other, out,
                                        [](bool x, bool y) { return x && y; });
}
template <class Dtypes>
Status logical_or_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return detail::logical_binary<Dtypes>("logical_or.out", ctx, self, other, out, [](bool x, bool y) { return x || y; });
}
template <class Dtypes>
Status logical_xor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return detail::logical_binary<Dtypes>("logical_xor.out", ctx, self, other, out, [](bool x, bool y) { return x != y; });
}

namespace detail {
template <class Dtypes, class F>
Status bitwise_binary(std::string_view op, KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out, F&& f) {
  if (!is_integral(out.dtype(), true))
    return fail(Error::InvalidArgument, op, ": output dtype must be integral or Bool, got ", name(out.dtype()));
  return binary_arith<Dtypes>(op, ctx, a, b, out, f);
}
}  // namespace detail

#define ETRT_BITWISE_OP(NAME, EXPR)                                                                            \
  template <class Dtypes>                                                                                      \
  Status NAME##_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {        \
    return detail::bitwise_binary<Dtypes>(#NAME ".Tensor_out", ctx, self, other, out,                         \
                                          [](auto x, auto y) { return EXPR; });                                \
  }                                                                                                            \
  template <class Dtypes>                                                                                      \
  Status NAME##_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& other, Tensor& out) {         \
    if (other.is_floating())                                                                                   \
      return fail(Error::InvalidArgument, #NAME ".Scalar_out: the scalar must be integral or bool");          \
    return with_scalar_as<Dtypes>(#NAME ".Scalar_out", other, out.dtype(), [&](const Tensor& o) {              \
      return detail::bitwise_binary<Dtypes>(#NAME ".Scalar_out", ctx, self, o, out,                           \
                                            [](auto x, auto y) { return EXPR; });                              \
    });                                                                                                        \
  }

ETRT_BITWISE_OP(bitwise_and, x & y)
ETRT_BITWISE_OP(bitwise_or, x | y)
ETRT_BITWISE_OP(bitwise_xor, x ^ y)

namespace detail {
/// torch's shifts: a shift by a negative count or by the type's width or more gives 0 (left) or the sign fill
/// (right), never the undefined behaviour of C++'s shift operators.
template <bool Left, class T>
T shift(T x, T y) {
  if constexpr (std::is_same_v<T, bool>) {
    return y ? false : x;
  } else {
    constexpr int64_t bits = sizeof(T) * 8;
    if (y < 0 || static_cast<int64_t>(y) >= bits)
      return !Left && std::is_signed_v<T> ? static_cast<T>(x < 0 ? -1 : 0) : T{0};
    if constexpr (Left) return static_cast<T>(static_cast<wrap_unsigned_t<T>>(x) << y);
    else return static_cast<T>(x >> y);
  }
}
template <class T>
T shift_left(T x, T y) { return shift<true>(x, y); }
template <class T>
T shift_right(T x, T y) { return shift<false>(x, y); }
}  // namespace detail

ETRT_BITWISE_OP(bitwise_left_shift, detail::shift_left(x, decltype(x)(y)))
ETRT_BITWISE_OP(bitwise_right_shift, detail::shift_right(x, decltype(x)(y)))
#undef ETRT_BITWISE_OP

}  // namespace etrt::kernels
