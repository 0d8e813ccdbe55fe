// Dtype translation between ScalarType and the buffer protocol, DLPack and torch spellings.
#pragma once

#include <optional>
#include <string_view>

#include "etrt/adapters/dlpack_abi.h"
#include "etrt/core/scalar_type.h"

namespace etrt::python {

/// PEP 3118 format for a dtype, or empty when the protocol has no code for it (bfloat16 goes out as bytes).
inline std::string_view buffer_format(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "B";
    case ScalarType::Char: return "b";
    case ScalarType::Short: return "h";
    case ScalarType::Int: return "i";
    case ScalarType::Long: return "q";
    case ScalarType::Half: return "e";
    case ScalarType::Float: return "f";
    case ScalarType::Double: return "d";
    case ScalarType::Bool: return "?";
    case ScalarType::UInt16: return "H";
    case ScalarType::UInt32: return "I";
    case ScalarType::UInt64: return "Q";
    case ScalarType::ComplexFloat: return "Zf";
    case ScalarType::ComplexDouble: return "Zd";
    default: return {};
  }
}

/// Parses a PEP 3118 format string of one element (native or explicit little-endian, standard sizes).
inline std::optional<ScalarType> parse_buffer_format(std::string_view f, size_t itemsize) {
  if (f.empty()) f = "B";
  char order = '@';
  if (f[0] == '@' || f[0] == '=' || f[0] == '<' || f[0] == '>' || f[0] == '!') {
    order = f[0];
    f.remove_prefix(1);
  }
  if (order == '>' || order == '!') return std::nullopt;  // big-endian data would need a byte swap
  if (f == "Zf") return ScalarType::ComplexFloat;
  if (f == "Zd") return ScalarType::ComplexDouble;
  if (f.size() != 1) return std::nullopt;
  const auto by_size_signed = [&](size_t s) -> std::optional<ScalarType> {
    switch (s) {
      case 1: return ScalarType::Char;
      case 2: return ScalarType::Short;
      case 4: return ScalarType::Int;
      case 8: return ScalarType::Long;
      default: return std::nullopt;
    }
  };
  const auto by_size_unsigned = [&](size_t s) -> std::optional<ScalarType> {
    switch (s) {
      case 1: return ScalarType::Byte;
      case 2: return ScalarType::UInt16;
      case 4: return ScalarType::UInt32;
      case 8: return ScalarType::UInt64;
      default: return std::nullopt;
    }
  };
  switch (f[0]) {
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': return by_size_signed(itemsize);
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': case 'c': return by_size_unsigned(itemsize);
    case '?': return ScalarType::Bool;
    case 'e': return ScalarType::Half;
    case 'f': return ScalarType::Float;
    case 'd': return ScalarType::Double;
    default: return std::nullopt;
  }
}

/// DLPack dtype for a ScalarType (DLDataTypeCode: 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool).
inline std::optional<DLDataType> to_dlpack_dtype(ScalarType t) {
  const auto bits = static_cast<uint8_t>(element_size(t) * 8);
  switch (t) {
    case ScalarType::Char: case ScalarType::Short: case ScalarType::Int: case ScalarType::Long:
      return DLDataType{0, bits, 1};
    case ScalarType::Byte: case ScalarType::UInt16: case ScalarType::UInt32: case ScalarType::UInt64:
      return DLDataType{1, bits, 1};
    case ScalarType::Half: case ScalarType::Float: case ScalarType::Double: return DLDataType{2, bits, 1};
    case ScalarType::BFloat16: return DLDataType{4, 16, 1};
    case ScalarType::ComplexFloat: case ScalarType::ComplexDouble: return DLDataType{5, bits, 1};
    case ScalarType::Bool: return DLDataType{6, 8, 1};
    default: return std::nullopt;
  }
}

inline std::optional<ScalarType> from_dlpack_dtype(DLDataType d) {
  if (d.lanes != 1) return std::nullopt;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto st = static_cast<ScalarType>(i);
    if (auto dd = to_dlpack_dtype(st); dd && dd->code == d.code && dd->bits == d.bits) return st;
  }
  if (d.code == 1 && d.bits == 8) return ScalarType::Byte;
  return std::nullopt;
}

/// torch dtype spelling ("torch.float32") to ScalarType.
inline std::optional<ScalarType> from_torch_dtype_name(std::string_view n) {
  if (n.starts_with("torch.")) n.remove_prefix(6);
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (numpy_name(static_cast<ScalarType>(i)) == n) return static_cast<ScalarType>(i);
  if (n == "float") return ScalarType::Float;
  if (n == "double") return ScalarType::Double;
  if (n == "half") return ScalarType::Half;
  if (n == "long") return ScalarType::Long;
  if (n == "int") return ScalarType::Int;
  return std::nullopt;
}

}  // namespace etrt::python
