// The CUDA delegate's payload (format ECU1, see PAYLOAD.md next to this file): the op table (codes, names,
// arities), the parsed descriptors a GraphExecutor runs and the shape helpers both use. Parsing and validation
// are in payload.h.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etrt/core/result.h"
#include "etrt/core/tensor.h"

namespace etrt::cuda {

static_assert(std::endian::native == std::endian::little, "the ECU1 reader assumes a little-endian host");

enum class Op : uint16_t {
  Add = 1,
  Sub = 2,
  Mul = 3,
  Div = 4,
  AddScalar = 5,
  MulScalar = 6,
  Relu = 10,
  Gelu = 11,
  Sigmoid = 12,
  Tanh = 13,
  Exp = 14,
  Neg = 15,
  Sqrt = 16,
  Rsqrt = 17,
  Mm = 20,
  Addmm = 21,
  Bmm = 22,
  Softmax = 30,
  LayerNorm = 31,
  Copy = 40,
  Permute = 41,
  Expand = 42,
  Select = 43,
  EqScalar = 50,
  LogicalNot = 51,
  Any = 52,
  Full = 53,
  Where = 54,
};

/// The op's name as PAYLOAD.md spells it, or "" for a code version 1 does not define.
constexpr std::string_view op_name(Op op) {
  switch (op) {
    case Op::Add: return "ADD";
    case Op::Sub: return "SUB";
    case Op::Mul: return "MUL";
    case Op::Div: return "DIV";
    case Op::AddScalar: return "ADD_SCALAR";
    case Op::MulScalar: return "MUL_SCALAR";
    case Op::Relu: return "RELU";
    case Op::Gelu: return "GELU";
    case Op::Sigmoid: return "SIGMOID";
    case Op::Tanh: return "TANH";
    case Op::Exp: return "EXP";
    case Op::Neg: return "NEG";
    case Op::Sqrt: return "SQRT";
    case Op::Rsqrt: return "RSQRT";
    case Op::Mm: return "MM";
    case Op::Addmm: return "ADDMM";
    case Op::Bmm: return "BMM";
    case Op::Softmax: return "SOFTMAX";
    case Op::LayerNorm: return "LAYER_NORM";
    case Op::Copy: return "COPY";
    case Op::Permute: return "PERMUTE";
    case Op::Expand: return "EXPAND";
    case Op::Select: return "SELECT";
    case Op::EqScalar: return "EQ_SCALAR";
    case Op::LogicalNot: return "LOGICAL_NOT";
    case Op::Any: return "ANY";
    case Op::Full: return "FULL";
    case Op::Where: return "WHERE";
  }
  return "";
}

inline constexpr uint32_t kAbsent = 0xFFFFFFFFu;  // an absent optional node input
inline constexpr uint8_t kFlagInput = 1, kFlagOutput = 2, kFlagConstant = 4;
inline constexpr int kMaxNodeInputs = 3, kMaxNodeOutputs = 3;

struct ValueDesc {
  ScalarType dtype = ScalarType::Float;  // Float or Bool (one byte, 0 or 1)
  uint8_t rank = 0;
  uint8_t flags = 0;
  uint64_t constant_offset = 0;  // from the start of the constants region
  int64_t numel = 1;
  std::array<int64_t, kMaxDims> sizes{};
  std::array<uint8_t, kMaxDims> dim_order{};

  std::span<const int64_t> shape() const { return {sizes.data(), rank}; }
  std::span<const uint8_t> order() const { return {dim_order.data(), rank}; }
  size_t nbytes() const { return static_cast<size_t>(numel) * element_size(dtype); }
  bool is_bool() const { return dtype == ScalarType::Bool; }
  bool is_input() const { return flags & kFlagInput; }
  bool is_output() const { return flags & kFlagOutput; }
  bool is_constant() const { return flags & kFlagConstant; }
};

struct NodeDesc {
  Op op{};
  uint8_t num_in = 0, num_out = 0;
  std::array<uint32_t, kMaxNodeInputs> in{kAbsent, kAbsent, kAbsent};
  std::array<uint32_t, kMaxNodeOutputs> out{kAbsent, kAbsent, kAbsent};
  // Attributes, decoded per op; the ones an op does not have keep these defaults.
  double alpha = 1.0;   // ADD, SUB, ADDMM
  double beta = 1.0;    // ADDMM
  double scalar = 0.0;  // ADD_SCALAR, MUL_SCALAR
  double eps = 0.0;     // LAYER_NORM
  double value = 0.0;   // FULL
  int64_t approximate = 0;      // GELU: 0 erf, 1 tanh
  int64_t dim = 0;              // SOFTMAX, SELECT, ANY
  int64_t index = 0;            // SELECT
  int64_t keepdim = 0;          // ANY
  int64_t normalized_ndim = 0;  // LAYER_NORM
  std::array<uint8_t, kMaxDims> perm{};  // PERMUTE: output dim i is input dim perm[i]
};

struct Payload {
  std::vector<ValueDesc> values;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<NodeDesc> nodes;
  /// The constants region: a view into the parsed bytes, valid only while they are (init uploads it at once).
  std::span<const uint8_t> constants;
};

namespace payload_detail {

/// NumPy/torch broadcasting of two shapes; false when they are incompatible.
inline bool broadcast(std::span<const int64_t> a, std::span<const int64_t> b, std::array<int64_t, kMaxDims>& out,
                      size_t& rank) {
  rank = std::max(a.size(), b.size());
  for (size_t i = 0; i < rank; ++i) {
    const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return false;
    out[rank - 1 - i] = x == 1 ? y : x;
  }
  return true;
}

/// True when `from` expands to exactly `to` (torch's expand: trailing-aligned, each size equal or 1).
inline bool expands_to(std::span<const int64_t> from, std::span<const int64_t> to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

inline bool same(std::span<const int64_t> a, std::span<const int64_t> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

/// "[0, 2, 3, 1]"
inline std::string order_str(std::span<const uint8_t> order) {
  std::string s = "[";
  for (size_t i = 0; i < order.size(); ++i) s += cat(i ? ", " : "", static_cast<int>(order[i]));
  return s + "]";
}

struct OpInfo {
  uint8_t num_in, num_out;
  int num_attrs;  // -1: one per dimension of the input (PERMUTE)
};

/// Arities from the op table in PAYLOAD.md (only meaningful for codes op_name knows).
constexpr OpInfo op_info(Op op) {
  switch (op) {
    case Op::Add:
    case Op::Sub: return {2, 1, 1};
    case Op::Mul:
    case Op::Div: return {2, 1, 0};
    case Op::AddScalar:
    case Op::MulScalar: return {1, 1, 1};
    case Op::Gelu: return {1, 1, 1};
    case Op::Relu:
    case Op::Sigmoid:
    case Op::Tanh:
    case Op::Exp:
    case Op::Neg:
    case Op::Sqrt:
    case Op::Rsqrt: return {1, 1, 0};
    case Op::Mm: return {2, 1, 0};
    case Op::Addmm: return {3, 1, 2};
    case Op::Bmm: return {2, 1, 0};
    case Op::Softmax: return {1, 1, 1};
    case Op::LayerNorm: return {3, 3, 2};
    case Op::Copy: return {1, 1, 0};
    case Op::Permute: return {1, 1, -1};
    case Op::Expand: return {1, 1, 0};
    case Op::Select: return {1, 1, 2};
    case Op::EqScalar: return {1, 1, 1};
    case Op::LogicalNot: return {1, 1, 0};
    case Op::Any: return {1, 1, 2};
    case Op::Full: return {0, 1, 1};
    case Op::Where: return {3, 1, 0};
  }
  return {0, 0, 0};
}

}  // namespace payload_detail

}  // namespace etrt::cuda
