// Parsing and validation of the CUDA delegate's payload (format ECU1, see PAYLOAD.md next to this file).
//
// The bytes are untrusted (a corrupt or fuzzed .pte reaches here), so every read is bounds-checked and everything
// the kernels later rely on is checked once here: ids, ranks, sizes and their products, flags, op arities, attribute
// values, dim_order permutations, constant ranges, the write-before-read order of values and each op's shape rules.
// A GraphExecutor built from a Payload that parsed therefore needs no per-execute shape checks beyond its
// arguments. Every error names the record (value i, node i and its op) and what was expected.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etrt/backends/cuda/op_table.h"
#include "etrt/backends/cuda/payload_format.h"
#include "etrt/core/result.h"
#include "etrt/core/tensor.h"

namespace etrt::cuda {

namespace payload_detail {

/// Bounds-checked little-endian reads. The first failed read is remembered and later reads return zeros, so a
/// record can be read whole and checked once; nothing read after a failure is used before `status()` is checked.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes, size_t pos = 0) : b_(bytes), pos_(pos) {}
  size_t pos() const { return pos_; }
  bool ok() const { return error_.empty(); }
  Status status() const {
    if (ok()) return {};
    return fail(Error::InvalidProgram, error_);
  }

  template <class T>
  T read(std::string_view what) {
    T v{};
    if (!need(sizeof(T), what)) return v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  /// Zero padding up to the next multiple of 8 (records start 8-byte aligned).
  void pad8(std::string_view what) {
    while (ok() && pos_ % 8 != 0) {
      if (read<uint8_t>(what) != 0 && ok()) error_ = cat("ECU1 payload: nonzero padding byte at offset ", pos_ - 1,
                                                         " after ", what);
    }
  }

 private:
  bool need(size_t n, std::string_view what) {
    if (!ok()) return false;
    if (pos_ > b_.size() || b_.size() - pos_ < n) {
      error_ = cat("ECU1 payload truncated: ", what, " needs ", n, " bytes at offset ", pos_, ", but the payload is ",
                   b_.size(), " bytes");
      return false;
    }
    return true;
  }
  std::span<const uint8_t> b_;
  size_t pos_;
  std::string error_;
};

/// Every tensor's byte count must fit comfortably in int64 and size_t (scratch offsets add them up).
inline constexpr int64_t kMaxNumel = int64_t{1} << 56;

class Parser {
 public:
  explicit Parser(std::span<const uint8_t> bytes) : bytes_(bytes), c_(bytes) {}

  Result<Payload> run() {
    ETRT_CHECK_OK(header());
    ETRT_CHECK_OK(values());
    ETRT_CHECK_OK(io());
    ETRT_CHECK_OK(nodes());
    ETRT_CHECK_OK(constants());
    return std::move(p_);
  }

 private:
  Status header() {
    if (bytes_.size() < 4 || std::memcmp(bytes_.data(), "ECU1", 4) != 0)
      return fail(Error::InvalidProgram, "ECU1 payload: bad magic (expected 'ECU1'; payload is ", bytes_.size(),
                  " bytes)");
    c_.read<uint32_t>("magic");
    const uint32_t version = c_.read<uint32_t>("header.version");
    num_values_ = c_.read<uint32_t>("header.num_values");
    num_inputs_ = c_.read<uint32_t>("header.num_inputs");
    num_outputs_ = c_.read<uint32_t>("header.num_outputs");
    num_nodes_ = c_.read<uint32_t>("header.num_nodes");
    constants_offset_ = c_.read<uint32_t>("header.constants_offset");
    constants_size_ = c_.read<uint32_t>("header.constants_size");
    ETRT_CHECK_OK(c_.status());
    if (version != 1)
      return fail(Error::NotSupported, "ECU1 payload version ", version, " is not supported (this runtime reads 1)");
    // Counts are checked against the bytes left before anything is sized by them, so a corrupt count cannot
    // make the parser allocate more than a small multiple of the payload.
    const size_t left = bytes_.size() - c_.pos();
    if (num_values_ > left / 16)
      return fail(Error::InvalidProgram, "ECU1 payload: num_values ", num_values_,
                  " needs more bytes than the payload has (", left, " after the header)");
    if (num_inputs_ > num_values_ || num_outputs_ > num_values_ - num_inputs_)
      return fail(Error::InvalidProgram, "ECU1 payload: num_inputs ", num_inputs_, " + num_outputs ", num_outputs_,
                  " exceed num_values ", num_values_, " (each names a distinct value)");
    if (num_nodes_ > left / 8)
      return fail(Error::InvalidProgram, "ECU1 payload: num_nodes ", num_nodes_,
                  " needs more bytes than the payload has (", left, " after the header)");
    return {};
  }

  Status values() {
    p_.values.resize(num_values_);
    for (uint32_t i = 0; i < num_values_; ++i) {
      ValueDesc& v = p_.values[i];
      const std::string what = cat("value ", i);
      const uint8_t dtype = c_.read<uint8_t>(what);
      v.rank = c_.read<uint8_t>(what);
      v.flags = c_.read<uint8_t>(what);
      const uint8_t reserved8 = c_.read<uint8_t>(what);
      const uint32_t reserved32 = c_.read<uint32_t>(what);
      v.constant_offset = c_.read<uint64_t>(what);
      ETRT_CHECK_OK(c_.status());
      if (dtype != 6 && dtype != 11) {
        constexpr uint8_t kLater[] = {5, 15, 4, 3};
        const bool later = std::find(std::begin(kLater), std::end(kLater), dtype) != std::end(kLater);
        if (later)
          return fail(Error::NotSupported, "ECU1 payload: value ", i, " has dtype ", static_cast<int>(dtype), " (",
                      numpy_name(static_cast<ScalarType>(dtype)), "); version 1 supports float32 and bool only");
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " has unknown dtype code ",
                    static_cast<int>(dtype), " (version 1 supports float32, code 6, and bool, code 11)");
      }
      v.dtype = static_cast<ScalarType>(dtype);
      if (v.is_bool() && v.is_constant())
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " is a bool constant (constants are float32)");
      if (v.rank > kMaxDims)
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " has rank ", static_cast<int>(v.rank),
                    " (at most ", kMaxDims, ")");
      if (v.flags & ~(kFlagInput | kFlagOutput | kFlagConstant))
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " has flags ", static_cast<int>(v.flags),
                    ", with bits beyond the defined 1 (input), 2 (output) and 4 (constant)");
      const int roles = v.is_input() + v.is_output() + v.is_constant();
      if (roles > 1)
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " has flags ", static_cast<int>(v.flags),
                    ": input, output and constant exclude each other (an output is always written by a node)");
      if (reserved8 != 0 || reserved32 != 0)
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " has nonzero reserved fields");
      if (!v.is_constant() && v.constant_offset != 0)
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " is not a constant but has data offset ",
                    v.constant_offset);
      for (int d = 0; d < v.rank; ++d) v.sizes[d] = c_.read<int64_t>(what + " sizes");
      for (int d = 0; d < v.rank; ++d) v.dim_order[d] = c_.read<uint8_t>(what + " dim_order");
      c_.pad8(what + " dim_order");
      ETRT_CHECK_OK(c_.status());
      for (int d = 0; d < v.rank; ++d)
        if (v.sizes[d] < 0)
          return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " has negative size in ", shape_str(v.shape()));
      v.numel = checked_numel(v.shape());
      if (v.numel < 0 || v.numel > kMaxNumel)
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " sizes ", shape_str(v.shape()),
                    " have too many elements");
      if (!is_valid_dim_order(v.order()))
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " dim_order ", order_str(v.order()),
                    " is not a permutation of 0..", static_cast<int>(v.rank) - 1);
    }
    return {};
  }

  Status io() {
    std::vector<uint8_t> seen(num_values_, 0);  // 1 input, 2 output
    auto list = [&](uint32_t n, std::vector<uint32_t>& ids, uint8_t flag, const char* kind) -> Status {
      ids.resize(n);
      for (uint32_t k = 0; k < n; ++k) ids[k] = c_.read<uint32_t>(kind);
      ETRT_CHECK_OK(c_.status());
      for (uint32_t k = 0; k < n; ++k) {
        const uint32_t id = ids[k];
        if (id >= num_values_)
          return fail(Error::InvalidProgram, "ECU1 payload: ", kind, " ", k, " is value ", id, ", out of range (",
                      num_values_, " values)");
        if (!(p_.values[id].flags & flag))
          return fail(Error::InvalidProgram, "ECU1 payload: ", kind, " ", k, " is value ", id,
                      ", which is not flagged as ", kind);
        if (seen[id])
          return fail(Error::InvalidProgram, "ECU1 payload: value ", id, " is listed twice among the ", kind, "s");
        seen[id] = flag;
      }
      return {};
    };
    ETRT_CHECK_OK(list(num_inputs_, p_.inputs, kFlagInput, "input"));
    ETRT_CHECK_OK(list(num_outputs_, p_.outputs, kFlagOutput, "output"));
    c_.pad8("the input/output lists");
    ETRT_CHECK_OK(c_.status());
    for (uint32_t i = 0; i < num_values_; ++i) {
      const ValueDesc& v = p_.values[i];
      if ((v.is_input() || v.is_output()) && !seen[i])
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i, " is flagged as ",
                    v.is_input() ? "an input" : "an output", " but is not in the ", v.is_input() ? "input" : "output",
                    " list");
    }
    return {};
  }

  Status nodes() {
    written_.assign(num_values_, 0);
    for (uint32_t i = 0; i < num_values_; ++i) written_[i] = p_.values[i].is_input() || p_.values[i].is_constant();
    p_.nodes.resize(num_nodes_);
    for (uint32_t i = 0; i < num_nodes_; ++i) ETRT_CHECK_OK(node(i, p_.nodes[i]));
    for (uint32_t i = 0; i < num_values_; ++i)
      if (!written_[i])
        return fail(Error::InvalidProgram, "ECU1 payload: value ", i,
                    " is neither an input nor a constant and no node writes it");
    return {};
  }

  Status node(uint32_t index, NodeDesc& n) {
    const std::string what = cat("node ", index);
    const uint16_t op = c_.read<uint16_t>(what);
    n.num_in = c_.read<uint8_t>(what);
    n.num_out = c_.read<uint8_t>(what);
    const uint16_t num_attrs = c_.read<uint16_t>(what);
    const uint16_t reserved = c_.read<uint16_t>(what);
    ETRT_CHECK_OK(c_.status());
    n.op = op;
    n.kind = find_op(op);
    if (!n.kind)
      return fail(Error::NotSupported, "ECU1 payload: node ", index, " has op code ", op,
                  ", which version 1 does not define");
    const OpKind& kind = *n.kind;
    const std::string at = cat("ECU1 payload: node ", index, " (", kind.name, ")");
    if (reserved != 0) return fail(Error::InvalidProgram, at, ": nonzero reserved field");
    if (n.num_in != kind.num_in || n.num_out != kind.num_out)
      return fail(Error::InvalidProgram, at, ": has ", static_cast<int>(n.num_in), " inputs and ",
                  static_cast<int>(n.num_out), " outputs, expected ", static_cast<int>(kind.num_in), " and ",
                  static_cast<int>(kind.num_out));
    for (int k = 0; k < n.num_in; ++k) n.in[k] = c_.read<uint32_t>(what + " inputs");
    for (int k = 0; k < n.num_out; ++k) n.out[k] = c_.read<uint32_t>(what + " outputs");
    c_.pad8(what + " value ids");
    ETRT_CHECK_OK(c_.status());

    // Ids and dataflow: inputs exist and are already available, outputs are written here for the first time.
    for (int k = 0; k < n.num_in; ++k) {
      const uint32_t id = n.in[k];
      if (id == kAbsent) {
        if (kind.optional_inputs & (1u << k)) continue;
        return fail(Error::InvalidProgram, at, ": input ", k, " is absent but required");
      }
      if (id >= num_values_)
        return fail(Error::InvalidProgram, at, ": input ", k, " is value ", id, ", out of range (", num_values_,
                    " values)");
      if (!written_[id])
        return fail(Error::InvalidProgram, at, ": input ", k, " reads value ", id, " before any node writes it");
    }
    for (int k = 0; k < n.num_out; ++k) {
      const uint32_t id = n.out[k];
      if (id >= num_values_)
        return fail(Error::InvalidProgram, at, ": output ", k, " is value ", id, ", out of range (", num_values_,
                    " values)");
      const ValueDesc& v = p_.values[id];
      if (v.is_input() || v.is_constant())
        return fail(Error::InvalidProgram, at, ": output ", k, " writes value ", id, ", which is ",
                    v.is_input() ? "an input" : "a constant");
      if (written_[id])
        return fail(Error::InvalidProgram, at, ": output ", k, " writes value ", id,
                    ", which an earlier output already wrote");
      written_[id] = 1;
    }

    // Attributes.
    const size_t expected_attrs = kind.attrs == "*" ? p_.values[n.in[0]].rank : kind.attrs.size();
    if (num_attrs != expected_attrs)
      return fail(Error::InvalidProgram, at, ": has ", num_attrs, " attributes, expected ", expected_attrs);
    std::array<uint64_t, kMaxDims> raw{};
    for (int k = 0; k < num_attrs; ++k) raw[k] = c_.read<uint64_t>(what + " attributes");
    ETRT_CHECK_OK(c_.status());
    if (kind.decode) ETRT_CHECK_OK(kind.decode(n, std::span<const uint64_t>(raw.data(), num_attrs), p_.values, at));
    ETRT_CHECK_OK(dtypes(n, kind, at));
    return kind.shape(n, p_.values, at);
  }

  /// The op's dtypes column (PAYLOAD.md): bool only where an op reads or writes a mask, float32 everywhere else.
  Status dtypes(const NodeDesc& n, const OpKind& kind, const std::string& at) const {
    const auto& V = p_.values;
    const size_t colon = kind.dtypes.find(':');
    const auto want = [&](bool input, int k, char spec) -> Status {
      const uint32_t id = input ? n.in[k] : n.out[k];
      if (id == kAbsent || spec == '?') return {};
      const ScalarType t = spec == 'b' ? ScalarType::Bool : spec == '=' ? V[n.in[0]].dtype : ScalarType::Float;
      if (V[id].dtype == t) return {};
      return fail(Error::InvalidProgram, at, ": ", input ? "input " : "output ", k, " (value ", id, ") is ",
                  numpy_name(V[id].dtype), ", expected ", numpy_name(t));
    };
    for (int k = 0; k < n.num_in; ++k) ETRT_CHECK_OK(want(true, k, kind.dtypes[k]));
    for (int k = 0; k < n.num_out; ++k) ETRT_CHECK_OK(want(false, k, kind.dtypes[colon + 1 + k]));
    return {};
  }

  Status constants() {
    const size_t records_end = c_.pos();
    if (constants_offset_ == 0) {
      if (constants_size_ != 0)
        return fail(Error::InvalidProgram, "ECU1 payload: constants_size ", constants_size_,
                    " with constants_offset 0");
    } else {
      if (constants_offset_ % 64 != 0)
        return fail(Error::InvalidProgram, "ECU1 payload: constants_offset ", constants_offset_,
                    " is not 64-byte aligned");
      if (constants_offset_ < records_end)
        return fail(Error::InvalidProgram, "ECU1 payload: constants_offset ", constants_offset_,
                    " overlaps the records, which end at ", records_end);
      if (uint64_t{constants_offset_} + constants_size_ > bytes_.size())
        return fail(Error::InvalidProgram, "ECU1 payload truncated: the constants region [", constants_offset_, ", ",
                    uint64_t{constants_offset_} + constants_size_, ") ends past the payload's ", bytes_.size(),
                    " bytes");
      p_.constants = bytes_.subspan(constants_offset_, constants_size_);
    }
    for (uint32_t i = 0; i < num_values_; ++i) {
      const ValueDesc& v = p_.values[i];
      if (!v.is_constant()) continue;
      if (v.constant_offset % 64 != 0)
        return fail(Error::InvalidProgram, "ECU1 payload: constant value ", i, " data offset ", v.constant_offset,
                    " is not 64-byte aligned");
      if (v.constant_offset > constants_size_ || v.nbytes() > constants_size_ - v.constant_offset)
        return fail(Error::InvalidProgram, "ECU1 payload: constant value ", i, " data [", v.constant_offset, ", +",
                    v.nbytes(), ") is outside the constants region (", constants_size_, " bytes)");
    }
    return {};
  }

  std::span<const uint8_t> bytes_;
  Cursor c_;
  Payload p_;
  std::vector<uint8_t> written_;
  uint32_t num_values_ = 0, num_inputs_ = 0, num_outputs_ = 0, num_nodes_ = 0;
  uint32_t constants_offset_ = 0, constants_size_ = 0;
};

}  // namespace payload_detail

/// Parses and validates `bytes`. The result's `constants` views `bytes`.
inline Result<Payload> parse_payload(std::span<const uint8_t> bytes) { return payload_detail::Parser(bytes).run(); }

}  // namespace etrt::cuda
