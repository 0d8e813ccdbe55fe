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
#include <span>
#include <string_view>
#include <vector>

#include "etrt/backends/xnnpack/graph.h"
#include "etrt/backends/xnnpack/node_table.h"
#include "etrt/backends/xnnpack/quant_params.h"
#include "etrt/core/result.h"
#include "etrt/core/tensor.h"  // shape_str
#include "etrt/format/flatbuffer.h"

namespace etrt::xnnpack {

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

// Reads the node's table into `n` with its kind's field layout (node_table.h); operands are checked afterwards.
inline Status parse_node(const fb::Reader& r, const fb::Table& xn, uint32_t index, Node& n) {
  const uint8_t type = xn.scalar<uint8_t>(slot::kNodeType, 0, "XNode.xnode_union_type");
  const fb::Table t = xn.table(slot::kNodeUnion, "XNode.xnode_union");
  const fb::Table mm = xn.table(slot::kNodeMinMax, "XNode.output_min_max");
  if (!r.ok()) return r.take_failure();
  n.index = index;
  const NodeKind* kind = node_kind(type);
  if (!kind) return fail(Error::NotSupported, "XNNPACK node ", index, " has unknown node kind ", int(type));
  n.kind = type;
  n.kind_name = kind->name;
  if (!t.present()) return fail(Error::InvalidProgram, n.where(), " has no node table");
  if (mm.present()) {
    n.has_min_max = true;
    // Omitted fields read as the schema default, 0 (a fused ReLU writes only output_max = inf).
    n.out_min = mm.scalar<float>(0, 0.f, "OutputMinMax.output_min");
    n.out_max = mm.scalar<float>(1, 0.f, "OutputMinMax.output_max");
  }
  ETRT_CHECK_OK(kind->fields(NodeFields{t, kind->name}, n));
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
      if (static_cast<int>(k) == n.optional_input && n.inputs[k] == kNoValue) continue;
      ETRT_CHECK_OK(detail::check_value_id(g, n.inputs[k], n, cat("input ", k)));
    }
    const auto check_output = [&](uint32_t out) -> Status {
      ETRT_CHECK_OK(detail::check_value_id(g, out, n, "output"));
      if (!g.values[out].constant.empty() || (g.values[out].flags & kValueExternalInput))
        return fail(Error::InvalidProgram, n.where(), ": output value ", out, " is a constant or a graph input");
      return {};
    };
    ETRT_CHECK_OK(check_output(n.output));
    if (n.has_index_output) {
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
