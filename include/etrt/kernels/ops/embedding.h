// embedding.out: rows of a [num_embeddings, dim] weight gathered by Long/Int indices of any shape.
// padding_idx, scale_grad_by_freq and sparse only affect the backward pass.
#pragma once

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

template <class Dtypes>
Status embedding_out(KernelContext& ctx, const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                     bool scale_grad_by_freq, bool sparse, Tensor& out) {
  (void)padding_idx;
  (void)scale_grad_by_freq;
  (void)sparse;
  constexpr std::string_view op = "embedding.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, weight, out));
  ETRT_CHECK_OK(mv::check_index_dtype(op, indices, "indices"));
  if (weight.dim() != 2) return fail(Error::InvalidArgument, op, ": weight must be 2-D, got ", weight.describe());
  if (indices.dim() + 1 > kMaxDims) return fail(Error::InvalidArgument, op, ": indices rank too large");
  Shape s = shape_of(indices.sizes());
  s.sizes[s.rank++] = weight.size(1);
  const int64_t V = weight.size(0);
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  if (indices.numel() == 0) return {};
  // Validate every index before writing.
  Status err;
  mv::View iv = mv::view_of(indices);
  mv::for_each_view_offset(iv, [&](int64_t off) {
    const int64_t i = mv::read_index(indices, off);
    if (err && (i < 0 || i >= V))
      err = fail(Error::InvalidArgument, op, ": index ", i, " is out of range for ", V, " embeddings");
  });
  if (!err) return err;
  const size_t es = element_size(out.dtype());
  const int64_t D = weight.size(1), ws0 = weight.stride(0), ws1 = weight.stride(1), ods = out.stride(out.dim() - 1);
  // Output rows in index order: walk out's leading dims with the same logical order as indices.
  mv::View ov = mv::view_of(out);
  ov.rank -= 1;
  std::vector<int64_t> ooffs;
  ooffs.reserve(static_cast<size_t>(indices.numel()));
  mv::for_each_view_offset(ov, [&](int64_t off) { ooffs.push_back(off); });
  size_t k = 0;
  char* obase = static_cast<char*>(out.data());
  const char* wbase = static_cast<const char*>(weight.data());
  mv::for_each_view_offset(iv, [&](int64_t off) {
    const int64_t i = mv::read_index(indices, off);
    mv::View dst, src;
    dst.data = obase + ooffs[k++] * static_cast<int64_t>(es);
    dst.push(D, ods);
    src.data = const_cast<char*>(wbase) + i * ws0 * static_cast<int64_t>(es);
    src.push(D, ws1);
    mv::copy_views(es, dst, src);
  });
  return {};
}

}  // namespace etrt::kernels
