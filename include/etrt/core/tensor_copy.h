// Copies between two layouts of the same logical shape, element by element in logical order.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "etrt/core/tensor.h"

namespace etrt {

/// True when `strides_elems` are exactly what `dim_order` gives for `sizes` (dims of size 1 may have any stride).
inline bool strides_match_dim_order(std::span<const int64_t> sizes, std::span<const int64_t> strides_elems,
                                    std::span<const uint8_t> dim_order) {
  std::array<int64_t, kMaxDims> expected{};
  strides_from_dim_order(sizes, dim_order, std::span<int64_t>(expected.data(), sizes.size()));
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1 && strides_elems[d] != expected[d]) return false;
  return true;
}

/// True when the strides (in elements) describe a dense block (some permutation of a contiguous layout, no gaps or overlaps).
inline bool is_dense(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  if (sizes.size() > static_cast<size_t>(kMaxDims) || strides.size() < sizes.size()) return false;  // no tensor
  // (stride, size) of the dims that matter, inline: the per-call input and output paths check every tensor.
  std::array<std::pair<int64_t, int64_t>, kMaxDims> dims;
  size_t n = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return true;
    if (sizes[i] != 1) dims[n++] = {strides[i], sizes[i]};
  }
  std::sort(dims.begin(), dims.begin() + n, [](auto a, auto b) { return a.first > b.first; });
  int64_t expect = 1;
  for (size_t k = n; k-- > 0;) {
    if (dims[k].first != expect) return false;
    if (__builtin_mul_overflow(expect, dims[k].second, &expect)) return false;  // larger than any tensor
  }
  return true;
}

/// Steps the row-major index `idx` over dims [0, rank) of `sizes`, carrying the offsets `a` and `b` of two strided
/// layouts; false once it has wrapped past the last position. The strided copies call it once per innermost row.
inline bool advance_offsets(int rank, const int64_t* sizes, int64_t* idx, const int64_t* a_strides, int64_t& a,
                            const int64_t* b_strides, int64_t& b) {
  for (int k = rank - 1; k >= 0; --k) {
    ++idx[k];
    a += a_strides[k];
    b += b_strides[k];
    if (idx[k] < sizes[k]) return true;
    a -= a_strides[k] * sizes[k];
    b -= b_strides[k] * sizes[k];
    idx[k] = 0;
  }
  return false;
}

/// Copies `sizes` elements of `elem_size` bytes from a strided source to a strided destination (strides in
/// elements). Both ranges must be valid for those strides.
inline void copy_strided(void* dst, std::span<const int64_t> dst_strides, const void* src,
                         std::span<const int64_t> src_strides, std::span<const int64_t> sizes, size_t elem_size) {
  const int rank = static_cast<int>(sizes.size());
  const int64_t numel = checked_numel(sizes);
  if (numel <= 0) return;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  if (rank == 0) {
    std::memmove(d, s, elem_size);
    return;
  }
  std::array<int64_t, kMaxDims> idx{};
  int64_t doff = 0, soff = 0;
  const int last = rank - 1;
  const int64_t inner = sizes[last], ds = dst_strides[last], ss = src_strides[last];
  while (true) {
    if (ds == 1 && ss == 1) {
      std::memmove(d + doff * static_cast<int64_t>(elem_size), s + soff * static_cast<int64_t>(elem_size),
                  static_cast<size_t>(inner) * elem_size);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memmove(d + (doff + i * ds) * static_cast<int64_t>(elem_size),
                    s + (soff + i * ss) * static_cast<int64_t>(elem_size), elem_size);
    }
    if (!advance_offsets(last, sizes.data(), idx.data(), dst_strides.data(), doff, src_strides.data(), soff)) return;
  }
}

}  // namespace etrt
