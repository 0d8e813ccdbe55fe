// What each CUDA delegate op becomes on the device: a Step, one launch of one of the Ops policy's primitives
// (graph_executor.h lists them) with its parameters worked out once at init. The op table (op_table.h) names each
// op's plan function; an op that maps onto an existing primitive needs only its plan function here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "etrt/backends/cuda/payload_format.h"
#include "etrt/kernels/util/functors.h"

namespace etrt::cuda {

/// C[i] (m x n) = alpha * A[i] (m x k) * B[i] (k x n) + beta * C[i] for i < batch; row-major, contiguous, the
/// batches packed back to back. beta == 0 never reads C (it may hold garbage, as BLAS allows).
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

/// The Ops policy's primitives.
enum class StepKind : uint8_t { Skip, Unary, Binary, Copy, Gemm, Softmax, LayerNorm, EqScalar, LogicalNot, Any, Fill,
                                Where };

struct Step {
  StepKind kind = StepKind::Skip;
  const NodeDesc* node = nullptr;
  fn::UnaryKind unary{};
  fn::BinaryKind binary{};
  float param = 0.f, alpha = 1.f, beta = 0.f, eps = 0.f;
  fn::Strided<3> walk3{};
  fn::Strided<2> walk2{};  // COPY/PERMUTE/EXPAND/SELECT, and ADDMM's bias broadcast into the output
  fn::Strided<4> walk4{};  // WHERE: out, cond, a, b
  int64_t src_offset = 0;  // SELECT: elements from the input's start to the selected slice
  bool bytes = false;      // COPY of a bool value
  bool bias_copy = false;  // GEMM: the bias (input 0) is first broadcast into the output (ADDMM)
  int lhs = 0;             // GEMM: the input holding the left operand (ADDMM: 1, after the bias)
  GemmShape gemm{};
  int64_t outer = 1, len = 1, inner = 1;
};

/// Fills `s` for node `n`, whose outputs are not all empty.
using PlanFn = void (*)(const NodeDesc& n, std::span<const ValueDesc> values, Step& s);

namespace steps {

inline void contiguous_strides(std::span<const int64_t> sizes, int64_t* strides) {
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
}
/// Operand strides of `in` walked over `out`'s shape: trailing-aligned, 0 where `in` broadcasts.
inline void broadcast_strides(const ValueDesc& in, const ValueDesc& out, int64_t* strides) {
  int64_t own[kMaxDims];
  contiguous_strides(in.shape(), own);
  const int shift = out.rank - in.rank;
  for (int d = 0; d < out.rank; ++d) {
    const int s = d - shift;
    strides[d] = (s < 0 || in.sizes[s] == 1) ? 0 : own[s];
  }
}
/// A walk over `out`'s shape, operand 0 (the output) contiguous.
template <int N>
void init_walk(const ValueDesc& out, fn::Strided<N>& w) {
  w.rank = out.rank;
  w.numel = out.numel;
  for (int d = 0; d < out.rank; ++d) w.sizes[d] = out.sizes[d];
  contiguous_strides(out.shape(), w.strides[0]);
}
/// outer x len x inner around `dim` of `a`.
inline void split_at(const ValueDesc& a, int64_t dim, Step& s) {
  for (int d = 0; d < a.rank; ++d) {
    if (d < dim) s.outer *= a.sizes[d];
    else if (d == dim) s.len = a.sizes[d];
    else s.inner *= a.sizes[d];
  }
}

}  // namespace steps

namespace plan {

template <fn::BinaryKind Kind>
void binary(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  const ValueDesc& out = v[n.out[0]];
  s.kind = StepKind::Binary;
  s.binary = Kind;
  s.alpha = static_cast<float>(n.alpha);
  steps::init_walk(out, s.walk3);
  steps::broadcast_strides(v[n.in[0]], out, s.walk3.strides[1]);
  steps::broadcast_strides(v[n.in[1]], out, s.walk3.strides[2]);
  fn::coalesce(s.walk3);
}

/// An elementwise function of one input; ADD_SCALAR and MUL_SCALAR take the node's scalar.
template <fn::UnaryKind Kind>
void unary(const NodeDesc& n, std::span<const ValueDesc>, Step& s) {
  s.kind = StepKind::Unary;
  s.unary = Kind;
  s.param = static_cast<float>(n.scalar);
}
inline void gelu(const NodeDesc& n, std::span<const ValueDesc>, Step& s) {
  s.kind = StepKind::Unary;
  s.unary = n.approximate == 1 ? fn::UnaryKind::GeluTanh : fn::UnaryKind::GeluErf;
}

/// MM, BMM, ADDMM: `Lhs` is the input of the left operand (ADDMM's bias comes first).
template <int Lhs>
void gemm(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  s.kind = StepKind::Gemm;
  s.lhs = Lhs;
  const ValueDesc& lhs = v[n.in[Lhs]];
  const ValueDesc& rhs = v[n.in[Lhs + 1]];
  const int r = lhs.rank;
  s.gemm = {r == 3 ? lhs.sizes[0] : 1, lhs.sizes[r - 2], rhs.sizes[r - 1], lhs.sizes[r - 1]};
  s.alpha = Lhs == 1 ? static_cast<float>(n.alpha) : 1.f;
  s.beta = Lhs == 1 ? static_cast<float>(n.beta) : 0.f;
  // beta == 0 ignores the bias entirely (NaN in it does not propagate), as torch's addmm does.
  s.bias_copy = Lhs == 1 && s.beta != 0.f;
  if (s.bias_copy) {
    const ValueDesc& out = v[n.out[0]];
    steps::init_walk(out, s.walk2);
    steps::broadcast_strides(v[n.in[0]], out, s.walk2.strides[1]);
    fn::coalesce(s.walk2);
  }
}

inline void softmax(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  s.kind = StepKind::Softmax;
  steps::split_at(v[n.in[0]], n.dim, s);
}

inline void layer_norm(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  s.kind = StepKind::LayerNorm;
  const ValueDesc& a = v[n.in[0]];
  const int lead = a.rank - static_cast<int>(n.normalized_ndim);
  for (int d = 0; d < a.rank; ++d) (d < lead ? s.outer : s.len) *= a.sizes[d];
  s.eps = static_cast<float>(n.eps);
}

/// COPY: the elements in order (a reshape).
inline void copy(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  const ValueDesc& out = v[n.out[0]];
  s.kind = StepKind::Copy;
  s.bytes = out.is_bool();
  s.walk2.rank = 1;
  s.walk2.numel = s.walk2.sizes[0] = out.numel;
  s.walk2.strides[0][0] = s.walk2.strides[1][0] = 1;
}

inline void permute(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  const ValueDesc& out = v[n.out[0]];
  s.kind = StepKind::Copy;
  steps::init_walk(out, s.walk2);
  int64_t own[kMaxDims];
  steps::contiguous_strides(v[n.in[0]].shape(), own);
  for (int d = 0; d < out.rank; ++d) s.walk2.strides[1][d] = own[n.perm[d]];
  fn::coalesce(s.walk2);
}

inline void expand(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  const ValueDesc& out = v[n.out[0]];
  s.kind = StepKind::Copy;
  steps::init_walk(out, s.walk2);
  steps::broadcast_strides(v[n.in[0]], out, s.walk2.strides[1]);
  fn::coalesce(s.walk2);
}

/// A strided copy of the slice: the input's strides without `dim`, starting at index * stride[dim].
inline void select(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  const ValueDesc& a = v[n.in[0]];
  s.kind = StepKind::Copy;
  steps::init_walk(v[n.out[0]], s.walk2);
  int64_t own[kMaxDims];
  steps::contiguous_strides(a.shape(), own);
  for (int d = 0, o = 0; d < a.rank; ++d)
    if (d != n.dim) s.walk2.strides[1][o++] = own[d];
  s.src_offset = n.index * own[n.dim];
  fn::coalesce(s.walk2);
}

inline void eq_scalar(const NodeDesc& n, std::span<const ValueDesc>, Step& s) {
  s.kind = StepKind::EqScalar;
  s.param = static_cast<float>(n.scalar);  // torch compares a float tensor with the scalar in float
}

inline void logical_not(const NodeDesc&, std::span<const ValueDesc>, Step& s) { s.kind = StepKind::LogicalNot; }

inline void any(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  s.kind = StepKind::Any;
  steps::split_at(v[n.in[0]], n.dim, s);
}

inline void fill(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  s.kind = StepKind::Fill;
  s.bytes = v[n.out[0]].is_bool();
  s.param = static_cast<float>(n.value);
}

inline void where(const NodeDesc& n, std::span<const ValueDesc> v, Step& s) {
  const ValueDesc& out = v[n.out[0]];
  s.kind = StepKind::Where;
  steps::init_walk(out, s.walk4);
  for (int k = 0; k < 3; ++k) steps::broadcast_strides(v[n.in[k]], out, s.walk4.strides[k + 1]);
  fn::coalesce(s.walk4);
}

}  // namespace plan

}  // namespace etrt::cuda
