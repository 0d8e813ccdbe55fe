// Shape arithmetic and views of programs with symbolic sizes: aten::sym_size.int, aten::sym_numel,
// aten::_local_scalar_dense and the executorch_prim:: scalar ops the exporter emits for SymInt / SymFloat / SymBool
// expressions, plus executorch_prim::et_view.default and executorch_prim::et_copy_index.tensor (the loop body's
// output store of torch.map / scan programs).
//
// These kernels compute a new value into their return slot (gen/generate.py passes it as `ret`). A return slot must
// already hold a scalar (the exporter gives it an Int, Double or Bool placeholder): replacing a tensor or a list
// would leave dangling every list that refers to it, so anything else is refused. Integer arithmetic wraps like
// Python's fixed-width reference (never undefined behaviour), division and modulo by zero are errors, and floor
// division and modulo round toward negative infinity as Python's do.
#pragma once

#include <cmath>
#include <limits>

#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/dtype_util.h"
#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace prim {

/// Writes `v` into a scalar return slot.
inline Status set_scalar(std::string_view op, EValue& ret, EValue v) {
  if (!(ret.is_int() || ret.is_double() || ret.is_bool() || ret.is_none()))
    return fail(Error::InvalidProgram, op, ": its return slot holds ", tag_name(ret.tag()), ", not a scalar");
  ret = std::move(v);
  return {};
}

inline EValue to_evalue(const Scalar& s) {
  if (s.is_floating()) return EValue(std::get<double>(s.v));
  if (s.is_bool()) return EValue(std::get<bool>(s.v));
  return EValue(std::get<int64_t>(s.v));
}

/// Python's floor division and modulo on int64 (rounding toward negative infinity; the divisor's sign for %).
inline int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1) return wrapping_sub<int64_t>(0, a);  // INT64_MIN / -1 wraps instead of trapping
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/// A binary op on two Scalars: integers (and bools) stay integers through `int_op`, anything with a float computes
/// in double through `float_op`.
template <class IntOp, class FloatOp>
Status binary(std::string_view op, const Scalar& a, const Scalar& b, EValue& ret, IntOp int_op, FloatOp float_op) {
  if (!a.is_floating() && !b.is_floating()) {
    ETRT_TRY(int64_t v, int_op(a.to_int(), b.to_int()));
    return set_scalar(op, ret, EValue(v));
  }
  return set_scalar(op, ret, EValue(float_op(a.to_double(), b.to_double())));
}

template <class Cmp>
Status compare(std::string_view op, const Scalar& a, const Scalar& b, EValue& ret, Cmp cmp) {
  const bool v = (!a.is_floating() && !b.is_floating()) ? cmp(a.to_int(), b.to_int()) : cmp(a.to_double(), b.to_double());
  return set_scalar(op, ret, EValue(v));
}

inline Result<int64_t> checked_divisor(std::string_view op, int64_t b) {
  if (b == 0) return fail(Error::InvalidArgument, op, ": integer division by zero");
  return b;
}

/// double -> int64 as Python's int(): truncation, refusing NaN and values out of range.
inline Result<int64_t> to_int64(std::string_view op, double d) {
  if (!(d >= -9.2233720368547758e18 && d < 9.2233720368547758e18))
    return fail(Error::InvalidArgument, op, ": ", d, " does not fit in a 64-bit integer");
  return static_cast<int64_t>(d);
}

}  // namespace prim

template <class Dtypes>
Status sym_size_int(KernelContext&, const Tensor& self, int64_t dim, EValue& ret) {
  constexpr std::string_view op = "sym_size.int";
  const int64_t rank = self.dim();
  const int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    return fail(Error::InvalidArgument, op, ": dim ", dim, " out of range for a tensor of rank ", rank);
  return prim::set_scalar(op, ret, EValue(self.sizes()[static_cast<size_t>(d)]));
}

template <class Dtypes>
Status sym_numel(KernelContext&, const Tensor& self, EValue& ret) {
  return prim::set_scalar("sym_numel", ret, EValue(self.numel()));
}

/// tensor.item(): the single element as an Int, Double or Bool.
template <class Dtypes>
Status local_scalar_dense(KernelContext&, const Tensor& self, EValue& ret) {
  constexpr std::string_view op = "_local_scalar_dense";
  if (self.numel() != 1)
    return fail(Error::InvalidArgument, op, ": a tensor with ", self.numel(), " elements has no single value");
  if (!self.device().is_cpu()) return fail(Error::NotSupported, op, ": the tensor lives on ", self.device().str());
  const ScalarType t = self.dtype();
  if (t == ScalarType::Bool) return prim::set_scalar(op, ret, EValue(self.data_as<uint8_t>()[0] != 0));
  if (is_floating(t)) {
    const LoadFn<double> load = loader_for<double>(t);
    if (!load) return fail(Error::NotSupported, op, ": dtype ", name(t));
    return prim::set_scalar(op, ret, EValue(load(self.data(), 0)));
  }
  const LoadFn<int64_t> load = loader_for<int64_t>(t);
  if (!load || is_complex(t)) return fail(Error::NotSupported, op, ": dtype ", name(t));
  return prim::set_scalar(op, ret, EValue(load(self.data(), 0)));
}

template <class Dtypes>
Status prim_add(KernelContext&, const Scalar& a, const Scalar& b, EValue& ret) {
  return prim::binary("executorch_prim::add.Scalar", a, b, ret,
                      [](int64_t x, int64_t y) -> Result<int64_t> { return wrapping_add(x, y); },
                      [](double x, double y) { return x + y; });
}
template <class Dtypes>
Status prim_sub(KernelContext&, const Scalar& a, const Scalar& b, EValue& ret) {
  return prim::binary("executorch_prim::sub.Scalar", a, b, ret,
                      [](int64_t x, int64_t y) -> Result<int64_t> { return wrapping_sub(x, y); },
                      [](double x, double y) { return x - y; });
}
template <class Dtypes>
Status prim_mul(KernelContext&, const Scalar& a, const Scalar& b, EValue& ret) {
  return prim::binary("executorch_prim::mul.Scalar", a, b, ret,
                      [](int64_t x, int64_t y) -> Result<int64_t> { return wrapping_mul(x, y); },
                      [](double x, double y) { return x * y; });
}
template <class Dtypes>
Status prim_floordiv(KernelContext&, const Scalar& a, const Scalar& b, EValue& ret) {
  constexpr std::string_view op = "executorch_prim::floordiv.Scalar";
  return prim::binary(op, a, b, ret,
                      [&](int64_t x, int64_t y) -> Result<int64_t> {
                        ETRT_TRY(int64_t d, prim::checked_divisor(op, y));
                        return prim::floor_div(x, d);
                      },
                      [](double x, double y) { return std::floor(x / y); });
}
template <class Dtypes>
Status prim_floordiv_int(KernelContext&, int64_t a, int64_t b, EValue& ret) {
  constexpr std::string_view op = "executorch_prim::floordiv.int";
  ETRT_TRY(int64_t d, prim::checked_divisor(op, b));
  return prim::set_scalar(op, ret, EValue(prim::floor_div(a, d)));
}
template <class Dtypes>
Status prim_truediv(KernelContext&, const Scalar& a, const Scalar& b, EValue& ret) {
  return prim::set_scalar("executorch_prim::truediv.Scalar", ret, EValue(a.to_double() / b.to_double()));
}
template <class Dtypes>
Status prim_mod(KernelContext&, const Scalar& a, const Scalar& b, EValue& ret) {
  constexpr std::string_view op = "executorch_prim::mod.Scalar";
  return prim::binary(op, a, b, ret,
                      [&](int64_t x, int64_t y) -> Result<int64_t> {
                        ETRT_TRY(int64_t d, prim::checked_divisor(op, y));
                        return prim::floor_mod(x, d);
                      },
                      [](double x, double y) {
                        const double r = std::fmod(x, y);
                        return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
                      });
}
template <class Dtypes>
Status prim_mod_int(KernelContext&, int64_t a, int64_t b, EValue& ret) {
  constexpr std::string_view op = "executorch_prim::mod.int";
  ETRT_TRY(int64_t d, prim::checked_divisor(op, b));
  return prim::set_scalar(op, ret, EValue(prim::floor_mod(a, d)));
}
template <class Dtypes>
Status prim_sym_max(KernelContext&, const Scalar& a, const Scalar& b, EValue& ret) {
  return prim::binary("executorch_prim::sym_max.Scalar", a, b, ret,
                      [](int64_t x, int64_t y) -> Result<int64_t> { return std::max(x, y); },
                      [](double x, double y) { return std::fmax(x, y); });
}
template <class Dtypes>
Status prim_sym_min(KernelContext&, const Scalar& a, const Scalar& b, EValue& ret) {
  return prim::binary("executorch_prim::sym_min.Scalar", a, b, ret,
                      [](int64_t x, int64_t y) -> Result<int64_t> { return std::min(x, y); },
                      [](double x, double y) { return std::fmin(x, y); });
}

#define ETRT_PRIM_COMPARE(NAME, EXPR)                                                                  \
  template <class Dtypes>                                                                               \
  Status prim_##NAME(KernelContext&, const Scalar& a, const Scalar& b, EValue& ret) {                   \
    return prim::compare("executorch_prim::" #NAME ".Scalar", a, b, ret, [](auto x, auto y) { return EXPR; }); \
  }
ETRT_PRIM_COMPARE(eq, x == y)
ETRT_PRIM_COMPARE(gt, x > y)
ETRT_PRIM_COMPARE(lt, x < y)
ETRT_PRIM_COMPARE(ge, x >= y)
ETRT_PRIM_COMPARE(le, x <= y)
#undef ETRT_PRIM_COMPARE

template <class Dtypes>
Status prim_neg(KernelContext&, const Scalar& a, EValue& ret) {
  constexpr std::string_view op = "executorch_prim::neg.Scalar";
  if (a.is_floating()) return prim::set_scalar(op, ret, EValue(-a.to_double()));
  return prim::set_scalar(op, ret, EValue(wrapping_sub<int64_t>(0, a.to_int())));
}
template <class Dtypes>
Status prim_sym_not(KernelContext&, const Scalar& a, EValue& ret) {
  return prim::set_scalar("executorch_prim::sym_not.Scalar", ret, EValue(a.to_double() == 0.0));
}
template <class Dtypes>
Status prim_sym_float(KernelContext&, const Scalar& a, EValue& ret) {
  return prim::set_scalar("executorch_prim::sym_float.Scalar", ret, EValue(a.to_double()));
}

/// ceil / round / trunc / sym_int of a Scalar: an integer stays as it is; a float becomes an int (Python's
/// math.ceil, round (half to even) and int()).
template <class F>
Status float_to_int(std::string_view op, const Scalar& a, EValue& ret, F f) {
  if (!a.is_floating()) return prim::set_scalar(op, ret, EValue(a.to_int()));
  ETRT_TRY(int64_t v, prim::to_int64(op, f(a.to_double())));
  return prim::set_scalar(op, ret, EValue(v));
}
template <class Dtypes>
Status prim_ceil(KernelContext&, const Scalar& a, EValue& ret) {
  return float_to_int("executorch_prim::ceil.Scalar", a, ret, [](double d) { return std::ceil(d); });
}
template <class Dtypes>
Status prim_round(KernelContext&, const Scalar& a, EValue& ret) {
  return float_to_int("executorch_prim::round.Scalar", a, ret, [](double d) { return std::nearbyint(d); });
}
template <class Dtypes>
Status prim_trunc(KernelContext&, const Scalar& a, EValue& ret) {
  return float_to_int("executorch_prim::trunc.Scalar", a, ret, [](double d) { return std::trunc(d); });
}
template <class Dtypes>
Status prim_sym_int(KernelContext&, const Scalar& a, EValue& ret) {
  return float_to_int("executorch_prim::sym_int.Scalar", a, ret, [](double d) { return std::trunc(d); });
}
/// sym_ite(cond, a, b): a if cond else b.
template <class Dtypes>
Status prim_sym_ite(KernelContext&, const Scalar& c, const Scalar& a, const Scalar& b, EValue& ret) {
  return prim::set_scalar("executorch_prim::sym_ite.Scalar", ret, prim::to_evalue(c.to_double() != 0.0 ? a : b));
}

/// et_view: `ret` becomes a view of `self` with sizes `size` (one -1 inferred): same storage, no copy.
template <class Dtypes>
Status et_view(KernelContext& ctx, const Tensor& self, std::span<const int64_t> size, EValue& ret) {
  constexpr std::string_view op = "executorch_prim::et_view.default";
  ETRT_TRY(Tensor * out, ret.to_tensor("out"));
  if (out->dtype() != self.dtype())
    return fail(Error::InvalidProgram, op, ": the view is ", name(out->dtype()), ", its source ", name(self.dtype()));
  if (!self.is_contiguous_order() || !out->is_contiguous_order())
    return fail(Error::NotSupported, op, ": views of non-contiguous tensors are not supported");
  std::array<int64_t, kMaxDims> sizes{};
  if (size.size() > static_cast<size_t>(kMaxDims)) return fail(Error::InvalidArgument, op, ": rank ", size.size());
  int64_t known = 1, infer = -1;
  for (size_t k = 0; k < size.size(); ++k) {
    sizes[k] = size[k];
    if (size[k] == -1) {
      if (infer >= 0) return fail(Error::InvalidArgument, op, ": more than one -1 in ", shape_str(size));
      infer = static_cast<int64_t>(k);
    } else if (size[k] < 0) {
      return fail(Error::InvalidArgument, op, ": negative size in ", shape_str(size));
    } else if (size[k] != 0 && known > INT64_MAX / size[k]) {
      return fail(Error::InvalidArgument, op, ": sizes ", shape_str(size), " overflow");
    } else {
      known *= size[k];
    }
  }
  if (infer >= 0) {
    if (known == 0 || self.numel() % known != 0)
      return fail(Error::InvalidArgument, op, ": cannot view ", self.describe(), " as ", shape_str(size));
    sizes[static_cast<size_t>(infer)] = self.numel() / known;
  } else if (known != self.numel()) {
    return fail(Error::InvalidArgument, op, ": cannot view ", self.describe(), " as ", shape_str(size));
  }
  ETRT_CHECK_OK(ctx.resize(op, *out, std::span<const int64_t>(sizes.data(), size.size())));
  out->set_data(const_cast<void*>(self.data()));
  return {};
}

/// et_copy_index(copy_to, copy_from, index): the emitter's store at the end of each torch.map / scan iteration:
/// copy_to[index] = copy_from. copy_to grows with the loop ("cat" sizes): a dynamic copy_to is resized to
/// [index + 1, *copy_from.sizes] (so a rerun with fewer iterations ends with fewer rows, as upstream's); a static one
/// must already hold row `index`. Rows after the first must match copy_to's trailing sizes. No return slot.
template <class Dtypes>
Status et_copy_index(KernelContext& ctx, Tensor& copy_to, const Tensor& copy_from, int64_t index) {
  constexpr std::string_view op = "executorch_prim::et_copy_index.tensor";
  if (copy_to.dim() != copy_from.dim() + 1)
    return fail(Error::InvalidArgument, op, ": copy_to ", copy_to.describe(), " must have one more dim than copy_from ",
                copy_from.describe());
  if (copy_to.dtype() != copy_from.dtype())
    return fail(Error::InvalidArgument, op, ": copy_to ", copy_to.describe(), " and copy_from ", copy_from.describe(),
                " differ in dtype");
  if (index < 0) return fail(Error::InvalidArgument, op, ": negative index ", index);
  if (copy_to.dim_order()[0] != 0)
    return fail(Error::NotSupported, op, ": copy_to's rows (dim 0) must be outermost in memory");
  const bool same_rows = std::equal(copy_from.sizes().begin(), copy_from.sizes().end(), copy_to.sizes().begin() + 1);
  if (copy_to.dynamism() == ShapeDynamism::Static || index > 0) {
    if (!same_rows)
      return fail(Error::InvalidArgument, op, ": copy_from ", copy_from.describe(), " does not match the rows of copy_to ",
                  copy_to.describe());
  }
  if (copy_to.dynamism() == ShapeDynamism::Static) {
    if (index >= copy_to.size(0))
      return fail(Error::InvalidArgument, op, ": index ", index, " is out of range for copy_to ", copy_to.describe());
  } else {
    std::array<int64_t, kMaxDims> sizes{};
    sizes[0] = index + 1;
    std::copy(copy_from.sizes().begin(), copy_from.sizes().end(), sizes.begin() + 1);
    ETRT_CHECK_OK(ctx.resize(op, copy_to, std::span<const int64_t>(sizes.data(), static_cast<size_t>(copy_to.dim()))));
  }
  if (copy_from.numel() == 0) return {};
  const size_t es = element_size(copy_to.dtype());
  mv::View dst;
  dst.data = static_cast<char*>(copy_to.data()) + index * copy_to.stride(0) * static_cast<int64_t>(es);
  for (int d = 1; d < copy_to.dim(); ++d) dst.push(copy_to.size(d), copy_to.stride(d));
  mv::copy_views(es, dst, mv::view_of(copy_from));
  return {};
}

/// dim_order_ops::_empty_dim_order.out: `out` resized to `size`; its contents are unspecified (left as they are).
template <class Dtypes>
Status empty_dim_order_out(KernelContext& ctx, std::span<const int64_t> size,
                           std::optional<std::span<const int64_t>> dim_order, Tensor& out) {
  constexpr std::string_view op = "dim_order_ops::_empty_dim_order.out";
  if (dim_order) {
    if (dim_order->size() != out.dim_order().size() ||
        !std::equal(dim_order->begin(), dim_order->end(), out.dim_order().begin()))
      return fail(Error::InvalidArgument, op, ": dim_order ", shape_str(*dim_order), " differs from out's");
  }
  return ctx.resize(op, out, size);
}

}  // namespace etrt::kernels
