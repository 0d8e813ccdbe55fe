// What the XNNPACK executor checks of a parsed Graph before it runs it (each check says what the node kind's run
// function assumes) and the scratch each node kind needs (Note [xnnpack scratch]). The node kinds' table
// (node_table.h) names each kind's check and scratch.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "etrt/backends/xnnpack/graph.h"
#include "etrt/core/tensor.h"  // shape_str

namespace etrt::xnnpack {

namespace detail {

/// The product of `d`, or -1 when it overflows (dims come from the payload).
inline int64_t product(std::span<const int64_t> d) {
  int64_t n = 1;
  for (int64_t x : d) {
    if (x < 0 || (x != 0 && n > INT64_MAX / x)) return -1;
    n *= x;
  }
  return n;
}

/// Note [xnnpack scratch]: the temporaries a node needs beyond its values (an explicitly padded input, max-pool
/// indices, PReLU's negative part, slice intermediates), in floats. Computed and bounded at init, so one scratch
/// buffer allocated with the graph serves every node and no call allocates. Asymmetric padding is split: the
/// symmetric part goes to the kernel, only the excess on one side is materialised, and that excess may not exceed
/// the padded dim itself, so a padded input is at most 4x its input.
struct SpatialPad {
  std::array<int64_t, 2> symmetric{};  // (h, w) padding the kernel applies on both sides
  int64_t top = 0, bottom = 0, left = 0, right = 0;  // the excess materialised in scratch
  bool explicit_pad() const { return top || bottom || left || right; }
};
inline SpatialPad split_padding(const Node& n) {
  const int64_t t = n.conv[0], r = n.conv[1], b = n.conv[2], l = n.conv[3];
  SpatialPad p;
  p.symmetric = {std::min(t, b), std::min(l, r)};
  p.top = t - p.symmetric[0];
  p.bottom = b - p.symmetric[0];
  p.left = l - p.symmetric[1];
  p.right = r - p.symmetric[1];
  return p;
}
inline bool symmetric_padding(const Node& n) { return n.conv[0] == n.conv[2] && n.conv[1] == n.conv[3]; }
inline int64_t rank(const Graph& g, uint32_t id) { return static_cast<int64_t>(g.values[id].dims.size()); }

}  // namespace detail

/// Note [xnnpack scratch]: a node kind's scratch, in floats (nullptr in the table: none).
using ScratchFn = Result<uint64_t> (*)(const Graph&, const Node&);
/// What a node kind's run function relies on that depends only on the graph (nullptr in the table: nothing beyond
/// checks::common). Each check says what the run function assumes.
using CheckFn = Status (*)(const Graph&, const Node&);

namespace scratch {

/// Convolution and max pooling: the input with the excess of asymmetric padding materialised.
inline Result<uint64_t> padded_input(const Graph& g, const Node& n) {
  const detail::SpatialPad p = detail::split_padding(n);
  if (!p.explicit_pad()) return uint64_t{0};
  const auto& d = g.values[n.inputs[0]].dims;  // NHWC, 4-D: checks::conv / checks::max_pooling
  if (p.top + p.bottom > std::max<int64_t>(d[1], 1) || p.left + p.right > std::max<int64_t>(d[2], 1))
    return fail(Error::InvalidProgram, n.where(), ": asymmetric padding (top ", n.conv[0], ", bottom ", n.conv[2],
                ", left ", n.conv[3], ", right ", n.conv[1], ") exceeds the input ", shape_str(d));
  const std::array<int64_t, 4> padded{d[0], d[1] + p.top + p.bottom, d[2] + p.left + p.right, d[3]};
  const int64_t e = detail::product(padded);
  if (e < 0) return fail(Error::InvalidProgram, n.where(), ": padded input overflows");
  return static_cast<uint64_t>(e);
}
/// Conv2d: the padded input, or, for an input quantized per tensor, that input as bytes for the int8 GEMM
/// (kernels::nhwc::conv_input_bytes; Note [xnnpack int8 filters]), whichever is larger. The bytes are reserved
/// whether or not the node takes the int8 path, which is decided later, when the filters are prepared.
inline Result<uint64_t> conv(const Graph& g, const Node& n) {
  ETRT_TRY(uint64_t need, padded_input(g, n));
  const Value& x = g.values[n.inputs[0]];
  if ((x.datatype == Datatype::QInt8 || x.datatype == Datatype::QUInt8) && x.quant.kind == QuantKind::PerTensor)
    need = std::max<uint64_t>(need, (static_cast<uint64_t>(x.numel) + 64 + sizeof(float) - 1) / sizeof(float));
  return need;
}
/// Max pooling: the padded input, then the int64 indices the kernel writes (8-byte aligned).
inline Result<uint64_t> max_pooling(const Graph& g, const Node& n) {
  ETRT_TRY(uint64_t need, padded_input(g, n));
  return (need + 1) / 2 * 2 + 2 * static_cast<uint64_t>(g.values[n.output].numel);
}
/// PReLU: the input's negative part.
inline Result<uint64_t> input_size(const Graph& g, const Node& n) {
  return static_cast<uint64_t>(g.values[n.inputs[0]].numel);
}
/// Slice: two intermediates taking turns.
inline Result<uint64_t> two_inputs(const Graph& g, const Node& n) {
  return 2 * static_cast<uint64_t>(g.values[n.inputs[0]].numel);
}
/// Attention: one row of logits (U floats; the key holds at least U elements).
inline Result<uint64_t> key_size(const Graph& g, const Node& n) {
  return static_cast<uint64_t>(g.values[n.inputs[1]].numel);
}

}  // namespace scratch

namespace checks {

/// Every kind: int32 values are ArgMaxPooling2d's indices; every kernel here reads floats.
inline Status common(const Graph& g, const Node& n) {
  for (const uint32_t id : n.inputs)
    if (id != kNoValue && g.values[id].datatype == Datatype::Int32)
      return fail(Error::NotSupported, n.where(), ": input value ", id, " is int32; only fp32 and quantized inputs are supported");
  if (!n.has_index_output && g.values[n.output].datatype == Datatype::Int32)
    return fail(Error::NotSupported, n.where(), ": output value ", n.output, " is int32");
  return {};
}

/// Conv2d and DepthwiseConv2d (asymmetric padding is applied explicitly, into scratch).
inline Status conv(const Graph& g, const Node& n) {
  using detail::rank;
  if (rank(g, n.inputs[0]) != 4 || rank(g, n.output) != 4 || rank(g, n.inputs[1]) != 4)
    return fail(Error::InvalidProgram, n.where(), ": input, filter and output must be 4-D (NHWC / OHWI)");
  if (n.conv[12] == 0) return fail(Error::InvalidProgram, n.where(), ": groups is 0");
  if (n.inputs[2] != kNoValue && rank(g, n.inputs[2]) != 1)
    return fail(Error::InvalidProgram, n.where(), ": bias must be 1-D");
  return {};
}
/// ConvTranspose2d: as conv, but padding cannot be applied to the input, and groups must be 1.
inline Status transposed_conv(const Graph& g, const Node& n) {
  ETRT_CHECK_OK(conv(g, n));
  if (!detail::symmetric_padding(n))
    return fail(Error::NotSupported, n.where(), ": asymmetric padding (top ", n.conv[0], ", bottom ", n.conv[2],
                ", left ", n.conv[3], ", right ", n.conv[1], ") is not supported");
  if (n.conv[12] != 1) return fail(Error::NotSupported, n.where(), ": grouped transposed convolution is not supported");
  return {};
}
/// Input and output 4-D (NHWC): max pooling (which pads asymmetric inputs explicitly with -inf, the exporter's
/// ceil_mode), global pooling, resize.
inline Status nhwc(const Graph& g, const Node& n) {
  if (detail::rank(g, n.inputs[0]) != 4 || detail::rank(g, n.output) != 4)
    return fail(Error::InvalidProgram, n.where(), ": input and output must be 4-D (NHWC)");
  return {};
}
/// Average pooling: its divisor excludes padding, which explicit padding cannot express.
inline Status avg_pooling(const Graph& g, const Node& n) {
  ETRT_CHECK_OK(nhwc(g, n));
  if (!detail::symmetric_padding(n)) return fail(Error::NotSupported, n.where(), ": asymmetric padding is not supported");
  return {};
}
inline Status transpose(const Graph& g, const Node& n) {
  if (static_cast<int64_t>(n.ints.size()) != detail::rank(g, n.inputs[0]))
    return fail(Error::InvalidProgram, n.where(), ": perm has ", n.ints.size(), " dims, input has ",
                detail::rank(g, n.inputs[0]));
  std::vector<bool> seen(n.ints.size());
  for (int64_t p : n.ints) {
    if (p < 0 || p >= static_cast<int64_t>(n.ints.size()) || seen[p])
      return fail(Error::InvalidProgram, n.where(), ": perm ", shape_str(n.ints), " is not a permutation");
    seen[p] = true;
  }
  return {};
}
/// Kinds run as a byte copy (reshape, convert, copy, clamp): the element counts must agree.
inline Status same_size(const Graph& g, const Node& n) {
  const Value &in = g.values[n.inputs[0]], &out = g.values[n.output];
  if (in.numel != out.numel)
    return fail(Error::InvalidProgram, n.where(), ": input has ", in.numel, " elements, output ", out.numel);
  return {};
}
inline Status slice(const Graph& g, const Node& n) {
  const Value& in = g.values[n.inputs[0]];
  if (static_cast<int64_t>(n.ints.size()) != 2 * detail::rank(g, n.inputs[0]))
    return fail(Error::InvalidProgram, n.where(), ": offsets/sizes do not match the input rank");
  for (size_t d = 0; d < in.dims.size(); ++d) {
    const int64_t off = n.ints[d], size = n.ints[in.dims.size() + d];
    if (off > in.dims[d] || (size != 0 && size > in.dims[d] - off))
      return fail(Error::InvalidProgram, n.where(), ": slice [", off, ", +", size, ") outside dim ", d, " of size ",
                  in.dims[d]);
  }
  return {};
}
inline Status constant_pad(const Graph& g, const Node& n) {
  if (static_cast<int64_t>(n.ints.size()) != 2 * detail::rank(g, n.inputs[0]))
    return fail(Error::InvalidProgram, n.where(), ": paddings do not match the input rank");
  return {};
}
inline Status concatenate(const Graph& g, const Node& n) {
  if (n.axis >= g.values[n.output].dims.size())
    return fail(Error::InvalidProgram, n.where(), ": axis ", n.axis, " out of range");
  return {};
}
inline Status batch_matmul(const Graph& g, const Node& n) {
  if (n.flags != 0) return fail(Error::NotSupported, n.where(), ": flags ", n.flags, " (transposed B) not supported");
  const Value &a = g.values[n.inputs[0]], &b = g.values[n.inputs[1]];
  if (a.dims.size() < 3 || b.dims.size() != a.dims.size() || !std::equal(a.dims.begin(), a.dims.end() - 2, b.dims.begin()))
    return fail(Error::NotSupported, n.where(), ": only equal-batch matrix products of rank >= 3 are supported (",
                shape_str(a.dims), " x ", shape_str(b.dims), ")");
  return {};
}
inline Status argmax_pooling(const Graph& g, const Node& n) {
  using detail::rank;
  if (rank(g, n.inputs[0]) != 4 || rank(g, n.output) != 4 || rank(g, n.index_output) != 4)
    return fail(Error::InvalidProgram, n.where(), ": input and outputs must be 4-D (NHWC)");
  if (g.values[n.output].datatype != Datatype::Fp32 || g.values[n.index_output].datatype != Datatype::Int32)
    return fail(Error::NotSupported, n.where(), ": only fp32 values with int32 indices are supported");
  if (g.values[n.output].dims != g.values[n.index_output].dims)
    return fail(Error::InvalidProgram, n.where(), ": value output ", shape_str(g.values[n.output].dims),
                " and index output ", shape_str(g.values[n.index_output].dims), " differ");
  // Positions are held as floats until written out (argmax_pooling.h): exact up to 2^24.
  if (uint64_t{n.conv[4]} * n.conv[5] < 2 || uint64_t{n.conv[4]} * n.conv[5] > (1u << 24))
    return fail(Error::InvalidProgram, n.where(), ": pooling ", n.conv[4], "x", n.conv[5],
                " must have 2 to 2^24 positions");
  for (int s = 0; s < 4; ++s)
    if (n.conv[s] > (1u << 16)) return fail(Error::InvalidProgram, n.where(), ": padding ", n.conv[s], " is too large");
  return {};
}
inline Status sdpa(const Graph& g, const Node& n) {
  using detail::rank;
  const int64_t rq = rank(g, n.inputs[0]), rk = rank(g, n.inputs[1]);
  if (rq < 3 || (rk != rq && rk != rq - 1) || rank(g, n.inputs[2]) != rk || rank(g, n.inputs[3]) != 1 ||
      rank(g, n.inputs[4]) != 2 || rank(g, n.output) != rq)
    return fail(Error::InvalidProgram, n.where(), ": query [*, H, T, C], key/value [*, (H,) U, C|D], scale [C], ",
                "mask [T, U] and output [*, H, T, D] have the wrong ranks (", shape_str(g.values[n.inputs[0]].dims),
                ", ", shape_str(g.values[n.inputs[1]].dims), ", ", shape_str(g.values[n.inputs[2]].dims), ", ",
                shape_str(g.values[n.inputs[3]].dims), ", ", shape_str(g.values[n.inputs[4]].dims), ")");
  return {};
}

}  // namespace checks

}  // namespace etrt::xnnpack
