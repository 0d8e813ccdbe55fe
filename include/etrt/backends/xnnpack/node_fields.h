// How each XNNPACK node kind lays out its fields in the XNode union's table (schema.fbs, field order; the table is
// read through the bounds-checked flatbuffer reader, and a read past the buffer marks the reader failed, which
// parse_payload reports). One function per layout; the node kinds' table (node_table.h) names each kind's layout.
#pragma once

#include <cstdint>
#include <string_view>

#include "etrt/backends/xnnpack/graph.h"
#include "etrt/format/flatbuffer.h"

namespace etrt::xnnpack {

/// A node's union table, read with its kind's name as the context of any error.
struct NodeFields {
  const fb::Table& t;
  std::string_view kind;

  uint32_t u32(int slot) const { return t.scalar<uint32_t>(slot, 0, kind); }
  float f32(int slot, std::string_view what) const { return t.scalar<float>(slot, 0.f, what); }
  /// Appends a uint32 vector field to `n.ints`; returns its length.
  uint32_t ints(int slot, std::string_view what, Node& n) const {
    const auto v = t.vector<uint32_t>(slot, what);
    for (uint32_t i = 0; i < v.size(); ++i) n.ints.push_back(v[i]);
    return static_cast<uint32_t>(v.size());
  }
};

using FieldsFn = Status (*)(const NodeFields&, Node&);

namespace fields {

/// _XNNNode2x1: input1, input2, output, flags.
inline Status node2x1(const NodeFields& f, Node& n) {
  n.inputs = {f.u32(0), f.u32(1)}, n.output = f.u32(2), n.flags = f.u32(3);
  return {};
}
/// _XNNNode1x1: input, output, flags.
inline Status node1x1(const NodeFields& f, Node& n) {
  n.inputs = {f.u32(0)}, n.output = f.u32(1), n.flags = f.u32(2);
  return {};
}
/// XNNELU / XNNLeakyReLU: alpha (or negative_slope), then a 1x1 node.
inline Status scalar_then_1x1(const NodeFields& f, Node& n) {
  n.fparam = f.f32(0, "alpha/negative_slope");
  n.inputs = {f.u32(1)}, n.output = f.u32(2), n.flags = f.u32(3);
  return {};
}
/// XNNFullyConnected: input, filter, bias (absent: 0xFFFFFFFF), output, flags.
inline Status fully_connected(const NodeFields& f, Node& n) {
  n.inputs = {f.u32(0), f.u32(1), f.u32(2)}, n.output = f.u32(3), n.flags = f.u32(4);
  n.optional_input = 2;
  return {};
}
/// XNNStaticTranspose: num_dims, perm, input, output, flags.
inline Status transpose(const NodeFields& f, Node& n) {
  const uint32_t nd = f.u32(0);
  if (f.ints(1, "XNNStaticTranspose.perm", n) != nd)
    return fail(Error::InvalidProgram, n.where(), ": perm length != num_dims");
  n.inputs = {f.u32(2)}, n.output = f.u32(3), n.flags = f.u32(4);
  return {};
}
/// XNNStaticReshape: num_dims, new_shape, input, output, flags.
inline Status reshape(const NodeFields& f, Node& n) {
  f.ints(1, "XNNStaticReshape.new_shape", n);
  n.inputs = {f.u32(2)}, n.output = f.u32(3), n.flags = f.u32(4);
  return {};
}
/// XNNStaticSlice: num_dims, offsets, sizes, input, output, flags.
inline Status slice(const NodeFields& f, Node& n) {
  const uint32_t nd = f.u32(0);
  const uint32_t a = f.ints(1, "XNNStaticSlice.offsets", n), b = f.ints(2, "XNNStaticSlice.sizes", n);
  if (a != nd || b != nd) return fail(Error::InvalidProgram, n.where(), ": offsets/sizes length != num_dims");
  n.inputs = {f.u32(3)}, n.output = f.u32(4), n.flags = f.u32(5);
  return {};
}
/// XNNStaticConstantPad: pre_paddings, post_paddings, padding_value, input, output, flags.
inline Status constant_pad(const NodeFields& f, Node& n) {
  const uint32_t a = f.ints(0, "XNNStaticConstantPad.pre_paddings", n);
  const uint32_t b = f.ints(1, "XNNStaticConstantPad.post_paddings", n);
  if (a != b) return fail(Error::InvalidProgram, n.where(), ": pre/post paddings lengths differ");
  n.fparam = f.f32(2, "padding_value");
  n.inputs = {f.u32(3)}, n.output = f.u32(4), n.flags = f.u32(5);
  return {};
}
/// XNNStaticResizeBilinear2D: new_height, new_width, input, output, flags.
inline Status resize(const NodeFields& f, Node& n) {
  n.conv[0] = f.u32(0), n.conv[1] = f.u32(1);
  n.inputs = {f.u32(2)}, n.output = f.u32(3), n.flags = f.u32(4);
  return {};
}
/// _XNNNodeConv: 15 parameters (padding top, right, bottom, left; kernel h, w; subsampling h, w; dilation h, w;
/// group input channels, group output channels, groups; adjustment h, w), input, filter, bias (absent:
/// 0xFFFFFFFF), output, flags.
inline Status conv(const NodeFields& f, Node& n) {
  for (int s = 0; s < 15; ++s) n.conv[s] = f.u32(s);
  n.inputs = {f.u32(15), f.u32(16), f.u32(17)}, n.output = f.u32(18), n.flags = f.u32(19);
  n.optional_input = 2;
  return {};
}
/// _XNNPooling2D: 10 parameters (padding top, right, bottom, left; pooling h, w; stride h, w; dilation h, w), input,
/// output, flags.
inline Status pooling(const NodeFields& f, Node& n) {
  for (int s = 0; s < 10; ++s) n.conv[s] = f.u32(s);
  n.inputs = {f.u32(10)}, n.output = f.u32(11), n.flags = f.u32(12);
  return {};
}
/// _XNNCat: axis, input1..input4, output, flags, input5 (appended to the schema later); K of them are used.
template <int K>
Status concatenate(const NodeFields& f, Node& n) {
  n.axis = f.u32(0);
  for (int i = 0; i < K; ++i) n.inputs.push_back(f.u32(i < 4 ? 1 + i : 7));
  n.output = f.u32(5), n.flags = f.u32(6);
  return {};
}
/// XNNArgMaxPooling2d: padding top, right, bottom, left; pooling height, width; input, output, index output, flags.
inline Status argmax_pooling(const NodeFields& f, Node& n) {
  for (int s = 0; s < 6; ++s) n.conv[s] = f.u32(s);
  n.inputs = {f.u32(6)}, n.output = f.u32(7), n.index_output = f.u32(8), n.flags = f.u32(9);
  n.has_index_output = true;
  return {};
}
/// XNNScaledDotProductAttention: query, key, value, scale, mask, output, flags.
inline Status sdpa(const NodeFields& f, Node& n) {
  n.inputs = {f.u32(0), f.u32(1), f.u32(2), f.u32(3), f.u32(4)}, n.output = f.u32(5), n.flags = f.u32(6);
  return {};
}

}  // namespace fields

}  // namespace etrt::xnnpack
