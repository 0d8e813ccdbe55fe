// Selection kernels: topk (the k largest or smallest entries along one dim, with their positions).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace sort_detail {
template <class C>
inline bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}

/// The order topk ranks entries in: NaN counts as larger than every number (NumPy's rule, which torch follows), so
/// it leads a largest-first result and trails a smallest-first one. Equal values compare equal: their relative
/// order comes from the selection algorithm, see select_k.
template <class C, bool Largest>
struct RankedBefore {
  bool operator()(const std::pair<C, int64_t>& a, const std::pair<C, int64_t>& b) const {
    if constexpr (Largest) return (is_nan(a.first) && !is_nan(b.first)) || a.first > b.first;
    else return (!is_nan(a.first) && is_nan(b.first)) || a.first < b.first;
  }
};

/// Moves the k best entries of `q` (in line order on entry) to its front. Which of several equal values are kept,
/// the order they come out in, and the order of an unsorted result are all artefacts of the algorithm, and models
/// compare them with torch's. torch's CPU kernel picks a heap-based partial sort when k is at most 1/64 of the line
/// and otherwise a selection of the k-th entry followed by a sort of the entries before it; running the same
/// standard algorithms in the same way reproduces its results, ties included.
template <class C, bool Largest>
inline void select_k(std::vector<std::pair<C, int64_t>>& q, int64_t k, bool sorted) {
  const RankedBefore<C, Largest> before;
  const auto first = q.begin();
  const int64_t n = static_cast<int64_t>(q.size());
  if (k <= n / 64) {
    std::partial_sort(first, first + k, q.end(), before);
  } else {
    std::nth_element(first, first + (k - 1), q.end(), before);
    if (sorted) std::sort(first, first + (k - 1), before);
  }
}
}  // namespace sort_detail

/// topk.values(self, k, dim, largest, sorted, *, values, indices).
template <class Dtypes>
Status topk_values(KernelContext& ctx, const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                   Tensor& values, Tensor& indices) {
  constexpr std::string_view op = "topk.values";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, values));
  if (indices.dtype() != ScalarType::Long)
    return fail(Error::InvalidArgument, op, ": indices must be Long, got ", name(indices.dtype()));
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  const int64_t n = self.dim() ? self.size(d) : 1;
  if (k < 0 || k > n)
    return fail(Error::InvalidArgument, op, ": k = ", k, " is out of range for dim ", d, " of size ", n,
                " (input ", self.describe(), ")");
  Shape s = shape_of(self.sizes());
  if (self.dim()) s.sizes[d] = k;
  ETRT_CHECK_OK(ctx.resize(op, values, s.span()));
  ETRT_CHECK_OK(ctx.resize(op, indices, s.span()));
  return visit(self.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if (self.dim() == 0) {  // torch returns the element itself whatever k (0 or 1) is
      values.data_as<T>()[0] = self.data_as<T>()[0];
      indices.data_as<int64_t>()[0] = 0;
      return {};
    }
    if (values.numel() == 0) return {};
    using C = compute_t<T>;
    // Every line along d: walk the other dims (d's size set to 1) with the three tensors' own strides.
    Shape lines = shape_of(self.sizes());
    lines.sizes[d] = 1;
    const std::array<std::array<int64_t, kMaxDims>, 3> st{
        broadcast_strides(self, lines), broadcast_strides(values, lines), broadcast_strides(indices, lines)};
    const int64_t ss = self.stride(d), vs = values.stride(d), is = indices.stride(d);
    const T* in = self.data_as<const T>();
    T* vo = values.data_as<T>();
    int64_t* io = indices.data_as<int64_t>();
    std::vector<std::pair<C, int64_t>> q(static_cast<size_t>(n));
    for_each_offset<3>(lines, st, [&](const std::array<int64_t, 3>& off) {
      const T* line = in + off[0];
      for (int64_t j = 0; j < n; ++j) q[static_cast<size_t>(j)] = {static_cast<C>(line[j * ss]), j};
      if (largest) sort_detail::select_k<C, true>(q, k, sorted);
      else sort_detail::select_k<C, false>(q, k, sorted);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = q[static_cast<size_t>(j)].second;
        vo[off[1] + j * vs] = line[at * ss];  // the stored element, not its compute-type copy
        io[off[2] + j * is] = at;
      }
    });
    return {};
  });
}

}  // namespace etrt::kernels
