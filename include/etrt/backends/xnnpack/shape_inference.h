// Per-call shapes of an XNNPACK graph. A payload's dims are upper bounds when the program has dynamic shapes (an
// export_llm prefill takes 1..N tokens): each call starts from the shapes of the external inputs it is given and
// derives every node's output shape, as XNNPACK's reshape step does. Storage was planned for the upper bounds, so a
// derived shape larger than its value's planned element count is refused, never written.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

#include "etrt/backends/xnnpack/graph.h"
#include "etrt/core/tensor.h"  // shape_str

namespace etrt::xnnpack {

struct ValueShape {
  std::array<int64_t, kMaxXnnDims> d{};
  uint32_t rank = 0;

  std::span<const int64_t> sizes() const { return {d.data(), rank}; }
  int64_t numel() const {
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; ++i) n *= d[i];
    return n;
  }
  static ValueShape of(std::span<const int64_t> s) {
    ValueShape v;
    v.rank = static_cast<uint32_t>(std::min<size_t>(s.size(), kMaxXnnDims));
    std::copy_n(s.begin(), v.rank, v.d.begin());
    return v;
  }
  bool operator==(const ValueShape& o) const { return std::ranges::equal(sizes(), o.sizes()); }
};

namespace detail {

inline Failure shape_error(const Node& n, std::string_view what) {
  return fail(Error::NotSupported, n.where(), ": ", what);
}

/// Numpy broadcasting of two shapes, right-aligned.
inline Result<ValueShape> broadcast_shapes(const Node& n, const ValueShape& a, const ValueShape& b) {
  ValueShape o;
  o.rank = std::max(a.rank, b.rank);
  for (uint32_t i = 0; i < o.rank; ++i) {
    const int64_t x = i < o.rank - a.rank ? 1 : a.d[i - (o.rank - a.rank)];
    const int64_t y = i < o.rank - b.rank ? 1 : b.d[i - (o.rank - b.rank)];
    if (x != y && x != 1 && y != 1)
      return fail(Error::InvalidArgument, n.where(), ": shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
                  " do not broadcast");
    o.d[i] = x == 1 ? y : x;
  }
  return o;
}

}  // namespace detail

/// A node kind's output shape this call, from its inputs' shapes this call (`shapes`, by value id).
using ShapeFn = Result<ValueShape> (*)(const Graph&, const Node&, std::span<const ValueShape>);

namespace shape {

/// Elementwise on one input (and PReLU, whose slope broadcasts onto it).
inline Result<ValueShape> same(const Graph&, const Node& n, std::span<const ValueShape> s) { return s[n.inputs[0]]; }

inline Result<ValueShape> broadcast(const Graph&, const Node& n, std::span<const ValueShape> s) {
  return detail::broadcast_shapes(n, s[n.inputs[0]], s[n.inputs[1]]);
}

inline Result<ValueShape> fully_connected(const Graph& g, const Node& n, std::span<const ValueShape> s) {
  const ValueShape& in = s[n.inputs[0]];
  const ValueShape planned = ValueShape::of(g.values[n.output].dims);
  const auto& w = g.values[n.inputs[1]].dims;
  if (w.size() != 2 || in.rank == 0) return detail::shape_error(n, "filter must be 2-D and the input non-scalar");
  const int64_t k = (n.flags & kFlagTransposeWeights) ? w[0] : w[1];
  const int64_t out_channels = (n.flags & kFlagTransposeWeights) ? w[1] : w[0];
  if (in.d[in.rank - 1] != k)
    return fail(Error::InvalidArgument, n.where(), ": input ", shape_str(in.sizes()), " has ", in.d[in.rank - 1],
                " features, the filter takes ", k);
  ValueShape o = in;
  if (planned.rank == 2 && in.rank != 2) {  // flattened to 2-D
    o.rank = 2;
    o.d[0] = in.numel() / k;
  }
  o.d[o.rank - 1] = out_channels;
  return o;
}

/// The first input's shape with its last dim taken from input K: batch matmul ([*, M, K] x [*, K, N] -> [*, M, N],
/// K = 1) and attention ([*, H, T, C] queries, values [*, H, S, D] -> [*, H, T, D], K = 2; ranks: checks::sdpa).
template <size_t K>
inline Result<ValueShape> last_dim_from(const Graph&, const Node& n, std::span<const ValueShape> s) {
  const ValueShape& src = s[n.inputs[K]];
  ValueShape o = s[n.inputs[0]];
  o.d[o.rank - 1] = src.d[src.rank - 1];
  return o;
}

inline Result<ValueShape> transpose(const Graph&, const Node& n, std::span<const ValueShape> s) {
  const ValueShape& in = s[n.inputs[0]];
  ValueShape o;
  o.rank = in.rank;
  for (uint32_t i = 0; i < in.rank; ++i) o.d[i] = in.d[n.ints[i]];  // a permutation of in.rank: checks::transpose
  return o;
}

inline Result<ValueShape> reshape(const Graph& g, const Node& n, std::span<const ValueShape> s) {
  const ValueShape& in = s[n.inputs[0]];
  if (in == ValueShape::of(g.values[n.inputs[0]].dims)) return ValueShape::of(g.values[n.output].dims);
  // A new shape with one 0 takes what the others leave (the exporter's mark of a dynamic dim).
  ValueShape o = ValueShape::of(n.ints);
  int64_t known = 1, unknown = -1;
  for (uint32_t i = 0; i < o.rank; ++i) {
    if (o.d[i] == 0 && unknown < 0) unknown = i;
    else known *= o.d[i];
  }
  if (unknown >= 0 && known > 0 && in.numel() % known == 0) o.d[unknown] = in.numel() / known;
  if (o.numel() != in.numel())
    return detail::shape_error(n, cat("cannot reshape ", shape_str(in.sizes()), " to ", shape_str(n.ints)));
  return o;
}

inline Result<ValueShape> concatenate(const Graph&, const Node& n, std::span<const ValueShape> s) {
  ValueShape o = s[n.inputs[0]];
  if (n.axis >= o.rank) return detail::shape_error(n, "axis out of range");
  for (size_t i = 1; i < n.inputs.size(); ++i) o.d[n.axis] += s[n.inputs[i]].d[n.axis];
  return o;
}

inline Result<ValueShape> slice(const Graph&, const Node& n, std::span<const ValueShape> s) {
  const ValueShape& in = s[n.inputs[0]];
  ValueShape o = in;
  for (uint32_t d = 0; d < in.rank; ++d) {
    const int64_t off = n.ints[d], size = n.ints[in.rank + d];
    if (off > in.d[d] || (size != 0 && size > in.d[d] - off))
      return fail(Error::InvalidArgument, n.where(), ": slice [", off, ", +", size, ") outside dim ", d,
                  " of size ", in.d[d]);
    o.d[d] = size == 0 ? in.d[d] - off : size;
  }
  return o;
}

inline Result<ValueShape> constant_pad(const Graph&, const Node& n, std::span<const ValueShape> s) {
  const ValueShape& in = s[n.inputs[0]];
  ValueShape o = in;
  for (uint32_t d = 0; d < in.rank; ++d) o.d[d] += n.ints[d] + n.ints[in.rank + d];
  return o;
}


inline Result<ValueShape> global_pooling(const Graph& g, const Node& n, std::span<const ValueShape> s) {
  ValueShape o = ValueShape::of(g.values[n.output].dims);
  o.d[0] = s[n.inputs[0]].d[0];
  return o;
}

/// Convolutions, pooling, resize: the batch may change, the rest is as planned.
inline Result<ValueShape> spatial(const Graph& g, const Node& n, std::span<const ValueShape> s) {
  const ValueShape& in = s[n.inputs[0]];
  const ValueShape planned_in = ValueShape::of(g.values[n.inputs[0]].dims);
  if (in.rank != planned_in.rank || !std::equal(in.d.begin() + 1, in.d.begin() + in.rank, planned_in.d.begin() + 1))
    return detail::shape_error(n, cat("input ", shape_str(in.sizes()), " differs from the planned ",
                                      shape_str(planned_in.sizes()), " beyond the batch dimension"));
  ValueShape o = ValueShape::of(g.values[n.output].dims);
  o.d[0] = in.d[0];
  return o;
}

}  // namespace shape

}  // namespace etrt::xnnpack
