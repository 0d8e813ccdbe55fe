// Broadcasting shapes and a strided N-operand index walker.
#pragma once

#include <array>
#include <memory>
#include <utility>

#include "etrt/core/tensor.h"

namespace etrt::kernels {

/// A shape with inline storage.
struct Shape {
  std::array<int64_t, kMaxDims> sizes{};
  int rank = 0;
  std::span<const int64_t> span() const { return {sizes.data(), static_cast<size_t>(rank)}; }
};

inline Shape shape_of(std::span<const int64_t> s) {
  Shape r;
  r.rank = static_cast<int>(s.size());
  std::copy(s.begin(), s.end(), r.sizes.begin());
  return r;
}

/// numpy broadcasting of two shapes, or a failure naming both.
inline Result<Shape> broadcast_shapes(std::string_view op, std::span<const int64_t> a, std::span<const int64_t> b) {
  Shape r;
  r.rank = static_cast<int>(std::max(a.size(), b.size()));
  for (int i = 0; i < r.rank; ++i) {
    const int ia = static_cast<int>(a.size()) - r.rank + i, ib = static_cast<int>(b.size()) - r.rank + i;
    const int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      return fail(Error::InvalidArgument, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                  " cannot be broadcast together");
    r.sizes[i] = sa == 1 ? sb : sa;
  }
  return r;
}

/// Strides (elements) of `t` viewed with the broadcast shape `out` (0 along broadcast dimensions).
inline std::array<int64_t, kMaxDims> broadcast_strides(const Tensor& t, const Shape& out) {
  std::array<int64_t, kMaxDims> s{};
  const int off = out.rank - t.dim();
  for (int i = 0; i < t.dim(); ++i) s[off + i] = t.size(i) == 1 ? 0 : t.stride(i);
  return s;
}

/// True when the tensors can be walked with one flat index: same sizes and the same dim order.
template <class... Ts>
inline bool same_dense_layout(const Tensor& first, const Ts&... rest) {
  auto same = [&](const Tensor& t) {
    return t.dim() == first.dim() && std::ranges::equal(t.sizes(), first.sizes()) &&
           std::ranges::equal(t.dim_order(), first.dim_order());
  };
  return (same(rest) && ...);
}

namespace detail {
/// The walk behind for_each_row, compiled once per operand count: the callback is called through a pointer (once
/// per row), so each call site compiles only its own row body.
template <size_t N>
inline void walk_rows(const Shape& shape, const std::array<std::array<int64_t, kMaxDims>, N>& strides,
                      void (*row)(void*, const std::array<int64_t, N>&), void* ctx) {
  for (int d = 0; d < shape.rank; ++d)
    if (shape.sizes[d] == 0) return;
  std::array<int64_t, kMaxDims> idx{};
  std::array<int64_t, N> base{};
  while (true) {
    row(ctx, base);
    int d = shape.rank - 2;
    for (; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) base[k] += strides[k][d];
      if (idx[d] < shape.sizes[d]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= strides[k][d] * shape.sizes[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}
}  // namespace detail

/// Calls row(offsets) for every position of `shape` without its innermost dimension, in row-major order, where
/// offsets[k] is the element offset of operand k at the start of that row (the caller walks the row itself).
/// Nothing is called when a dimension has size 0; a rank-0 shape is one row.
template <size_t N, class F>
inline void for_each_row(const Shape& shape, const std::array<std::array<int64_t, kMaxDims>, N>& strides, F&& row) {
  using Fn = std::remove_reference_t<F>;
  detail::walk_rows<N>(
      shape, strides, [](void* f, const std::array<int64_t, N>& off) { (*static_cast<Fn*>(f))(off); },
      const_cast<void*>(static_cast<const void*>(std::addressof(row))));
}

/// Calls f(offsets) for every element of `shape` in row-major order, where offsets[k] is the element offset of
/// operand k under its strides. The innermost dimension runs as a tight loop.
template <size_t N, class F>
inline void for_each_offset(const Shape& shape, const std::array<std::array<int64_t, kMaxDims>, N>& strides, F&& f) {
  if (shape.rank == 0) {
    f(std::array<int64_t, N>{});
    return;
  }
  const int last = shape.rank - 1;
  const int64_t inner = shape.sizes[last];
  for_each_row<N>(shape, strides, [&](const std::array<int64_t, N>& start) {
    std::array<int64_t, N> off = start;
    for (int64_t i = 0; i < inner; ++i) {
      f(std::as_const(off));
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][last];
    }
  });
}

}  // namespace etrt::kernels
