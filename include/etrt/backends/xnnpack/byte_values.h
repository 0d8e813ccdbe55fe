// Which of a graph's statically quantized intermediates are held as bytes between the nodes that write and read them.
//
// Note [byte activations]: a PT2E-quantized CNN's activations are int8 from node to node; held as floats on their
// grid (Note [xnnpack quantized values]) each takes four times the memory traffic, and an int8 convolution turns its
// input back into bytes on every call. An intermediate quantized per tensor (qint8 or quint8) is instead held as
// bytes, byte = q + offset (offset 128 for qint8, 0 for quint8, so byte 0..255 and the real number is
// (byte - zero) x scale with zero = zero_point + offset: the bytes the int8 GEMM reads, Note [int8 gemm]), when the
// node storing it and every node reading it have a byte form:
//   - ByteForm::Gemm (a convolution or fully-connected node on the int8 GEMM): reads its input as bytes in place of
//     quantizing it, and stores its output (or, where a Clamp/Convert runs in its block finish, that node's output)
//     as bytes from the registers; input and output independently;
//   - ByteForm::Binary (Add, Multiply, Subtract onto a per-tensor grid, of equal shapes or one operand repeating
//     a row): each operand and the output either way (fast::binary_mixed);
//   - ByteForm::Joint (a depthwise convolution on the byte kernel, Note [byte depthwise]): only with its input and
//     its output both held as bytes;
//   - ByteForm::Reads (GlobalAvgPooling2d): its input as bytes, its output as floats;
//   - ByteForm::Writes (a Convert of floats onto a per-tensor grid: a quantized model's input): its input as floats,
//     its output as bytes where its readers take them;
//   - ByteForm::Joint also for a StaticTranspose whose input and output share one grid (bytes moved as bytes) and
//     a MaxPooling2d whose do (the largest byte stands for the largest real: nhwc::max_pool_bytes);
//   - an activation chain (Note [xnnpack activation chain]) as a Gemm: its input and its output each either way.
// The values are the float path's: a byte is the grid point's step count, the same integer the float path stores
// multiplied by the scale, and every byte form computes from (byte - zero) x scale what the float path computes
// from that float (the depthwise sum is exact where the float path rounded: Note [byte depthwise]). Externals,
// constants, values a fused node, an activation chain or any other kind reads, and values of fewer than kMinBytes
// elements stay floats. A byte value keeps its float-sized slot in the arena; the 64 bytes past its end in that slot
// are the readable tail the int8 GEMM's readers need (nhwc::conv_input_bytes).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "etrt/backends/xnnpack/graph.h"
#include "etrt/backends/xnnpack/packed_filters.h"

namespace etrt::xnnpack {

/// How a node kind can hold its quantized inputs and output as bytes (Note [byte activations]): Gemm, its input 0
/// and its output each either way; Binary, its inputs 0 and 1 and its output each either way; Joint, its input 0
/// and its output only together; Reads, its input 0 either way, its output as floats; Writes, its input as floats,
/// its output either way.
enum class ByteForm : uint8_t { None, Gemm, Binary, Joint, Reads, Writes };

/// Smallest value held as bytes: its float-sized slot then has room for the 64-byte readable tail.
inline constexpr int64_t kMinBytes = 64;

/// The byte of the real number 0 of a value held as bytes (Note [byte activations]).
inline float byte_zero(const Value& v) {
  return static_cast<float>(v.quant.zero_point + (v.datatype == Datatype::QInt8 ? 128 : 0));
}

/// Whether value v could be held as bytes as far as the value itself goes.
inline bool byte_candidate(const Value& v) {
  return v.present && (v.datatype == Datatype::QInt8 || v.datatype == Datatype::QUInt8) &&
         v.quant.kind == QuantKind::PerTensor && v.constant.empty() &&
         !(v.flags & (kValueExternalInput | kValueExternalOutput)) && v.numel >= kMinBytes && v.quant.scale > 0.f &&
         std::isfinite(1.f / v.quant.scale) && v.quant.zero_point + (v.datatype == Datatype::QInt8 ? 128 : 0) >= 0 &&
         v.quant.zero_point + (v.datatype == Datatype::QInt8 ? 128 : 0) <= 255;
}

/// The value node i stores: its output, or that of the Clamp/Convert its block finish runs (Note [xnnpack block
/// finish]).
inline uint32_t stored_output(const Graph& g, const PreparedNode& p, size_t i) {
  return p.finish.next ? p.finish.dst : g.nodes[i].output;
}

/// The inputs a node of this form may read as bytes: input 0, and input 1 of a Binary node; none of a Writes node.
inline size_t byte_inputs(const Node& n, ByteForm form) {
  if (form == ByteForm::None || form == ByteForm::Writes) return 0;
  return std::min<size_t>(n.inputs.size(), form == ByteForm::Binary ? 2 : 1);
}

/// By value id: held as bytes. By node position: `forms`, the form the node can take as prepared (None where its
/// kind has none or its preparation did not reach the byte kernels); `stored`, the value it stores (stored_output,
/// or the output of the activation chain it heads); `in_writer`, the node runs inside another (a block finish's
/// reader, an activation chain's node past its head), which reads its inputs and stores its output.
inline std::vector<bool> byte_values(const Graph& g, std::span<const ByteForm> forms, std::span<const uint32_t> stored,
                                     const std::vector<bool>& in_writer) {
  std::vector<bool> bytes(g.values.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (in_writer[i] || forms[i] == ByteForm::None) continue;
    const uint32_t out = stored[i];
    if (out < g.values.size()) bytes[out] = byte_candidate(g.values[out]);
  }
  for (bool changed = true; changed;) {
    changed = false;
    const auto drop = [&](uint32_t id) {
      if (id < bytes.size() && bytes[id]) bytes[id] = false, changed = true;
    };
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (in_writer[i]) continue;  // what it reads and writes, the node it runs in does
      const Node& n = g.nodes[i];
      const ByteForm form = forms[i];
      const size_t first_other = form == ByteForm::None ? 0 : byte_inputs(n, form);
      for (size_t k = first_other; k < n.inputs.size(); ++k) drop(n.inputs[k]);  // read as floats
      if (form == ByteForm::None || form == ByteForm::Reads) {
        drop(n.output);
        continue;
      }
      if (stored[i] != n.output) drop(n.output);  // an activation chain's head: its own output is the chain's float
      if (form != ByteForm::Joint) continue;
      const uint32_t out = stored[i];
      bool all = out < bytes.size() && bytes[out];
      for (size_t k = 0; k < first_other; ++k) all = all && n.inputs[k] < bytes.size() && bytes[n.inputs[k]];
      if (all) continue;
      drop(out);
      for (size_t k = 0; k < first_other; ++k) drop(n.inputs[k]);
    }
  }
  return bytes;
}

}  // namespace etrt::xnnpack
