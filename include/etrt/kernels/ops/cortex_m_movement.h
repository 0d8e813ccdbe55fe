// cortex_m:: data movement: pad (arm_pad_s8) and transpose (arm_transpose_s8).
//
// pad: pre_pad / post_pad hold 4 values in physical (memory) order, as the AoT pass writes them: for a 4-D tensor
// the k-th value pads logical dim dim_order[k] (channels-last: N, H, W, C); for rank r < 4 the value at 4 - r + i
// pads dim i. The new elements are pad_value (an int8).
// transpose: out = input.permute(perm).
#pragma once

#include "etrt/kernels/ops/cortex_m_common.h"

namespace etrt::kernels::cortex_m {

template <class Dtypes>
Status pad_out(KernelContext& ctx, const Tensor& input, std::span<const int64_t> pre_pad,
               std::span<const int64_t> post_pad, int64_t pad_value, Tensor& out) {
  constexpr std::string_view op = "cortex_m::pad.out";
  ETRT_CHECK_OK(check_dtype(op, "input", input, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "out", out, ScalarType::Char));
  const int rank = input.dim();
  if (rank < 1 || rank > 4) return fail(Error::InvalidArgument, op, ": input rank must be 1..4, got ", rank);
  if (pre_pad.size() != 4 || post_pad.size() != 4)
    return fail(Error::InvalidArgument, op, ": pre_pad and post_pad must have 4 values");
  ETRT_CHECK_OK(check_range(op, "pad_value", pad_value, -128, 127));
  std::array<int64_t, 4> pre{}, post{}, osz{};
  for (int k = 0; k < 4; ++k) {
    ETRT_CHECK_OK(check_range(op, "pre_pad", pre_pad[k], 0, int64_t{1} << 31));
    ETRT_CHECK_OK(check_range(op, "post_pad", post_pad[k], 0, int64_t{1} << 31));
    const int d = rank == 4 ? input.dim_order()[k] : k - (4 - rank);
    if (d < 0) {
      if (pre_pad[k] != 0 || post_pad[k] != 0)
        return fail(Error::InvalidArgument, op, ": padding of a dim a rank-", rank, " input does not have");
      continue;
    }
    pre[d] = pre_pad[k];
    post[d] = post_pad[k];
  }
  for (int d = 0; d < rank; ++d) {
    // The pads are at most 2^31 each, but an empty input's other sizes are not bounded by its storage.
    if (input.size(d) > INT64_MAX - pre[d] - post[d])
      return fail(Error::InvalidArgument, op, ": padding makes dim ", d, " of input ", input.describe(), " too large");
    osz[d] = input.size(d) + pre[d] + post[d];
  }
  ETRT_CHECK_OK(ctx.resize(op, out, std::span<const int64_t>(osz.data(), rank)));
  const Shape sh = shape_of(out.sizes());
  std::array<std::array<int64_t, kMaxDims>, 1> st{};
  for (int d = 0; d < rank; ++d) st[0][d] = out.stride(d);
  int8_t* y = out.data_as<int8_t>();
  const int8_t* x = input.data_as<const int8_t>();
  std::array<int64_t, kMaxDims> idx{};
  for_each_offset<1>(sh, st, [&](const std::array<int64_t, 1>& off) {
    bool inside = true;
    int64_t src = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t i = idx[d] - pre[d];
      if (i < 0 || i >= input.size(d)) inside = false;
      else src += i * input.stride(d);
    }
    y[off[0]] = inside ? x[src] : static_cast<int8_t>(pad_value);
    for (int d = rank - 1; d >= 0; --d) {  // row-major successor of idx
      if (++idx[d] < osz[d]) break;
      idx[d] = 0;
    }
  });
  return {};
}

template <class Dtypes>
Status transpose_out(KernelContext& ctx, const Tensor& input, std::span<const int64_t> perm, Tensor& out) {
  constexpr std::string_view op = "cortex_m::transpose.out";
  if (out.dtype() != input.dtype())
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != input dtype ", name(input.dtype()));
  const int rank = input.dim();
  if (static_cast<int>(perm.size()) != rank)
    return fail(Error::InvalidArgument, op, ": perm ", shape_str(perm), " does not match rank ", rank);
  std::array<bool, kMaxDims> seen{};
  std::array<int64_t, kMaxDims> osz{};
  mv::View src;
  src.data = static_cast<char*>(input.data());
  for (int i = 0; i < rank; ++i) {
    const int64_t p = perm[i] < 0 ? perm[i] + rank : perm[i];
    if (p < 0 || p >= rank || seen[p]) return fail(Error::InvalidArgument, op, ": perm ", shape_str(perm), " is not a permutation");
    seen[p] = true;
    osz[i] = input.size(static_cast<int>(p));
    src.push(osz[i], input.stride(static_cast<int>(p)));
  }
  ETRT_CHECK_OK(ctx.resize(op, out, std::span<const int64_t>(osz.data(), rank)));
  if (out.numel() == 0) return {};
  mv::copy_views(element_size(input.dtype()), mv::view_of(out), src);
  return {};
}

}  // namespace etrt::kernels::cortex_m
