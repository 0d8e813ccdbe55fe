// The elementwise engine: N inputs, one output, a compute type, broadcasting.
//
// Note [elementwise fast path]: when every operand already has the compute type's storage and all share one shape
// and dim order, the loop is a flat, vectorizable loop over raw pointers. Otherwise each operand is read through a
// loader chosen once per call (no per-element dtype switch) and walked with broadcast strides.
#pragma once


#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/broadcast.h"
#include "etrt/kernels/util/dtype_util.h"

namespace etrt::kernels {

/// Broadcast shape of all inputs.
template <class... Ts>
inline Result<Shape> broadcast_all(std::string_view op, const Ts&... ins) {
  Shape s;
  bool first = true;
  Failure err;
  bool ok = true;
  auto step = [&](const Tensor& t) {
    if (!ok) return;
    if (first) {
      s = shape_of(t.sizes());
      first = false;
      return;
    }
    auto r = broadcast_shapes(op, s.span(), t.sizes());
    if (!r) {
      ok = false;
      err = std::move(r).error();
      return;
    }
    s = *r;
  };
  (step(ins), ...);
  if (!ok) return err;
  return s;
}

/// out[i] = f(in0[i], in1[i], ...) with inputs read as C and the result (type R) stored into out's dtype.
/// `out` must already have the broadcast shape.
template <class C, class R, class F, class... Ins>
inline Status map_elementwise(std::string_view op, Tensor& out, F&& f, const Ins&... ins) {
  constexpr size_t N = sizeof...(Ins);
  const bool fast = ((ins.dtype() == dtype_of<C>) && ...) && out.dtype() == dtype_of<R> && same_dense_layout(out, ins...);
  const int64_t n = out.numel();
  if (fast) {  // Note [elementwise fast path]
    R* o = out.data_as<R>();
    const std::array<const C*, N> ptrs{static_cast<const C*>(ins.data())...};
    [&]<size_t... K>(std::index_sequence<K...>) {
      // Hoisting the pointers into locals lets the compiler prove there is no aliasing with `o` per iteration.
      const std::array<const C*, N> p = ptrs;
      for (int64_t i = 0; i < n; ++i) o[i] = f(p[K][i]...);
    }(std::make_index_sequence<N>{});
    return {};
  }
  const std::array<LoadFn<C>, N> loads{loader_for<C>(ins.dtype())...};
  const StoreFn<R> store = storer_for<R>(out.dtype());
  for (auto* l : loads)
    if (!l) return fail(Error::InvalidArgument, op, ": unsupported input dtype");
  if (!store) return fail(Error::InvalidArgument, op, ": unsupported output dtype ", name(out.dtype()));
  const Shape shape = shape_of(out.sizes());
  std::array<std::array<int64_t, kMaxDims>, N + 1> strides{};
  {
    std::array<int64_t, kMaxDims> os{};
    std::copy(out.strides().begin(), out.strides().end(), os.begin());
    strides[0] = os;
    size_t k = 1;
    ((strides[k++] = broadcast_strides(ins, shape)), ...);
  }
  const std::array<const void*, N> bases{ins.data()...};
  void* obase = out.data();
  for_each_offset<N + 1>(shape, strides, [&](const std::array<int64_t, N + 1>& off) {
    [&]<size_t... K>(std::index_sequence<K...>) {
      store(obase, off[0], f(loads[K](bases[K], off[K + 1])...));
    }(std::make_index_sequence<N>{});
  });
  return {};
}

/// A binary arithmetic op computing in the output dtype (torch computes in result_type and the exporter sets the
/// out dtype to it; Half/BFloat16 compute in float). `Dtypes` is the list gen/ allows for this op.
template <class Dtypes, class F>
inline Status binary_arith(std::string_view op, KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out,
                           F&& f) {
  ETRT_TRY(Shape shape, broadcast_all(op, a, b));
  ETRT_CHECK_OK(ctx.resize(op, out, shape.span()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    return map_elementwise<C, C>(op, out, [&](C x, C y) { return static_cast<C>(f(x, y)); }, a, b);
  });
}

/// A unary op computing in the output dtype.
template <class Dtypes, class F>
inline Status unary_map(std::string_view op, KernelContext& ctx, const Tensor& a, Tensor& out, F&& f) {
  ETRT_CHECK_OK(ctx.resize(op, out, a.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    return map_elementwise<C, C>(op, out, [&](C x) { return static_cast<C>(f(x)); }, a);
  });
}

/// A comparison: inputs compared in their promoted type, result stored into out's dtype (usually Bool).
template <class Dtypes, class F>
inline Status binary_compare(std::string_view op, KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out,
                             F&& f) {
  ETRT_TRY(Shape shape, broadcast_all(op, a, b));
  ETRT_CHECK_OK(ctx.resize(op, out, shape.span()));
  return visit(result_type(a, b), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    return map_elementwise<C, bool>(op, out, [&](C x, C y) { return static_cast<bool>(f(x, y)); }, a, b);
  });
}

}  // namespace etrt::kernels
