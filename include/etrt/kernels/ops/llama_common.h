// Argument checks shared by the llama:: kernels (the LLM custom-op library: KV caches, attention, Hadamard
// transform, gated delta rule, quantized MoE). Every message names the operator and what was wrong with which
// argument, so a bad program fails with a readable error instead of reading or writing out of bounds.
#pragma once

#include <string_view>

#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/dtype_util.h"

namespace etrt::kernels::llama {

inline Status check_rank(std::string_view op, const Tensor& t, int rank, std::string_view what) {
  if (t.dim() != rank)
    return fail(Error::InvalidArgument, op, ": ", what, " must be ", rank, "-D, got ", t.describe());
  return {};
}

/// The kernels index raw storage with row-major strides: a permuted dim order is refused.
inline Status check_contiguous(std::string_view op, const Tensor& t, std::string_view what) {
  if (!t.is_contiguous_order())
    return fail(Error::InvalidArgument, op, ": ", what, " ", t.describe(), " must be in contiguous dim order");
  return {};
}

inline Status check_dtype(std::string_view op, const Tensor& t, ScalarType want, std::string_view what) {
  if (t.dtype() != want)
    return fail(Error::InvalidArgument, op, ": ", what, " must be ", name(want), ", got ", name(t.dtype()));
  return {};
}

inline Status check_same_dtype(std::string_view op, const Tensor& t, const Tensor& ref, std::string_view what,
                               std::string_view ref_what) {
  if (t.dtype() != ref.dtype())
    return fail(Error::InvalidArgument, op, ": ", what, " (", name(t.dtype()), ") must have the dtype of ", ref_what,
                " (", name(ref.dtype()), ")");
  return {};
}

/// Rows [start_pos, start_pos + len) must lie inside a cache of `cache_len` rows.
inline Status check_window(std::string_view op, int64_t start_pos, int64_t len, int64_t cache_len,
                           std::string_view what) {
  if (start_pos < 0) return fail(Error::InvalidArgument, op, ": start_pos ", start_pos, " is negative");
  if (start_pos >= cache_len || len > cache_len - start_pos)
    return fail(Error::InvalidArgument, op, ": start_pos ", start_pos, " + seq_len ", len, " exceeds the ", what,
                " length ", cache_len);
  return {};
}

}  // namespace etrt::kernels::llama
