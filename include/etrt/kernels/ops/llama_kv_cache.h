// llama::update_cache.out, llama::update_cache_with_indices.out and llama::fallback.out.
//
// KV caches are [batch, max_seq_len, heads, head_dim] (sequence at dim 1), contiguous, and usually a mutable buffer
// of the program: planned memory that keeps its contents between calls. update_cache writes the new rows `value`
// [batch, seq_len, heads, head_dim] into `cache` in place at rows [start_pos, start_pos + seq_len) of every batch
// line; update_cache_with_indices writes row s of batch line b to cache row indices[b, s] instead (start_pos is
// ignored). Only the new rows are touched. Their `out` is a placeholder the exporter plans ([1]); nothing reads it,
// so it is left as it is. The copies are bytewise: any dtype works as long as value and cache have the same element
// size (upstream's rule; the exporter's meta function additionally requires equal dtypes).
//
// Every index is validated before anything is written, so a failing call leaves the cache unchanged.
//
// fallback.out is a plain copy of its input into `output`.
#pragma once

#include <cstring>

#include "etrt/kernels/ops/llama_common.h"
#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace llama::detail {

inline Status check_cache_pair(std::string_view op, const Tensor& value, const Tensor& cache) {
  ETRT_CHECK_OK(check_rank(op, value, 4, "value"));
  ETRT_CHECK_OK(check_rank(op, cache, 4, "cache"));
  ETRT_CHECK_OK(check_contiguous(op, value, "value"));
  ETRT_CHECK_OK(check_contiguous(op, cache, "cache"));
  if (element_size(value.dtype()) != element_size(cache.dtype()))
    return fail(Error::InvalidArgument, op, ": value (", name(value.dtype()), ") and cache (", name(cache.dtype()),
                ") must have the same element size");
  static constexpr const char* kDim[4] = {"batch", "", "head count", "head dim"};
  for (int d : {0, 2, 3})
    if (value.size(d) != cache.size(d))
      return fail(Error::InvalidArgument, op, ": value ", value.describe(), " and cache ", cache.describe(),
                  " differ in ", kDim[d], " (dim ", d, ")");
  return {};
}

}  // namespace llama::detail

template <class Dtypes>
Status update_cache_out(KernelContext&, const Tensor& value, Tensor& cache, int64_t start_pos, Tensor& out) {
  (void)out;
  constexpr std::string_view op = "llama::update_cache.out";
  ETRT_CHECK_OK(llama::detail::check_cache_pair(op, value, cache));
  const int64_t seq_len = value.size(1);
  ETRT_CHECK_OK(llama::check_window(op, start_pos, seq_len, cache.size(1), "cache"));
  if (value.numel() == 0) return {};
  const size_t es = element_size(cache.dtype());
  const auto block = static_cast<size_t>(seq_len * value.stride(1)) * es;  // every row of one batch line
  auto* dst = static_cast<char*>(cache.data());
  const auto* src = static_cast<const char*>(value.data());
  for (int64_t b = 0; b < value.size(0); ++b)
    std::memmove(dst + static_cast<size_t>(b * cache.stride(0) + start_pos * cache.stride(1)) * es,
                src + static_cast<size_t>(b * value.stride(0)) * es, block);
  return {};
}

template <class Dtypes>
Status update_cache_with_indices_out(KernelContext&, const Tensor& value, Tensor& cache, int64_t start_pos,
                                     const Tensor& indices, Tensor& out) {
  (void)start_pos;  // the indices say where every row goes
  (void)out;
  constexpr std::string_view op = "llama::update_cache_with_indices.out";
  ETRT_CHECK_OK(llama::detail::check_cache_pair(op, value, cache));
  ETRT_CHECK_OK(llama::check_rank(op, indices, 2, "indices"));
  ETRT_CHECK_OK(llama::check_dtype(op, indices, ScalarType::Long, "indices"));
  ETRT_CHECK_OK(llama::check_contiguous(op, indices, "indices"));
  if (indices.size(0) != value.size(0) || indices.size(1) != value.size(1))
    return fail(Error::InvalidArgument, op, ": indices ", indices.describe(), " must be [batch, seq_len] of value ",
                value.describe());
  const int64_t B = value.size(0), S = value.size(1), rows = cache.size(1);
  if (value.numel() == 0) return {};
  const auto* idx = indices.data_as<const int64_t>();
  for (int64_t i = 0; i < B * S; ++i)
    if (idx[i] < 0 || idx[i] >= rows)
      return fail(Error::InvalidArgument, op, ": index ", idx[i], " (batch ", i / S, ", position ", i % S,
                  ") is out of range for a cache of ", rows, " rows");
  const size_t es = element_size(cache.dtype());
  const auto row = static_cast<size_t>(value.stride(1)) * es;
  auto* dst = static_cast<char*>(cache.data());
  const auto* src = static_cast<const char*>(value.data());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)  // in order: a repeated index keeps the last row written to it
      std::memmove(dst + static_cast<size_t>(b * cache.stride(0) + idx[b * S + s] * cache.stride(1)) * es,
                  src + static_cast<size_t>(b * value.stride(0) + s * value.stride(1)) * es, row);
  return {};
}

template <class Dtypes>
Status fallback_out(KernelContext& ctx, const Tensor& input, Tensor& output) {
  constexpr std::string_view op = "llama::fallback.out";
  ETRT_CHECK_OK(llama::check_same_dtype(op, output, input, "output", "input"));
  ETRT_CHECK_OK(ctx.resize(op, output, input.sizes()));
  if (input.numel() == 0) return {};
  mv::copy_logical(output, input);
  return {};
}

}  // namespace etrt::kernels
