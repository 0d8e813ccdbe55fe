// The parsed form of an XNNPACK delegate payload: values, nodes and the graph's external inputs and outputs.
// payload.h fills it and checks every id and size; the node kinds' table (node_table.h) says how each node is read,
// shaped, checked and run.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etrt/backends/xnnpack/quant_params.h"
#include "etrt/backends/xnnpack/xnnpack_entry.h"  // kXnnpackBackendId
#include "etrt/core/result.h"

namespace etrt::xnnpack {

inline constexpr uint32_t kNoValue = std::numeric_limits<uint32_t>::max();
inline constexpr uint32_t kMaxXnnDims = 6;  // XNN_MAX_TENSOR_DIMS

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
  uint8_t kind = 0;               // the XNode union's type code: an index into kNodeKinds (node_table.h)
  std::string_view kind_name;     // its flatbuffer name, for messages
  uint32_t index = 0;             // position in xnodes, for messages
  std::vector<uint32_t> inputs;   // value ids, validated (kNoValue only for the optional input)
  uint32_t output = kNoValue;
  uint32_t index_output = kNoValue;  // ArgMaxPooling2d's second output: the position of each maximum (int32)
  bool has_index_output = false;
  int8_t optional_input = -1;     // the input that may be absent (kNoValue): a bias
  uint32_t flags = 0;
  // Kind-specific parameters.
  std::vector<int64_t> ints;    // perm / new_shape / offsets (StaticSlice: offsets then sizes) / pre then post pads
  uint32_t conv[15] = {};       // _XNNNodeConv / _XNNPooling2D leading fields, in schema order
  uint32_t axis = 0;            // concatenation axis; resize: new_height, new_width in conv[0..1]
  float fparam = 0;             // ELU alpha, LeakyReLU slope, pad value
  bool has_min_max = false;
  float out_min = -std::numeric_limits<float>::infinity();
  float out_max = std::numeric_limits<float>::infinity();

  std::string where() const { return cat("XNNPACK node ", index, " (", kind_name, ")"); }
};

struct Graph {
  std::vector<Value> values;  // indexed by id_out
  std::vector<Node> nodes;
  std::vector<uint32_t> input_ids, output_ids;
  uint32_t num_externs = 0;
};

/// Looks up a blob of the program's named data by key.
using NamedDataLookup = std::function<Result<std::span<const uint8_t>>(std::string_view key)>;  // = BackendInterface::NamedDataFn

}  // namespace etrt::xnnpack
