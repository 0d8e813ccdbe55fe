// The elementwise engine: N inputs, one output, a compute type per input, broadcasting (Note [elementwise fast
// path]).
#pragma once

#include <algorithm>
#include <tuple>

#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/broadcast.h"
#include "etrt/kernels/util/dtype_util.h"
#include "etrt/kernels/util/isa.h"

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

namespace detail {

/// What a compute type is read from in memory: a bool operand is read as bytes (load_bool says why).
template <class C>
using stored_t = std::conditional_t<std::is_same_v<C, bool>, uint8_t, C>;
template <class C>
inline C read_stored(const stored_t<C>* p, int64_t i) {
  if constexpr (std::is_same_v<C, bool>)
    return p[i] != 0;
  else
    return p[i];
}

/// n elements of a row (element offset `off`, stride `s`) converted to C into a contiguous buffer, and back.
template <class C>
using GatherFn = void (*)(const void* base, int64_t off, int64_t s, int64_t n, stored_t<C>* dst);
template <class R>
using ScatterFn = void (*)(void* base, int64_t off, int64_t s, int64_t n, const R* src);

template <class C, class T>
inline void gather_as(const void* base, int64_t off, int64_t s, int64_t n, stored_t<C>* dst) {
  for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<stored_t<C>>(load_as<C, T>(base, off + j * s));
}
template <class R, class T>
inline void scatter_as(void* base, int64_t off, int64_t s, int64_t n, const R* src) {
  for (int64_t j = 0; j < n; ++j) store_as<R, T>(base, off + j * s, src[j]);
}
template <class C>
[[gnu::noinline]] inline GatherFn<C> gather_for(ScalarType st) {
  return pick_for_dtype<GatherFn<C>>(st, []<class T>() { return &gather_as<C, T>; });
}
template <class R>
[[gnu::noinline]] inline ScatterFn<R> scatter_for(ScalarType st) {
  return pick_for_dtype<ScatterFn<R>>(st, []<class T>() { return &scatter_as<R, T>; });
}

// Note [converters compiled once]: gather_for / scatter_for reach 15 x 15 conversion loops per compute type. In a
// split build (ETRT_GENERATED_KERNELS_SPLIT: the kernel families each in their own translation unit) they are
// compiled once, in the one that defines ETRT_INSTANTIATE_CONVERTERS (gen/generate.py --converters-tu), and only
// declared everywhere else; a header-only build instantiates them where they are used.
#define ETRT_CONVERTER_TYPES(X)                                                                                   \
  X(uint8_t) X(int8_t) X(int16_t) X(int32_t) X(int64_t) X(float) X(double) X(Half) X(BFloat16) X(bool) X(uint16_t) \
  X(uint32_t) X(uint64_t) X(std::complex<float>) X(std::complex<double>)
#if defined(ETRT_INSTANTIATE_CONVERTERS)
#define ETRT_CONVERTERS_FOR(T) \
  template GatherFn<T> gather_for<T>(ScalarType); \
  template ScatterFn<T> scatter_for<T>(ScalarType);
ETRT_CONVERTER_TYPES(ETRT_CONVERTERS_FOR)
#undef ETRT_CONVERTERS_FOR
#elif defined(ETRT_GENERATED_KERNELS_SPLIT) && ETRT_GENERATED_KERNELS_SPLIT
#define ETRT_CONVERTERS_FOR(T) \
  extern template GatherFn<T> gather_for<T>(ScalarType); \
  extern template ScatterFn<T> scatter_for<T>(ScalarType);
ETRT_CONVERTER_TYPES(ETRT_CONVERTERS_FOR)
#undef ETRT_CONVERTERS_FOR
#endif
#undef ETRT_CONVERTER_TYPES

/// The one part of an elementwise op that depends on the op: n results from n contiguous values per operand.
template <class R, class... Cs>
struct RowKernel {
  const void* fn;
  void (*call)(const void* fn, int64_t n, R* out, const stored_t<Cs>*... in);
};

/// Dimensions of `shape` merged where every operand's strides allow it, so that rows are as long as possible.
template <size_t M>
inline int coalesce(Shape& shape, std::array<std::array<int64_t, kMaxDims>, M>& strides) {
  int r = 0;
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.sizes[d] == 1 && shape.rank > 1) continue;  // contributes nothing to any offset
    bool merge = r > 0;
    for (size_t k = 0; k < M && merge; ++k)
      merge = strides[k][r - 1] == strides[k][d] * shape.sizes[d];
    if (merge) {
      shape.sizes[r - 1] *= shape.sizes[d];
      for (size_t k = 0; k < M; ++k) strides[k][r - 1] = strides[k][d];
    } else {
      shape.sizes[r] = shape.sizes[d];
      for (size_t k = 0; k < M; ++k) strides[k][r] = strides[k][d];
      ++r;
    }
  }
  if (r == 0) {  // every dimension had size 1 (or the shape is rank 0): one element
    shape.sizes[0] = 1;
    for (size_t k = 0; k < M; ++k) strides[k][0] = 0;
    r = 1;
  }
  shape.rank = r;
  return r;
}

/// The general path of the engine (Note [elementwise fast path]): the output is walked row by row along its
/// innermost (coalesced) dimension, a block at a time; an operand that is not contiguous in the compute type is
/// converted into a buffer first, and a result that is not is converted out of one. It depends on the operand and
/// result types only, so each op compiles its own code just once: the contiguous loop of `RowKernel`.
template <class R, class... Cs>
inline Status map_rows(std::string_view op, Tensor& out, const std::array<const Tensor*, sizeof...(Cs)>& ins,
                       RowKernel<R, Cs...> kernel) {
  constexpr size_t N = sizeof...(Cs);
  constexpr int64_t kBlock = 256;
  return [&]<size_t... K>(std::index_sequence<K...>) -> Status {
    const std::tuple<GatherFn<Cs>...> gathers{gather_for<Cs>(ins[K]->dtype())...};
    if (((std::get<K>(gathers) == nullptr) || ...)) return fail(Error::InvalidArgument, op, ": unsupported input dtype");
    const ScatterFn<R> scatter = scatter_for<R>(out.dtype());
    if (!scatter) return fail(Error::InvalidArgument, op, ": unsupported output dtype ", name(out.dtype()));
    Shape shape = shape_of(out.sizes());
    std::array<std::array<int64_t, kMaxDims>, N + 1> strides{};
    std::copy(out.strides().begin(), out.strides().end(), strides[0].begin());
    ((strides[K + 1] = broadcast_strides(*ins[K], shape)), ...);
    const int last = coalesce(shape, strides) - 1;
    const int64_t inner = shape.sizes[last];
    const std::array<bool, N> direct{(ins[K]->dtype() == dtype_of<Cs> && strides[K + 1][last] == 1)...};
    const bool out_direct = out.dtype() == dtype_of<R> && strides[0][last] == 1;
    const std::array<const void*, N> bases{ins[K]->data()...};
    void* const obase = out.data();
    std::tuple<std::array<stored_t<Cs>, kBlock>...> bufs;
    std::array<R, kBlock> obuf;
    for_each_row<N + 1>(shape, strides, [&](const std::array<int64_t, N + 1>& row) {
      for (int64_t j = 0; j < inner; j += kBlock) {
        const int64_t n = std::min(kBlock, inner - j);
        const std::tuple<const stored_t<Cs>*...> p{
            (direct[K] ? static_cast<const stored_t<Cs>*>(bases[K]) + row[K + 1] + j
                       : (std::get<K>(gathers)(bases[K], row[K + 1] + j * strides[K + 1][last],
                                               strides[K + 1][last], n, std::get<K>(bufs).data()),
                          std::get<K>(bufs).data()))...};
        R* o = out_direct ? static_cast<R*>(obase) + row[0] + j : obuf.data();
        kernel.call(kernel.fn, n, o, std::get<K>(p)...);
        if (!out_direct) scatter(obase, row[0] + j * strides[0][last], strides[0][last], n, obuf.data());
      }
    });
    return Status{};
  }(std::make_index_sequence<N>{});
}

}  // namespace detail

/// The elementwise engine: out[i] = f(in0[i] as C0, in1[i] as C1, ...) stored into out's dtype (f returns R), with
/// broadcasting; `out` must already have the broadcast shape.
///
/// Note [elementwise fast path]: when every operand already holds its compute type and all share one shape and dim
/// order, the op is one flat loop over raw pointers. Otherwise `detail::map_rows` walks rows and feeds the same loop
/// from conversion buffers, so an op's own code is that one loop whichever path runs.
template <class R, class... Cs, class F, class... Ins>
inline Status map_mixed(std::string_view op, Tensor& out, types<Cs...>, F&& f, const Ins&... ins) {
  static_assert(sizeof...(Cs) == sizeof...(Ins) && sizeof...(Ins) > 0);
  if (out.numel() == 0) return {};
  using detail::stored_t;
  auto rows = [](const void* fp, int64_t n, R* o, const stored_t<Cs>*... p) {
    const auto& fn = *static_cast<const std::remove_reference_t<F>*>(fp);
    isa::dispatch_avx2([&]() ETRT_ISA_INLINE {
      for (int64_t i = 0; i < n; ++i) o[i] = convert<R>(fn(detail::read_stored<Cs>(p, i)...));
    });
  };
  if (((ins.dtype() == dtype_of<Cs>) && ...) && out.dtype() == dtype_of<R> && same_dense_layout(out, ins...)) {
    rows(&f, out.numel(), out.data_as<R>(), static_cast<const stored_t<Cs>*>(ins.data())...);
    return {};
  }
  if constexpr (sizeof...(Cs) == 2) {
    // One operand of a single element (a Scalar op's scalar, a 0-d tensor) against a dense one: the element is read
    // once and the loop runs flat, where map_rows gathered it into a buffer every 256 elements (a ViT's score
    // scaling ran 0.4 ns an element).
    using C0 = std::tuple_element_t<0, std::tuple<Cs...>>;
    using C1 = std::tuple_element_t<1, std::tuple<Cs...>>;
    const std::array<const Tensor*, 2> t{&ins...};
    const bool types_held = t[0]->dtype() == dtype_of<C0> && t[1]->dtype() == dtype_of<C1> && out.dtype() == dtype_of<R>;
    for (int one = 0; types_held && one < 2; ++one) {
      const Tensor &single = *t[one], &dense = *t[1 - one];
      if (single.numel() != 1 || dense.numel() != out.numel() || !same_dense_layout(out, dense)) continue;
      R* o = out.data_as<R>();
      const int64_t n = out.numel();
      if (one == 1) {
        const auto* x = static_cast<const stored_t<C0>*>(dense.data());
        const C1 v = detail::read_stored<C1>(static_cast<const stored_t<C1>*>(single.data()), 0);
        isa::dispatch_avx2([&]() ETRT_ISA_INLINE {
          for (int64_t i = 0; i < n; ++i) o[i] = convert<R>(f(detail::read_stored<C0>(x, i), v));
        });
      } else {
        const auto* x = static_cast<const stored_t<C1>*>(dense.data());
        const C0 v = detail::read_stored<C0>(static_cast<const stored_t<C0>*>(single.data()), 0);
        isa::dispatch_avx2([&]() ETRT_ISA_INLINE {
          for (int64_t i = 0; i < n; ++i) o[i] = convert<R>(f(v, detail::read_stored<C1>(x, i)));
        });
      }
      return {};
    }
  }
  return detail::map_rows<R, Cs...>(op, out, {&ins...}, detail::RowKernel<R, Cs...>{&f, rows});
}

/// Every input read as C, the result of type R.
template <class C, class R, class F, class... Ins>
inline Status map_elementwise(std::string_view op, Tensor& out, F&& f, const Ins&... ins) {
  return map_mixed<R>(op, out, types<std::conditional_t<true, C, Ins>...>{}, std::forward<F>(f), ins...);
}

namespace detail {
/// map_elementwise with f's result cast to R. Written outside the callers' per-dtype lambdas on purpose: dtypes that
/// compute in the same type (Half, BFloat16 and float all compute in float) then share one instantiation.
template <class C, class R, class F, class... Ins>
inline Status map_cast(std::string_view op, Tensor& out, const F& f, const Ins&... ins) {
  return map_elementwise<C, R>(op, out, [&f](std::conditional_t<true, C, Ins>... x) { return static_cast<R>(f(x...)); },
                               ins...);
}
}  // namespace detail

/// A binary arithmetic op computing in the output dtype (torch computes in result_type and the exporter sets the
/// out dtype to it; Half/BFloat16 compute in float). `Dtypes` is the list gen/ allows for this op.
template <class Dtypes, class F>
inline Status binary_arith(std::string_view op, KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out,
                           F&& f) {
  ETRT_TRY(Shape shape, broadcast_all(op, a, b));
  ETRT_CHECK_OK(ctx.resize(op, out, shape.span()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    return detail::map_cast<C, C>(op, out, f, a, b);
  });
}

/// A unary op computing in the output dtype.
template <class Dtypes, class F>
inline Status unary_map(std::string_view op, KernelContext& ctx, const Tensor& a, Tensor& out, F&& f) {
  ETRT_CHECK_OK(ctx.resize(op, out, a.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    return detail::map_cast<C, C>(op, out, f, a);
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
    return detail::map_cast<C, bool>(op, out, f, a, b);
  });
}

}  // namespace etrt::kernels
