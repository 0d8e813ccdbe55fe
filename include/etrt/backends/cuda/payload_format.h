// The CUDA delegate's payload (format ECU1, see PAYLOAD.md next to this file): the parsed descriptors a
// GraphExecutor runs and the shape helpers the parser and the executor share. The ops are in op_table.h; parsing
// and validation in payload.h.
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

struct OpKind;  // op_table.h

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
  uint16_t op = 0;                 // the op code
  const OpKind* kind = nullptr;    // its entry in kOps (op_table.h), set by the parser
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

}  // namespace payload_detail

}  // namespace etrt::cuda
