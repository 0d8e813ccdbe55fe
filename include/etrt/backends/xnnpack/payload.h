// The XNNPACK delegate's payload as the ExecuTorch exporter writes it (backends/xnnpack/serialization):
//
//   bytes 0..4   unused (the flatbuffer root offset slot of older payloads)
//   bytes 4..8   magic "XH00"
//   bytes 8..10  header length (u16, 30 for this version)
//   bytes 10..14 flatbuffer offset (u32)    bytes 14..18 flatbuffer size (u32)
//   bytes 18..22 constant data offset (u32) bytes 22..30 constant data size (u64)
//
// The flatbuffer is an XNNGraph (schema.fbs, identifier "XN01"). Constants are found through
// XNNGraph.constant_data[constant_buffer_idx]: either a named_key into the program's named data (what
// to_executorch() writes today) or an offset/size into the payload's own constant data section. Index 0 means
// "no constant". Field slots below follow the schema's field order (a union field takes two slots: type, value).
//
// Everything is validated here, once: value ids, node operand ids, dims, constants' sizes. The executor relies on it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etrt/core/result.h"
#include "etrt/core/tensor.h"  // shape_str
#include "etrt/backends/xnnpack/quant_params.h"
#include "etrt/format/flatbuffer.h"

namespace etrt::xnnpack {

inline constexpr std::string_view kXnnpackBackendId = "XnnpackBackend";
inline constexpr uint32_t kNoValue = std::numeric_limits<uint32_t>::max();
inline constexpr uint32_t kMaxXnnDims = 6;  // XNN_MAX_TENSOR_DIMS

// XNode union type codes: 1-based position in schema.fbs's XNodeUnion.
enum class NodeKind : uint8_t {
  Add = 1, FullyConnected, Softmax, Sigmoid, StaticTranspose, Clamp, Conv2d, Div, StaticResizeBilinear2D,
  StaticConstantPad, AvgPooling2d, Minimum, DepthwiseConv2d, MaxPooling2d, Multiply, Subtract, Floor, Convert,
  GlobalAvgPooling2d, StaticReshape, ArgMaxPooling2d, SquareRoot, Ceiling, Hardswish, LeakyReLU, Maximum, Negate,
  Square, ELU, Abs, PReLU, Concatenate2, Concatenate3, Concatenate4, StaticSlice, ScaledDotProductAttention,
  BatchMatrixMultiply, Concatenate5, ConvTranspose2d, ReciprocalSquareRoot, Log, Gelu, Tanh, Exp, Sin, Copy, Cos,
};
inline constexpr uint8_t kLastNodeKind = static_cast<uint8_t>(NodeKind::Cos);

inline std::string_view node_kind_name(uint8_t k) {
  static constexpr std::string_view names[] = {
      "NONE", "XNNAdd", "XNNFullyConnected", "XNNSoftmax", "XNNSigmoid", "XNNStaticTranspose", "XNNClamp",
      "XNNConv2d", "XNNDiv", "XNNStaticResizeBilinear2D", "XNNStaticConstantPad", "XNNAvgPooling2d", "XNNMinimum",
      "XNNDepthwiseConv2d", "XNNMaxPooling2d", "XNNMultiply", "XNNSubtract", "XNNFloor", "XNNConvert",
      "XNNGlobalAvgPooling2d", "XNNStaticReshape", "XNNArgMaxPooling2d", "XNNSquareRoot", "XNNCeiling",
      "XNNHardswish", "XNNLeakyReLU", "XNNMaximum", "XNNNegate", "XNNSquare", "XNNELU", "XNNAbs", "XNNPReLU",
      "XNNConcatenate2", "XNNConcatenate3", "XNNConcatenate4", "XNNStaticSlice", "XNNScaledDotProductAttention",
      "XNNBatchMatrixMultiply", "XNNConcatenate5", "XNNConvTranspose2d", "XNNReciprocalSquareRoot", "XNNLog",
      "XNNGelu", "XNNTanh", "XNNExp", "XNNSin", "XNNCopy", "XNNCos"};
  return k <= kLastNodeKind ? names[k] : std::string_view("unknown");
}

inline constexpr int16_t kDatatypeFp32 = static_cast<int16_t>(Datatype::Fp32);
// XNNTensorValue.flags bits (XNN_VALUE_FLAG_EXTERNAL_INPUT / _OUTPUT).
inline constexpr uint32_t kValueExternalInput = 1;
inline constexpr uint32_t kValueExternalOutput = 2;
// Node flags the exporter sets: XNN_FLAG_TRANSPOSE_WEIGHTS (FullyConnected), XNN_FLAG_TRANSPOSE_B (bmm),
// XNN_FLAG_ALIGN_CORNERS (resize).
inline constexpr uint32_t kFlagTransposeWeights = 0x1;
inline constexpr uint32_t kFlagAlignCorners = 0x8;

struct Value {
  std::vector<int64_t> dims;
  int64_t numel = 1;
  uint32_t external_id = kNoValue;  // index into the delegate's args when flags mark it external
  uint32_t flags = 0;
  std::span<const uint8_t> constant;  // non-empty for constants (constant_bytes(datatype, dims), validated)
  Datatype datatype = Datatype::Fp32;
  Quant quant;                        // QuantKind::None for fp32 values
  bool present = false;
};

struct Node {
  NodeKind kind{};
  uint32_t index = 0;   // position in xnodes, for messages
  std::vector<uint32_t> inputs;  // value ids, validated (kNoValue only for an absent bias)
  uint32_t output = kNoValue;
  uint32_t index_output = kNoValue;  // ArgMaxPooling2d's second output: the position of each maximum (int32)
  uint32_t flags = 0;
  // Kind-specific parameters.
  std::vector<int64_t> ints;    // perm / new_shape / offsets (StaticSlice: offsets then sizes) / pre then post pads
  uint32_t conv[15] = {};       // _XNNNodeConv / _XNNPooling2D leading fields, in schema order
  uint32_t axis = 0;            // concatenation axis; resize: new_height, new_width in conv[0..1]
  float fparam = 0;             // ELU alpha, LeakyReLU slope, pad value
  bool has_min_max = false;
  float out_min = -std::numeric_limits<float>::infinity();
  float out_max = std::numeric_limits<float>::infinity();

  std::string where() const { return cat("XNNPACK node ", index, " (", node_kind_name(static_cast<uint8_t>(kind)), ")"); }
};

struct Graph {
  std::vector<Value> values;  // indexed by id_out
  std::vector<Node> nodes;
  std::vector<uint32_t> input_ids, output_ids;
  uint32_t num_externs = 0;
};

/// Looks up a blob of the program's named data by key.
using NamedDataLookup = std::function<Result<std::span<const uint8_t>>(std::string_view key)>;  // = BackendInterface::NamedDataFn

namespace detail {

inline uint32_t le32(const uint8_t* p) { return fb::load_le<uint32_t>(p); }

// Field slots (schema field order; unions take two).
namespace slot {
inline constexpr int kGraphXnodes = 1, kGraphXvalues = 2, kGraphNumExterns = 3, kGraphInputIds = 4,
                     kGraphOutputIds = 5, kGraphConstantData = 8;
inline constexpr int kNodeType = 0, kNodeUnion = 1, kNodeMinMax = 3;
inline constexpr int kValueType = 0, kValueUnion = 1;
inline constexpr int kTvDatatype = 0, kTvNumDims = 1, kTvDims = 2, kTvConstIdx = 3, kTvExternalId = 4,
                     kTvFlags = 5, kTvIdOut = 6;
inline constexpr int kCdOffset = 0, kCdSize = 1, kCdNamedKey = 2;
}  // namespace slot

}  // namespace detail

struct PayloadSections {
  std::span<const uint8_t> flatbuffer;
  std::span<const uint8_t> constant_data;
};

/// Splits the payload by its "XH00" header; every offset and size is checked against the payload.
inline Result<PayloadSections> parse_header(std::span<const uint8_t> payload) {
  constexpr size_t kHeaderBytes = 30;
  if (payload.size() < kHeaderBytes)
    return fail(Error::InvalidProgram, "XNNPACK payload: ", payload.size(), " bytes is shorter than its ",
                kHeaderBytes, "-byte header");
  if (std::string_view(reinterpret_cast<const char*>(payload.data()) + 4, 4) != "XH00")
    return fail(Error::InvalidProgram, "XNNPACK payload: header magic is not 'XH00'");
  const uint16_t header_len = fb::load_le<uint16_t>(payload.data() + 8);
  if (header_len < kHeaderBytes)
    return fail(Error::InvalidProgram, "XNNPACK payload: header length ", header_len, " < ", kHeaderBytes);
  const uint64_t fb_off = detail::le32(payload.data() + 10), fb_size = detail::le32(payload.data() + 14);
  const uint64_t cd_off = detail::le32(payload.data() + 18);
  const uint64_t cd_size = fb::load_le<uint64_t>(payload.data() + 22);
  const uint64_t n = payload.size();
  if (fb_size == 0 || fb_off > n || fb_size > n - fb_off)
    return fail(Error::InvalidProgram, "XNNPACK payload: flatbuffer [", fb_off, ", +", fb_size,
                ") is outside the ", n, "-byte payload");
  if (cd_off > n || cd_size > n - cd_off)
    return fail(Error::InvalidProgram, "XNNPACK payload: constant data [", cd_off, ", +", cd_size,
                ") is outside the ", n, "-byte payload");
  return PayloadSections{payload.subspan(fb_off, fb_size), payload.subspan(cd_off, cd_size)};
}

namespace detail {

inline Status check_value_id(const Graph& g, uint32_t id, const Node& node, std::string_view what) {
  if (id >= g.values.size() || !g.values[id].present)
    return fail(Error::InvalidProgram, node.where(), ": ", what, " id ", id, " does not name a value (",
                g.values.size(), " values)");
  return {};
}

/// The XNNTensorValue of an XValue: the union's table itself, or the tensor_value of a quantized one.
inline fb::Table tensor_table(const fb::Reader& r, const fb::Table& xv, uint8_t type) {
  const fb::Table u = xv.table(slot::kValueUnion, "XValue.xvalue_union");
  if (type != 2 || !r.ok() || !u.present()) return u;
  return u.table(qslot::kQtvTensor, "XNNQuantizedTensorValue.tensor_value");
}

inline Status parse_value(const fb::Reader& r, const fb::Table& xv, uint32_t index, Graph& g,
                          const std::vector<std::span<const uint8_t>>& constants) {
  const uint8_t type = xv.scalar<uint8_t>(slot::kValueType, 0, "XValue.xvalue_union_type");
  if (!r.ok()) return r.take_failure();
  if (type != 1 && type != 2) return fail(Error::NotSupported, "XNNPACK value ", index, " has unknown kind ", int(type));
  const fb::Table tv = tensor_table(r, xv, type);
  const int16_t dt = tv.scalar<int16_t>(slot::kTvDatatype, 0, "XNNTensorValue.datatype");
  const auto dims = tv.vector<uint32_t>(slot::kTvDims, "XNNTensorValue.dims");
  const uint32_t num_dims = tv.scalar<uint32_t>(slot::kTvNumDims, 0, "XNNTensorValue.num_dims");
  const uint32_t cidx = tv.scalar<uint32_t>(slot::kTvConstIdx, 0, "XNNTensorValue.constant_buffer_idx");
  const uint32_t ext = tv.scalar<uint32_t>(slot::kTvExternalId, 0, "XNNTensorValue.external_id");  // schema default 0
  const uint32_t flags = tv.scalar<uint32_t>(slot::kTvFlags, 0, "XNNTensorValue.flags");
  const uint32_t id = tv.scalar<uint32_t>(slot::kTvIdOut, 0, "XNNTensorValue.id_out");
  if (!r.ok()) return r.take_failure();
  if (!tv.present()) return fail(Error::InvalidProgram, "XNNPACK value ", index, " has no tensor table");
  // int32 (not quantized) is the index output of ArgMaxPooling2d; graph_checks.h keeps it to that.
  if (type == 1 && dt != kDatatypeFp32 && dt != static_cast<int16_t>(Datatype::Int32))
    return fail(Error::NotSupported, "XNNPACK value ", index, " has datatype ", datatype_name(dt), " (", dt,
                "); only fp32, int32 and quantized values are supported");
  if (type == 1 && dt != kDatatypeFp32 && (cidx != 0 || (flags & kValueExternalInput)))
    return fail(Error::NotSupported, "XNNPACK value ", index, ": an ", datatype_name(dt),
                " value may only be written by a node, not be a constant or a graph input");
  if (type == 2 && (dt == kDatatypeFp32 || dt < 0 || dt > 14))
    return fail(Error::InvalidProgram, "XNNPACK value ", index, " is quantized but its datatype is ",
                datatype_name(dt), " (", dt, ")");
  if (dims.size() != num_dims || num_dims > kMaxXnnDims)
    return fail(Error::InvalidProgram, "XNNPACK value ", index, ": num_dims ", num_dims, " vs ", dims.size(),
                " dims (at most ", kMaxXnnDims, ")");
  if (id >= g.values.size())
    return fail(Error::InvalidProgram, "XNNPACK value ", index, ": id_out ", id, " >= ", g.values.size(), " values");
  Value& v = g.values[id];
  if (v.present) return fail(Error::InvalidProgram, "XNNPACK value ", index, ": id_out ", id, " is defined twice");
  v.present = true;
  v.flags = flags;
  v.external_id = ext;
  v.datatype = static_cast<Datatype>(dt);
  constexpr int64_t kMaxElems = int64_t{1} << 32;  // keeps sums over all values far from overflow
  for (uint32_t d = 0; d < num_dims; ++d) {
    v.dims.push_back(dims[d]);
    if (dims[d] != 0 && v.numel > kMaxElems / dims[d])
      return fail(Error::InvalidProgram, "XNNPACK value ", index, ": dims overflow");
    v.numel *= dims[d];
  }
  if (type == 2) {
    ETRT_TRY(v.quant, parse_quant(r, xv.table(slot::kValueUnion, "XValue.xvalue_union"), index, v.datatype, v.dims,
                                  constants));
  }
  if ((flags & (kValueExternalInput | kValueExternalOutput)) && ext >= g.num_externs)
    return fail(Error::InvalidProgram, "XNNPACK value ", index, ": external_id ", ext, " >= num_externs ",
                g.num_externs);
  if ((flags & (kValueExternalInput | kValueExternalOutput)) && v.quant.kind != QuantKind::None &&
      v.datatype != Datatype::QInt8 && v.datatype != Datatype::QUInt8)
    return fail(Error::NotSupported, "XNNPACK value ", index, ": an external value quantized as ",
                datatype_name(dt), " is not supported (only per-tensor qint8/quint8)");
  if (cidx != 0) {
    if (flags & (kValueExternalInput | kValueExternalOutput))
      return fail(Error::InvalidProgram, "XNNPACK value ", index, " is both external and constant");
    if (cidx >= constants.size())
      return fail(Error::InvalidProgram, "XNNPACK value ", index, ": constant_buffer_idx ", cidx, " >= ",
                  constants.size(), " constant_data entries");
    if (v.quant.kind == QuantKind::DynamicPerToken)
      return fail(Error::InvalidProgram, "XNNPACK value ", index, " is a constant but dynamically quantized");
    const uint64_t want = constant_bytes(v.datatype, v.dims, v.numel);
    if (constants[cidx].size() < want)
      return fail(Error::InvalidProgram, "XNNPACK value ", index, ": constant ", cidx, " holds ",
                  constants[cidx].size(), " bytes, ", datatype_name(dt), shape_str(v.dims), " needs ", want);
    v.constant = constants[cidx].first(want);
  } else if (v.quant.kind == QuantKind::PerChannel || v.quant.kind == QuantKind::PerChannelGroup) {
    return fail(Error::NotSupported, "XNNPACK value ", index, ": ", datatype_name(dt),
                " is only supported for constants (weights and biases)");
  }
  return {};
}

// Reads the node's table into `n`; operands are checked afterwards.
inline Status parse_node(const fb::Reader& r, const fb::Table& xn, uint32_t index, Node& n) {
  const uint8_t type = xn.scalar<uint8_t>(slot::kNodeType, 0, "XNode.xnode_union_type");
  const fb::Table t = xn.table(slot::kNodeUnion, "XNode.xnode_union");
  const fb::Table mm = xn.table(slot::kNodeMinMax, "XNode.output_min_max");
  if (!r.ok()) return r.take_failure();
  n.index = index;
  if (type == 0 || type > kLastNodeKind)
    return fail(Error::NotSupported, "XNNPACK node ", index, " has unknown node kind ", int(type));
  n.kind = static_cast<NodeKind>(type);
  if (!t.present()) return fail(Error::InvalidProgram, n.where(), " has no node table");
  if (mm.present()) {
    n.has_min_max = true;
    // Omitted fields read as the schema default, 0 (a fused ReLU writes only output_max = inf).
    n.out_min = mm.scalar<float>(0, 0.f, "OutputMinMax.output_min");
    n.out_max = mm.scalar<float>(1, 0.f, "OutputMinMax.output_max");
  }
  auto u32 = [&](int s) { return t.scalar<uint32_t>(s, 0, node_kind_name(type)); };
  auto ints = [&](int s, std::string_view f) {
    const auto v = t.vector<uint32_t>(s, f);
    for (uint32_t i = 0; i < v.size(); ++i) n.ints.push_back(v[i]);
    return v.size();
  };
  using K = NodeKind;
  switch (n.kind) {
    case K::Add: case K::Div: case K::Minimum: case K::Maximum: case K::Multiply: case K::Subtract:
    case K::PReLU: case K::BatchMatrixMultiply:  // _XNNNode2x1
      n.inputs = {u32(0), u32(1)}, n.output = u32(2), n.flags = u32(3);
      break;
    case K::Softmax: case K::Sigmoid: case K::Clamp: case K::Floor: case K::Convert: case K::GlobalAvgPooling2d:
    case K::SquareRoot: case K::Ceiling: case K::Hardswish: case K::Negate: case K::Square: case K::Abs:
    case K::ReciprocalSquareRoot: case K::Log: case K::Gelu: case K::Tanh: case K::Exp: case K::Sin: case K::Copy:
    case K::Cos:  // _XNNNode1x1
      n.inputs = {u32(0)}, n.output = u32(1), n.flags = u32(2);
      break;
    case K::FullyConnected:
      n.inputs = {u32(0), u32(1), u32(2)}, n.output = u32(3), n.flags = u32(4);
      break;
    case K::StaticTranspose: {
      const uint32_t nd = u32(0);
      if (ints(1, "XNNStaticTranspose.perm") != nd) return fail(Error::InvalidProgram, n.where(), ": perm length != num_dims");
      n.inputs = {u32(2)}, n.output = u32(3), n.flags = u32(4);
      break;
    }
    case K::StaticReshape:
      ints(1, "XNNStaticReshape.new_shape");
      n.inputs = {u32(2)}, n.output = u32(3), n.flags = u32(4);
      break;
    case K::StaticSlice: {
      const uint32_t nd = u32(0);
      const uint32_t a = ints(1, "XNNStaticSlice.offsets"), b = ints(2, "XNNStaticSlice.sizes");
      if (a != nd || b != nd) return fail(Error::InvalidProgram, n.where(), ": offsets/sizes length != num_dims");
      n.inputs = {u32(3)}, n.output = u32(4), n.flags = u32(5);
      break;
    }
    case K::StaticConstantPad: {
      const uint32_t a = ints(0, "XNNStaticConstantPad.pre_paddings");
      const uint32_t b = ints(1, "XNNStaticConstantPad.post_paddings");
      if (a != b) return fail(Error::InvalidProgram, n.where(), ": pre/post paddings lengths differ");
      n.fparam = t.scalar<float>(2, 0.f, "padding_value");
      n.inputs = {u32(3)}, n.output = u32(4), n.flags = u32(5);
      break;
    }
    case K::StaticResizeBilinear2D:
      n.conv[0] = u32(0), n.conv[1] = u32(1);
      n.inputs = {u32(2)}, n.output = u32(3), n.flags = u32(4);
      break;
    case K::ELU: case K::LeakyReLU:
      n.fparam = t.scalar<float>(0, 0.f, "alpha/negative_slope");
      n.inputs = {u32(1)}, n.output = u32(2), n.flags = u32(3);
      break;
    case K::Conv2d: case K::DepthwiseConv2d: case K::ConvTranspose2d:
      for (int s = 0; s < 15; ++s) n.conv[s] = u32(s);
      n.inputs = {u32(15), u32(16), u32(17)}, n.output = u32(18);  // no bias: the exporter writes 0xFFFFFFFF
      n.flags = u32(19);
      break;
    case K::AvgPooling2d: case K::MaxPooling2d:
      for (int s = 0; s < 10; ++s) n.conv[s] = u32(s);
      n.inputs = {u32(10)}, n.output = u32(11), n.flags = u32(12);
      break;
    case K::Concatenate2: case K::Concatenate3: case K::Concatenate4: case K::Concatenate5: {
      const int k = n.kind == K::Concatenate2 ? 2 : n.kind == K::Concatenate3 ? 3 : n.kind == K::Concatenate4 ? 4 : 5;
      n.axis = u32(0);
      for (int i = 0; i < k; ++i) n.inputs.push_back(u32(i < 4 ? 1 + i : 7));
      n.output = u32(5), n.flags = u32(6);
      break;
    }
    case K::ArgMaxPooling2d:  // padding top, right, bottom, left; pooling height, width
      for (int s = 0; s < 6; ++s) n.conv[s] = u32(s);
      n.inputs = {u32(6)}, n.output = u32(7), n.index_output = u32(8), n.flags = u32(9);
      break;
    case K::ScaledDotProductAttention:  // query, key, value, scale, mask
      n.inputs = {u32(0), u32(1), u32(2), u32(3), u32(4)}, n.output = u32(5), n.flags = u32(6);
      break;
  }
  if (!r.ok()) return r.take_failure();
  return {};
}

}  // namespace detail

/// Parses and validates a whole payload. `named` resolves constant_data entries that name program data.
inline Result<Graph> parse_payload(std::span<const uint8_t> payload, const NamedDataLookup& named) {
  ETRT_TRY(const PayloadSections sec, parse_header(payload));
  fb::Reader r(sec.flatbuffer, "XNNPACK graph");
  const fb::Table root = r.root();
  if (!r.ok()) return r.take_failure();
  if (r.identifier() != "XN01")
    return fail(Error::InvalidProgram, "XNNPACK payload: flatbuffer identifier is not 'XN01'");
  Graph g;
  g.num_externs = root.scalar<uint32_t>(detail::slot::kGraphNumExterns, 0, "XNNGraph.num_externs");
  const auto xnodes = root.tables(detail::slot::kGraphXnodes, "XNNGraph.xnodes");
  const auto xvalues = root.tables(detail::slot::kGraphXvalues, "XNNGraph.xvalues");
  const auto in_ids = root.vector<uint32_t>(detail::slot::kGraphInputIds, "XNNGraph.input_ids");
  const auto out_ids = root.vector<uint32_t>(detail::slot::kGraphOutputIds, "XNNGraph.output_ids");
  const auto cdata = root.tables(detail::slot::kGraphConstantData, "XNNGraph.constant_data");
  if (!r.ok()) return r.take_failure();

  // Constant blobs, by constant_buffer_idx.
  std::vector<std::span<const uint8_t>> constants(cdata.size());
  for (uint32_t i = 0; i < cdata.size(); ++i) {
    const fb::Table c = cdata.at(i);
    const uint64_t off = c.scalar<uint64_t>(detail::slot::kCdOffset, 0, "ConstantDataOffset.offset");
    const uint64_t size = c.scalar<uint64_t>(detail::slot::kCdSize, 0, "ConstantDataOffset.size");
    bool has_key = false;
    const std::string_view key = c.string(detail::slot::kCdNamedKey, "ConstantDataOffset.named_key", &has_key);
    if (!r.ok()) return r.take_failure();
    if (has_key && !key.empty()) {
      if (!named) return fail(Error::NotFound, "XNNPACK constant ", i, " names data '", key, "' but no named data is available");
      auto blob = named(key);
      if (!blob) return fail(blob.error().code, "XNNPACK constant ", i, " (named '", key, "'): ", blob.error().what);
      constants[i] = *blob;
    } else {
      if (off > sec.constant_data.size() || size > sec.constant_data.size() - off)
        return fail(Error::InvalidProgram, "XNNPACK constant ", i, " [", off, ", +", size, ") is outside the ",
                    sec.constant_data.size(), "-byte constant data section");
      constants[i] = sec.constant_data.subspan(off, size);
    }
  }

  constexpr uint32_t kMaxValues = 1u << 24;
  if (xvalues.size() > kMaxValues) return fail(Error::InvalidProgram, "XNNPACK graph: too many values");
  // id_out is dense in what the exporter writes; size the table by the largest id seen.
  uint32_t max_id = 0;
  for (uint32_t i = 0; i < xvalues.size(); ++i) {
    const uint8_t type = xvalues.at(i).scalar<uint8_t>(detail::slot::kValueType, 0, "XValue.xvalue_union_type");
    if (r.ok() && type != 1 && type != 2)
      return fail(Error::NotSupported, "XNNPACK value ", i, " has unknown kind ", int(type));
    const fb::Table tv = detail::tensor_table(r, xvalues.at(i), type);
    max_id = std::max(max_id, tv.scalar<uint32_t>(detail::slot::kTvIdOut, 0, "XNNTensorValue.id_out"));
  }
  if (!r.ok()) return r.take_failure();
  // Ids are dense (0 .. values - 1) in what the exporter writes; a larger id would size the table by a number the
  // file does not pay for (a fuzzed id of 2^24 cost 2 GB).
  if (max_id >= kMaxValues || (!xvalues.empty() && max_id >= xvalues.size()))
    return fail(Error::InvalidProgram, "XNNPACK graph: value id ", max_id, " is not below the number of values (",
                xvalues.size(), ")");
  g.values.resize(xvalues.empty() ? 0 : max_id + 1);
  for (uint32_t i = 0; i < xvalues.size(); ++i)
    ETRT_CHECK_OK(detail::parse_value(r, xvalues.at(i), i, g, constants));

  for (uint32_t i = 0; i < xnodes.size(); ++i) {
    Node n;
    ETRT_CHECK_OK(detail::parse_node(r, xnodes.at(i), i, n));
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const bool optional_bias = k == 2 && (n.kind == NodeKind::FullyConnected || n.kind == NodeKind::Conv2d ||
                                            n.kind == NodeKind::DepthwiseConv2d || n.kind == NodeKind::ConvTranspose2d);
      if (optional_bias && n.inputs[k] == kNoValue) continue;
      ETRT_CHECK_OK(detail::check_value_id(g, n.inputs[k], n, cat("input ", k)));
    }
    const auto check_output = [&](uint32_t out) -> Status {
      ETRT_CHECK_OK(detail::check_value_id(g, out, n, "output"));
      if (!g.values[out].constant.empty() || (g.values[out].flags & kValueExternalInput))
        return fail(Error::InvalidProgram, n.where(), ": output value ", out, " is a constant or a graph input");
      return {};
    };
    ETRT_CHECK_OK(check_output(n.output));
    if (n.kind == NodeKind::ArgMaxPooling2d) {
      ETRT_CHECK_OK(check_output(n.index_output));
      if (n.index_output == n.output)
        return fail(Error::InvalidProgram, n.where(), ": the value and index outputs are one value (", n.output, ")");
    }
    g.nodes.push_back(std::move(n));
  }
  for (uint32_t i = 0; i < in_ids.size(); ++i) g.input_ids.push_back(in_ids[i]);
  for (uint32_t i = 0; i < out_ids.size(); ++i) g.output_ids.push_back(out_ids[i]);
  for (uint32_t id : g.input_ids)
    if (id >= g.values.size() || !(g.values[id].flags & kValueExternalInput))
      return fail(Error::InvalidProgram, "XNNPACK graph: input id ", id, " is not an external input value");
  for (uint32_t id : g.output_ids)
    if (id >= g.values.size() || !(g.values[id].flags & kValueExternalOutput))
      return fail(Error::InvalidProgram, "XNNPACK graph: output id ", id, " is not an external output value");
  return g;
}

}  // namespace etrt::xnnpack
