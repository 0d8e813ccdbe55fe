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
    n.op = static_cast<Op>(op);
    const std::string_view name = op_name(n.op);
    if (name.empty())
      return fail(Error::NotSupported, "ECU1 payload: node ", index, " has op code ", op,
                  ", which version 1 does not define");
    const std::string at = cat("ECU1 payload: node ", index, " (", name, ")");
    if (reserved != 0) return fail(Error::InvalidProgram, at, ": nonzero reserved field");
    const OpInfo info = op_info(n.op);
    if (n.num_in != info.num_in || n.num_out != info.num_out)
      return fail(Error::InvalidProgram, at, ": has ", static_cast<int>(n.num_in), " inputs and ",
                  static_cast<int>(n.num_out), " outputs, expected ", static_cast<int>(info.num_in), " and ",
                  static_cast<int>(info.num_out));
    for (int k = 0; k < n.num_in; ++k) n.in[k] = c_.read<uint32_t>(what + " inputs");
    for (int k = 0; k < n.num_out; ++k) n.out[k] = c_.read<uint32_t>(what + " outputs");
    c_.pad8(what + " value ids");
    ETRT_CHECK_OK(c_.status());

    // Ids and dataflow: inputs exist and are already available, outputs are written here for the first time.
    for (int k = 0; k < n.num_in; ++k) {
      const uint32_t id = n.in[k];
      if (id == kAbsent) {
        if (n.op == Op::LayerNorm && k > 0) continue;  // weight and bias are optional
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
    const int expected_attrs = info.num_attrs >= 0 ? info.num_attrs : p_.values[n.in[0]].rank;
    if (num_attrs != expected_attrs)
      return fail(Error::InvalidProgram, at, ": has ", num_attrs, " attributes, expected ", expected_attrs);
    std::array<uint64_t, kMaxDims> raw{};
    for (int k = 0; k < num_attrs; ++k) raw[k] = c_.read<uint64_t>(what + " attributes");
    ETRT_CHECK_OK(c_.status());
    ETRT_CHECK_OK(attributes(n, raw, at));
    ETRT_CHECK_OK(dtypes(n, at));
    return shapes(n, at);
  }

  Status attributes(NodeDesc& n, const std::array<uint64_t, kMaxDims>& raw, const std::string& at) const {
    const auto f64 = [&](int k) { return std::bit_cast<double>(raw[k]); };
    const auto i64 = [&](int k) { return std::bit_cast<int64_t>(raw[k]); };
    switch (n.op) {
      case Op::Add:
      case Op::Sub: n.alpha = f64(0); break;
      case Op::AddScalar:
      case Op::MulScalar: n.scalar = f64(0); break;
      case Op::Gelu:
        n.approximate = i64(0);
        if (n.approximate != 0 && n.approximate != 1)
          return fail(Error::InvalidProgram, at, ": approximate is ", n.approximate, ", expected 0 (none) or 1 (tanh)");
        break;
      case Op::Addmm:
        n.beta = f64(0);
        n.alpha = f64(1);
        break;
      case Op::Softmax: n.dim = i64(0); break;  // range checked with the shapes
      case Op::LayerNorm:
        n.eps = f64(0);
        n.normalized_ndim = i64(1);
        if (!(n.eps >= 0.0) || !std::isfinite(n.eps))
          return fail(Error::InvalidProgram, at, ": eps ", n.eps, " is not a finite non-negative number");
        break;
      case Op::Select:
        n.dim = i64(0);
        n.index = i64(1);  // both range checked with the shapes
        break;
      case Op::EqScalar: n.scalar = f64(0); break;
      case Op::Any:
        n.dim = i64(0);
        n.keepdim = i64(1);
        if (n.keepdim != 0 && n.keepdim != 1)
          return fail(Error::InvalidProgram, at, ": keepdim is ", n.keepdim, ", expected 0 or 1");
        break;
      case Op::Full: n.value = f64(0); break;  // checked against the output's dtype with the dtypes
      case Op::Permute: {
        const int rank = p_.values[n.in[0]].rank;
        std::array<bool, kMaxDims> seen{};
        for (int k = 0; k < rank; ++k) {
          const int64_t d = i64(k);
          if (d < 0 || d >= rank || seen[d])
            return fail(Error::InvalidProgram, at, ": dims ", dims_str(raw, rank), " are not a permutation of 0..",
                        rank - 1);
          seen[d] = true;
          n.perm[k] = static_cast<uint8_t>(d);
        }
        break;
      }
      default: break;
    }
    return {};
  }

  /// Each op's dtype rules (PAYLOAD.md): bool only where an op reads or writes a mask, float32 everywhere else.
  Status dtypes(const NodeDesc& n, const std::string& at) const {
    const auto& V = p_.values;
    constexpr ScalarType F = ScalarType::Float, B = ScalarType::Bool;
    const auto want = [&](bool input, int k, ScalarType t) -> Status {
      const uint32_t id = input ? n.in[k] : n.out[k];
      if (id == kAbsent || V[id].dtype == t) return {};
      return fail(Error::InvalidProgram, at, ": ", input ? "input " : "output ", k, " (value ", id, ") is ",
                  numpy_name(V[id].dtype), ", expected ", numpy_name(t));
    };
    switch (n.op) {
      case Op::EqScalar:
        ETRT_CHECK_OK(want(true, 0, F));
        return want(false, 0, B);
      case Op::LogicalNot:
      case Op::Any:
        ETRT_CHECK_OK(want(true, 0, B));
        return want(false, 0, B);
      case Op::Where:
        ETRT_CHECK_OK(want(true, 0, B));
        ETRT_CHECK_OK(want(true, 1, F));
        ETRT_CHECK_OK(want(true, 2, F));
        return want(false, 0, F);
      case Op::Copy: return want(false, 0, V[n.in[0]].dtype);  // a reshape keeps the dtype, bool included
      case Op::Full:
        if (V[n.out[0]].is_bool() && n.value != 0.0 && n.value != 1.0)
          return fail(Error::InvalidProgram, at, ": value ", n.value, " does not fit the bool output (0 or 1)");
        return {};
      default:
        for (int k = 0; k < n.num_in; ++k) ETRT_CHECK_OK(want(true, k, F));
        for (int k = 0; k < n.num_out; ++k) ETRT_CHECK_OK(want(false, k, F));
        return {};
    }
  }

  /// Each op's shape rules; after this the kernels trust every size they are given.
  Status shapes(const NodeDesc& n, const std::string& at) const {
    const auto& V = p_.values;
    const auto sz = [&](int k) { return V[n.in[k]].shape(); };
    const std::span<const int64_t> out = V[n.out[0]].shape();
    const auto mismatch = [&](std::string_view what, std::span<const int64_t> expected) {
      return fail(Error::InvalidProgram, at, ": ", what, " has sizes ", shape_str(out), ", expected ",
                  shape_str(expected));
    };
    switch (n.op) {
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div: {
        std::array<int64_t, kMaxDims> b{};
        size_t rank = 0;
        if (!broadcast(sz(0), sz(1), b, rank))
          return fail(Error::InvalidProgram, at, ": input sizes ", shape_str(sz(0)), " and ", shape_str(sz(1)),
                      " do not broadcast");
        if (!same(out, {b.data(), rank})) return mismatch("output", {b.data(), rank});
        return {};
      }
      case Op::AddScalar:
      case Op::MulScalar:
      case Op::Relu:
      case Op::Gelu:
      case Op::Sigmoid:
      case Op::Tanh:
      case Op::Exp:
      case Op::Neg:
      case Op::Sqrt:
      case Op::Rsqrt:
        if (!same(out, sz(0))) return mismatch("output", sz(0));
        return {};
      case Op::Mm:
      case Op::Addmm:
      case Op::Bmm: {
        const bool batched = n.op == Op::Bmm;
        const size_t rank = batched ? 3 : 2;
        const int ai = n.op == Op::Addmm ? 1 : 0;
        const auto a = sz(ai), b = sz(ai + 1);
        if (a.size() != rank || b.size() != rank)
          return fail(Error::InvalidProgram, at, ": operands must have rank ", rank, ", got ", shape_str(a), " and ",
                      shape_str(b));
        if (a[rank - 1] != b[rank - 2] || (batched && a[0] != b[0]))
          return fail(Error::InvalidProgram, at, ": operand sizes ", shape_str(a), " and ", shape_str(b),
                      " cannot be multiplied");
        std::array<int64_t, 3> o{};
        if (batched) o = {a[0], a[1], b[2]};
        else o = {a[0], b[1], 0};
        const std::span<const int64_t> expected(o.data(), rank);
        if (!same(out, expected)) return mismatch("output", expected);
        if (n.op == Op::Addmm && !expands_to(sz(0), expected))
          return fail(Error::InvalidProgram, at, ": bias sizes ", shape_str(sz(0)), " do not broadcast to ",
                      shape_str(expected));
        return {};
      }
      case Op::Softmax: {
        const int64_t rank = static_cast<int64_t>(sz(0).size());
        if (n.dim < 0 || n.dim >= std::max<int64_t>(rank, 1))
          return fail(Error::InvalidProgram, at, ": dim ", n.dim, " is out of range for rank ", rank);
        if (!same(out, sz(0))) return mismatch("output", sz(0));
        return {};
      }
      case Op::LayerNorm: {
        const auto x = sz(0);
        const int64_t rank = static_cast<int64_t>(x.size());
        if (n.normalized_ndim < 1 || n.normalized_ndim > rank)
          return fail(Error::InvalidProgram, at, ": normalized_ndim ", n.normalized_ndim, " must be in 1..", rank,
                      " (the input's rank)");
        const std::span<const int64_t> normalized = x.subspan(static_cast<size_t>(rank - n.normalized_ndim));
        for (int k = 1; k < 3; ++k)
          if (n.in[k] != kAbsent && !same(sz(k), normalized))
            return fail(Error::InvalidProgram, at, ": ", k == 1 ? "weight" : "bias", " has sizes ",
                        shape_str(sz(k)), ", expected the normalized sizes ", shape_str(normalized));
        if (!same(out, x)) return mismatch("output 0", x);
        std::array<int64_t, kMaxDims> stats{};
        for (int64_t d = 0; d < rank; ++d) stats[d] = d < rank - n.normalized_ndim ? x[d] : 1;
        for (int k = 1; k < 3; ++k) {
          const auto got = V[n.out[k]].shape();
          if (!same(got, {stats.data(), static_cast<size_t>(rank)}))
            return fail(Error::InvalidProgram, at, ": output ", k, k == 1 ? " (mean)" : " (rstd)", " has sizes ",
                        shape_str(got), ", expected ", shape_str({stats.data(), static_cast<size_t>(rank)}));
        }
        return {};
      }
      case Op::Copy:
        if (V[n.out[0]].numel != V[n.in[0]].numel)
          return fail(Error::InvalidProgram, at, ": output sizes ", shape_str(out), " have a different element count "
                      "than the input's ", shape_str(sz(0)));
        return {};
      case Op::Permute: {
        const auto a = sz(0);
        std::array<int64_t, kMaxDims> o{};
        for (size_t d = 0; d < a.size(); ++d) o[d] = a[n.perm[d]];
        if (!same(out, {o.data(), a.size()})) return mismatch("output", {o.data(), a.size()});
        return {};
      }
      case Op::Expand:
        if (!expands_to(sz(0), out))
          return fail(Error::InvalidProgram, at, ": input sizes ", shape_str(sz(0)), " do not expand to the output's ",
                      shape_str(out));
        return {};
      case Op::Select: {
        const auto a = sz(0);
        const int64_t rank = static_cast<int64_t>(a.size());
        if (n.dim < 0 || n.dim >= rank)
          return fail(Error::InvalidProgram, at, ": dim ", n.dim, " is out of range for rank ", rank);
        if (n.index < 0 || n.index >= a[n.dim])
          return fail(Error::InvalidProgram, at, ": index ", n.index, " is out of range for size ", a[n.dim],
                      " of dim ", n.dim);
        std::array<int64_t, kMaxDims> o{};
        size_t r = 0;
        for (int64_t d = 0; d < rank; ++d)
          if (d != n.dim) o[r++] = a[d];
        if (!same(out, {o.data(), r})) return mismatch("output", {o.data(), r});
        return {};
      }
      case Op::EqScalar:
      case Op::LogicalNot:
        if (!same(out, sz(0))) return mismatch("output", sz(0));
        return {};
      case Op::Any: {
        const auto a = sz(0);
        const int64_t rank = static_cast<int64_t>(a.size());
        if (n.dim < 0 || n.dim >= std::max<int64_t>(rank, 1))
          return fail(Error::InvalidProgram, at, ": dim ", n.dim, " is out of range for rank ", rank);
        std::array<int64_t, kMaxDims> o{};
        size_t r = 0;
        for (int64_t d = 0; d < rank; ++d) {
          if (d != n.dim) o[r++] = a[d];
          else if (n.keepdim) o[r++] = 1;
        }
        if (!same(out, {o.data(), r})) return mismatch("output", {o.data(), r});
        return {};
      }
      case Op::Full: return {};  // the output's sizes are the op's only shape
      case Op::Where: {
        std::array<int64_t, kMaxDims> ab{}, abc{};
        size_t r1 = 0, r2 = 0;
        if (!broadcast(sz(1), sz(2), ab, r1) || !broadcast(sz(0), {ab.data(), r1}, abc, r2))
          return fail(Error::InvalidProgram, at, ": input sizes ", shape_str(sz(0)), ", ", shape_str(sz(1)), " and ",
                      shape_str(sz(2)), " do not broadcast");
        if (!same(out, {abc.data(), r2})) return mismatch("output", {abc.data(), r2});
        return {};
      }
    }
    return fail(Error::Internal, at, ": no shape rule");
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

  static std::string dims_str(const std::array<uint64_t, kMaxDims>& raw, int rank) {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) s += cat(i ? ", " : "", std::bit_cast<int64_t>(raw[i]));
    return s + "]";
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
