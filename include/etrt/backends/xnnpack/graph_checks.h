// What the XNNPACK executor checks of a validated Graph before it runs it (Note: each case of check_node says what
// run_node assumes) and the scratch each node needs (Note [xnnpack scratch]).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "etrt/backends/xnnpack/payload.h"
#include "etrt/core/evalue.h"  // Scalar

namespace etrt::xnnpack {

namespace detail {

inline Scalar fscalar(double d) {
  Scalar s;
  s.v = d;
  return s;
}
inline Scalar iscalar(int64_t i) {
  Scalar s;
  s.v = i;
  return s;
}

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

inline Result<uint64_t> scratch_floats(const Graph& g, const Node& n) {
  using K = NodeKind;
  const auto& in = g.values[n.inputs[0]];
  uint64_t need = 0;
  const bool spatial = n.kind == K::Conv2d || n.kind == K::DepthwiseConv2d || n.kind == K::MaxPooling2d;
  if (spatial) {
    const SpatialPad p = split_padding(n);
    if (p.explicit_pad()) {
      const auto& d = in.dims;  // NHWC, 4-D: check_node
      if (p.top + p.bottom > std::max<int64_t>(d[1], 1) || p.left + p.right > std::max<int64_t>(d[2], 1))
        return fail(Error::InvalidProgram, n.where(), ": asymmetric padding (top ", n.conv[0], ", bottom ", n.conv[2],
                    ", left ", n.conv[3], ", right ", n.conv[1], ") exceeds the input ", shape_str(d));
      const std::array<int64_t, 4> padded{d[0], d[1] + p.top + p.bottom, d[2] + p.left + p.right, d[3]};
      const int64_t e = product(padded);
      if (e < 0) return fail(Error::InvalidProgram, n.where(), ": padded input overflows");
      need = static_cast<uint64_t>(e);
    }
  }
  if (n.kind == K::MaxPooling2d) {
    need = (need + 1) / 2 * 2;  // the int64 indices follow, 8-byte aligned
    need += 2 * static_cast<uint64_t>(g.values[n.output].numel);
  }
  if (n.kind == K::PReLU) need = static_cast<uint64_t>(in.numel);
  if (n.kind == K::ScaledDotProductAttention) need = static_cast<uint64_t>(g.values[n.inputs[1]].numel);  // >= U logits
  if (n.kind == K::StaticSlice) need = 2 * static_cast<uint64_t>(in.numel);  // two intermediates taking turns
  return need;
}

/// Checks what depends only on the graph, so execute can rely on it (Note: each case says what run_node assumes).
inline Status check_node(const Graph& g, const Node& n) {
  using K = NodeKind;
  const Value& out = g.values[n.output];
  const Value& in0 = g.values[n.inputs[0]];
  const auto rank = [&](uint32_t id) { return static_cast<int64_t>(g.values[id].dims.size()); };
  switch (n.kind) {
    case K::Conv2d: case K::DepthwiseConv2d: case K::ConvTranspose2d: {
      if (rank(n.inputs[0]) != 4 || rank(n.output) != 4 || rank(n.inputs[1]) != 4)
        return fail(Error::InvalidProgram, n.where(), ": input, filter and output must be 4-D (NHWC / OHWI)");
      // Conv2d and DepthwiseConv2d pad asymmetric inputs explicitly (run_node); a transposed conv cannot.
      if (n.kind == K::ConvTranspose2d && (n.conv[0] != n.conv[2] || n.conv[1] != n.conv[3]))
        return fail(Error::NotSupported, n.where(), ": asymmetric padding (top ", n.conv[0], ", bottom ", n.conv[2],
                    ", left ", n.conv[3], ", right ", n.conv[1], ") is not supported");
      if (n.conv[12] == 0) return fail(Error::InvalidProgram, n.where(), ": groups is 0");
      if (n.kind == K::ConvTranspose2d && n.conv[12] != 1)
        return fail(Error::NotSupported, n.where(), ": grouped transposed convolution is not supported");
      if (n.inputs[2] != kNoValue && rank(n.inputs[2]) != 1)
        return fail(Error::InvalidProgram, n.where(), ": bias must be 1-D");
      break;
    }
    case K::MaxPooling2d: case K::AvgPooling2d:
      if (rank(n.inputs[0]) != 4 || rank(n.output) != 4)
        return fail(Error::InvalidProgram, n.where(), ": input and output must be 4-D (NHWC)");
      // Max pooling pads asymmetric inputs explicitly with -inf (the exporter's ceil_mode); average pooling's
      // divisor excludes padding, which explicit padding cannot express.
      if (n.kind == K::AvgPooling2d && (n.conv[0] != n.conv[2] || n.conv[1] != n.conv[3]))
        return fail(Error::NotSupported, n.where(), ": asymmetric padding is not supported");
      break;
    case K::GlobalAvgPooling2d:
    case K::StaticResizeBilinear2D:
      if (rank(n.inputs[0]) != 4 || rank(n.output) != 4)
        return fail(Error::InvalidProgram, n.where(), ": input and output must be 4-D (NHWC)");
      break;
    case K::StaticTranspose: {
      if (static_cast<int64_t>(n.ints.size()) != rank(n.inputs[0]))
        return fail(Error::InvalidProgram, n.where(), ": perm has ", n.ints.size(), " dims, input has ", rank(n.inputs[0]));
      std::vector<bool> seen(n.ints.size());
      for (int64_t p : n.ints) {
        if (p < 0 || p >= static_cast<int64_t>(n.ints.size()) || seen[p])
          return fail(Error::InvalidProgram, n.where(), ": perm ", shape_str(n.ints), " is not a permutation");
        seen[p] = true;
      }
      break;
    }
    case K::StaticReshape: case K::Convert: case K::Copy: case K::Clamp:
      // run_node copies bytes: the element counts must agree.
      if (in0.numel != out.numel)
        return fail(Error::InvalidProgram, n.where(), ": input has ", in0.numel, " elements, output ", out.numel);
      break;
    case K::StaticSlice:
      if (static_cast<int64_t>(n.ints.size()) != 2 * rank(n.inputs[0]))
        return fail(Error::InvalidProgram, n.where(), ": offsets/sizes do not match the input rank");
      for (size_t d = 0; d < in0.dims.size(); ++d) {
        const int64_t off = n.ints[d], size = n.ints[in0.dims.size() + d];
        if (off > in0.dims[d] || (size != 0 && size > in0.dims[d] - off))
          return fail(Error::InvalidProgram, n.where(), ": slice [", off, ", +", size, ") outside dim ", d,
                      " of size ", in0.dims[d]);
      }
      break;
    case K::StaticConstantPad:
      if (static_cast<int64_t>(n.ints.size()) != 2 * rank(n.inputs[0]))
        return fail(Error::InvalidProgram, n.where(), ": paddings do not match the input rank");
      break;
    case K::Concatenate2: case K::Concatenate3: case K::Concatenate4: case K::Concatenate5:
      if (n.axis >= out.dims.size()) return fail(Error::InvalidProgram, n.where(), ": axis ", n.axis, " out of range");
      break;
    case K::BatchMatrixMultiply: {
      if (n.flags != 0) return fail(Error::NotSupported, n.where(), ": flags ", n.flags, " (transposed B) not supported");
      const Value& b = g.values[n.inputs[1]];
      if (in0.dims.size() < 3 || b.dims.size() != in0.dims.size() ||
          !std::equal(in0.dims.begin(), in0.dims.end() - 2, b.dims.begin()))
        return fail(Error::NotSupported, n.where(), ": only equal-batch matrix products of rank >= 3 are supported (",
                    shape_str(in0.dims), " x ", shape_str(b.dims), ")");
      break;
    }
    case K::ArgMaxPooling2d:
      if (rank(n.inputs[0]) != 4 || rank(n.output) != 4 || rank(n.index_output) != 4)
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
      break;
    case K::ScaledDotProductAttention: {
      const int64_t rq = rank(n.inputs[0]), rk = rank(n.inputs[1]);
      if (rq < 3 || (rk != rq && rk != rq - 1) || rank(n.inputs[2]) != rk || rank(n.inputs[3]) != 1 ||
          rank(n.inputs[4]) != 2 || rank(n.output) != rq)
        return fail(Error::InvalidProgram, n.where(), ": query [*, H, T, C], key/value [*, (H,) U, C|D], scale [C], ",
                    "mask [T, U] and output [*, H, T, D] have the wrong ranks (", shape_str(in0.dims), ", ",
                    shape_str(g.values[n.inputs[1]].dims), ", ", shape_str(g.values[n.inputs[2]].dims), ", ",
                    shape_str(g.values[n.inputs[3]].dims), ", ", shape_str(g.values[n.inputs[4]].dims), ")");
      break;
    }
    default:
      break;
  }
  // int32 values are ArgMaxPooling2d's indices; every kernel here reads floats.
  for (const uint32_t id : n.inputs)
    if (id != kNoValue && g.values[id].datatype == Datatype::Int32)
      return fail(Error::NotSupported, n.where(), ": input value ", id, " is int32; only fp32 and quantized inputs are supported");
  if (n.kind != K::ArgMaxPooling2d && g.values[n.output].datatype == Datatype::Int32)
    return fail(Error::NotSupported, n.where(), ": output value ", n.output, " is int32");
  return {};
}

}  // namespace detail

}  // namespace etrt::xnnpack
