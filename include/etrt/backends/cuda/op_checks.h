// What the payload parser checks of each CUDA delegate op beyond its arity and dtypes (PAYLOAD.md's op table): the
// decoding and range of its attributes (`attrs`) and its shape rule (`shape`). The op table (op_table.h) names each
// op's functions; after these checks the kernels trust every size and attribute they are given.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "etrt/backends/cuda/payload_format.h"
#include "etrt/core/result.h"
#include "etrt/core/tensor.h"

namespace etrt::cuda {

/// Reads and checks a node's attributes (raw 8-byte words, count already checked) into `n`.
using AttrFn = Status (*)(NodeDesc& n, std::span<const uint64_t> raw, std::span<const ValueDesc> values,
                          std::string_view at);
/// Checks a node's output sizes (and attributes that depend on sizes) against its inputs'.
using ShapeFn = Status (*)(const NodeDesc& n, std::span<const ValueDesc> values, std::string_view at);

namespace attrs {

inline double f64(std::span<const uint64_t> raw, size_t k) { return std::bit_cast<double>(raw[k]); }
inline int64_t i64(std::span<const uint64_t> raw, size_t k) { return std::bit_cast<int64_t>(raw[k]); }

template <class T>
void read_attr(T& field, std::span<const uint64_t> raw, size_t k) {
  if constexpr (std::is_same_v<T, double>) field = f64(raw, k);
  else field = i64(raw, k);
}
/// Attributes straight into fields, in order, each read as its field's type; the ranges of dims and indices are
/// checked with the shapes.
template <auto... Fields>
Status fields(NodeDesc& n, std::span<const uint64_t> raw, std::span<const ValueDesc>, std::string_view) {
  size_t k = 0;
  (read_attr(n.*Fields, raw, k++), ...);
  return {};
}
/// ADD/SUB's alpha, the scalar of ADD_SCALAR/MUL_SCALAR/EQ_SCALAR, SOFTMAX's dim.
template <auto Field>
inline constexpr AttrFn one = fields<Field>;
inline constexpr AttrFn addmm = fields<&NodeDesc::beta, &NodeDesc::alpha>;
inline constexpr AttrFn select = fields<&NodeDesc::dim, &NodeDesc::index>;

inline Status check_flag(std::string_view at, std::string_view what, int64_t v, std::string_view expected) {
  if (v != 0 && v != 1) return fail(Error::InvalidProgram, at, ": ", what, " is ", v, ", expected ", expected);
  return {};
}
inline Status gelu(NodeDesc& n, std::span<const uint64_t> raw, std::span<const ValueDesc>, std::string_view at) {
  n.approximate = i64(raw, 0);
  return check_flag(at, "approximate", n.approximate, "0 (none) or 1 (tanh)");
}
inline Status layer_norm(NodeDesc& n, std::span<const uint64_t> raw, std::span<const ValueDesc>, std::string_view at) {
  n.eps = f64(raw, 0);
  n.normalized_ndim = i64(raw, 1);
  if (!(n.eps >= 0.0) || !std::isfinite(n.eps))
    return fail(Error::InvalidProgram, at, ": eps ", n.eps, " is not a finite non-negative number");
  return {};
}
inline Status any(NodeDesc& n, std::span<const uint64_t> raw, std::span<const ValueDesc>, std::string_view at) {
  n.dim = i64(raw, 0);
  n.keepdim = i64(raw, 1);
  return check_flag(at, "keepdim", n.keepdim, "0 or 1");
}
/// FULL: the value, which must fit a bool output.
inline Status full(NodeDesc& n, std::span<const uint64_t> raw, std::span<const ValueDesc> values, std::string_view at) {
  n.value = f64(raw, 0);
  if (values[n.out[0]].is_bool() && n.value != 0.0 && n.value != 1.0)
    return fail(Error::InvalidProgram, at, ": value ", n.value, " does not fit the bool output (0 or 1)");
  return {};
}
/// PERMUTE: one dim per input dimension, a permutation.
inline Status permute(NodeDesc& n, std::span<const uint64_t> raw, std::span<const ValueDesc> values,
                      std::string_view at) {
  const int rank = values[n.in[0]].rank;
  std::array<bool, kMaxDims> seen{};
  for (int k = 0; k < rank; ++k) {
    const int64_t d = i64(raw, k);
    if (d < 0 || d >= rank || seen[d]) {
      std::string dims = "[";
      for (int i = 0; i < rank; ++i) dims += cat(i ? ", " : "", i64(raw, i));
      return fail(Error::InvalidProgram, at, ": dims ", dims, "] are not a permutation of 0..", rank - 1);
    }
    seen[d] = true;
    n.perm[k] = static_cast<uint8_t>(d);
  }
  return {};
}

}  // namespace attrs

namespace shape {

namespace detail {
inline std::span<const int64_t> in(std::span<const ValueDesc> v, const NodeDesc& n, int k) { return v[n.in[k]].shape(); }
inline Status mismatch(std::string_view at, std::string_view what, std::span<const int64_t> got,
                       std::span<const int64_t> expected) {
  return fail(Error::InvalidProgram, at, ": ", what, " has sizes ", shape_str(got), ", expected ", shape_str(expected));
}
/// Output 0 has exactly `expected`.
inline Status output_is(std::span<const ValueDesc> v, const NodeDesc& n, std::string_view at,
                        std::span<const int64_t> expected) {
  const auto out = v[n.out[0]].shape();
  if (!payload_detail::same(out, expected)) return mismatch(at, "output", out, expected);
  return {};
}
/// The input's sizes without `dim` (kept as 1 when `keepdim`).
inline std::span<const int64_t> drop_dim(std::span<const int64_t> a, int64_t dim, bool keepdim,
                                         std::array<int64_t, kMaxDims>& o) {
  size_t r = 0;
  for (size_t d = 0; d < a.size(); ++d) {
    if (static_cast<int64_t>(d) != dim) o[r++] = a[d];
    else if (keepdim) o[r++] = 1;
  }
  return {o.data(), r};
}
}  // namespace detail

/// ADD, SUB, MUL, DIV: the inputs broadcast to the output.
inline Status broadcast(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  std::array<int64_t, kMaxDims> b{};
  size_t rank = 0;
  if (!payload_detail::broadcast(detail::in(v, n, 0), detail::in(v, n, 1), b, rank))
    return fail(Error::InvalidProgram, at, ": input sizes ", shape_str(detail::in(v, n, 0)), " and ",
                shape_str(detail::in(v, n, 1)), " do not broadcast");
  return detail::output_is(v, n, at, {b.data(), rank});
}

/// Elementwise on one input: the output has its sizes.
inline Status same(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  return detail::output_is(v, n, at, detail::in(v, n, 0));
}

/// MM ([m, k] x [k, n]), BMM ([b, m, k] x [b, k, n]) and ADDMM (bias, then MM's operands; the bias expands to the
/// output): `Batched` picks the rank, `Lhs` the first operand's input.
template <bool Batched, int Lhs>
Status matmul(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  constexpr size_t rank = Batched ? 3 : 2;
  const auto a = detail::in(v, n, Lhs), b = detail::in(v, n, Lhs + 1);
  if (a.size() != rank || b.size() != rank)
    return fail(Error::InvalidProgram, at, ": operands must have rank ", rank, ", got ", shape_str(a), " and ",
                shape_str(b));
  if (a[rank - 1] != b[rank - 2] || (Batched && a[0] != b[0]))
    return fail(Error::InvalidProgram, at, ": operand sizes ", shape_str(a), " and ", shape_str(b),
                " cannot be multiplied");
  std::array<int64_t, 3> o{};
  if constexpr (Batched) o = {a[0], a[1], b[2]};
  else o = {a[0], b[1], 0};
  const std::span<const int64_t> expected(o.data(), rank);
  ETRT_CHECK_OK(detail::output_is(v, n, at, expected));
  if (Lhs == 1 && !payload_detail::expands_to(detail::in(v, n, 0), expected))
    return fail(Error::InvalidProgram, at, ": bias sizes ", shape_str(detail::in(v, n, 0)), " do not broadcast to ",
                shape_str(expected));
  return {};
}

inline Status softmax(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  const int64_t rank = static_cast<int64_t>(detail::in(v, n, 0).size());
  if (n.dim < 0 || n.dim >= std::max<int64_t>(rank, 1))
    return fail(Error::InvalidProgram, at, ": dim ", n.dim, " is out of range for rank ", rank);
  return same(n, v, at);
}

/// LAYER_NORM: weight and bias (when present) have the normalized sizes; output 0 the input's, the mean and rstd
/// outputs the input's with the normalized dims as 1.
inline Status layer_norm(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  const auto x = detail::in(v, n, 0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (n.normalized_ndim < 1 || n.normalized_ndim > rank)
    return fail(Error::InvalidProgram, at, ": normalized_ndim ", n.normalized_ndim, " must be in 1..", rank,
                " (the input's rank)");
  const std::span<const int64_t> normalized = x.subspan(static_cast<size_t>(rank - n.normalized_ndim));
  for (int k = 1; k < 3; ++k)
    if (n.in[k] != kAbsent && !payload_detail::same(detail::in(v, n, k), normalized))
      return fail(Error::InvalidProgram, at, ": ", k == 1 ? "weight" : "bias", " has sizes ",
                  shape_str(detail::in(v, n, k)), ", expected the normalized sizes ", shape_str(normalized));
  if (!payload_detail::same(v[n.out[0]].shape(), x)) return detail::mismatch(at, "output 0", v[n.out[0]].shape(), x);
  std::array<int64_t, kMaxDims> stats{};
  for (int64_t d = 0; d < rank; ++d) stats[d] = d < rank - n.normalized_ndim ? x[d] : 1;
  const std::span<const int64_t> expected(stats.data(), static_cast<size_t>(rank));
  for (int k = 1; k < 3; ++k) {
    const auto got = v[n.out[k]].shape();
    if (!payload_detail::same(got, expected))
      return fail(Error::InvalidProgram, at, ": output ", k, k == 1 ? " (mean)" : " (rstd)", " has sizes ",
                  shape_str(got), ", expected ", shape_str(expected));
  }
  return {};
}

/// COPY (a reshape): the same element count.
inline Status same_numel(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  if (v[n.out[0]].numel != v[n.in[0]].numel)
    return fail(Error::InvalidProgram, at, ": output sizes ", shape_str(v[n.out[0]].shape()),
                " have a different element count than the input's ", shape_str(detail::in(v, n, 0)));
  return {};
}

inline Status permute(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  const auto a = detail::in(v, n, 0);
  std::array<int64_t, kMaxDims> o{};
  for (size_t d = 0; d < a.size(); ++d) o[d] = a[n.perm[d]];
  return detail::output_is(v, n, at, {o.data(), a.size()});
}

inline Status expand(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  if (!payload_detail::expands_to(detail::in(v, n, 0), v[n.out[0]].shape()))
    return fail(Error::InvalidProgram, at, ": input sizes ", shape_str(detail::in(v, n, 0)),
                " do not expand to the output's ", shape_str(v[n.out[0]].shape()));
  return {};
}

inline Status select(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  const auto a = detail::in(v, n, 0);
  const int64_t rank = static_cast<int64_t>(a.size());
  if (n.dim < 0 || n.dim >= rank)
    return fail(Error::InvalidProgram, at, ": dim ", n.dim, " is out of range for rank ", rank);
  if (n.index < 0 || n.index >= a[n.dim])
    return fail(Error::InvalidProgram, at, ": index ", n.index, " is out of range for size ", a[n.dim], " of dim ",
                n.dim);
  std::array<int64_t, kMaxDims> o{};
  return detail::output_is(v, n, at, detail::drop_dim(a, n.dim, false, o));
}

inline Status any(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  const auto a = detail::in(v, n, 0);
  const int64_t rank = static_cast<int64_t>(a.size());
  if (n.dim < 0 || n.dim >= std::max<int64_t>(rank, 1))
    return fail(Error::InvalidProgram, at, ": dim ", n.dim, " is out of range for rank ", rank);
  std::array<int64_t, kMaxDims> o{};
  return detail::output_is(v, n, at, detail::drop_dim(a, n.dim, n.keepdim != 0, o));
}

/// FULL: the output's sizes are the op's only shape.
inline Status any_output(const NodeDesc&, std::span<const ValueDesc>, std::string_view) { return {}; }

/// WHERE: condition, then the two branches, all broadcast to the output.
inline Status where(const NodeDesc& n, std::span<const ValueDesc> v, std::string_view at) {
  std::array<int64_t, kMaxDims> ab{}, abc{};
  size_t r1 = 0, r2 = 0;
  if (!payload_detail::broadcast(detail::in(v, n, 1), detail::in(v, n, 2), ab, r1) ||
      !payload_detail::broadcast(detail::in(v, n, 0), {ab.data(), r1}, abc, r2))
    return fail(Error::InvalidProgram, at, ": input sizes ", shape_str(detail::in(v, n, 0)), ", ",
                shape_str(detail::in(v, n, 1)), " and ", shape_str(detail::in(v, n, 2)), " do not broadcast");
  return detail::output_is(v, n, at, {abc.data(), r2});
}

}  // namespace shape

}  // namespace etrt::cuda
