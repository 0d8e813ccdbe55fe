// ScalarType: the dtype numbering shared by the .pte schema, the runtime and c10 (0..29).
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "etrt/core/half.h"
#include "etrt/core/result.h"

namespace etrt {

enum class ScalarType : int8_t {
  Byte = 0,
  Char = 1,
  Short = 2,
  Int = 3,
  Long = 4,
  Half = 5,
  Float = 6,
  Double = 7,
  ComplexHalf = 8,
  ComplexFloat = 9,
  ComplexDouble = 10,
  Bool = 11,
  QInt8 = 12,
  QUInt8 = 13,
  QInt32 = 14,
  BFloat16 = 15,
  QUInt4x2 = 16,
  QUInt2x4 = 17,
  Bits1x8 = 18,
  Bits2x4 = 19,
  Bits4x2 = 20,
  Bits8 = 21,
  Bits16 = 22,
  Float8_e5m2 = 23,
  Float8_e4m3fn = 24,
  Float8_e5m2fnuz = 25,
  Float8_e4m3fnuz = 26,
  UInt16 = 27,
  UInt32 = 28,
  UInt64 = 29,
};

inline constexpr int kNumScalarTypes = 30;

constexpr bool is_valid(ScalarType t) {
  const int v = static_cast<int>(t);
  return v >= 0 && v < kNumScalarTypes;
}

namespace scalar_type_detail {
struct Info {
  uint8_t size;
  std::string_view name, numpy_name;
};
/// One row per ScalarType, by code: element size in bytes, the runtime's name, the NumPy / torch spelling.
inline constexpr Info kInfo[kNumScalarTypes] = {
    {1, "Byte", "uint8"},  // 0
    {1, "Char", "int8"},  // 1
    {2, "Short", "int16"},  // 2
    {4, "Int", "int32"},  // 3
    {8, "Long", "int64"},  // 4
    {2, "Half", "float16"},  // 5
    {4, "Float", "float32"},  // 6
    {8, "Double", "float64"},  // 7
    {4, "ComplexHalf", "complex32"},  // 8
    {8, "ComplexFloat", "complex64"},  // 9
    {16, "ComplexDouble", "complex128"},  // 10
    {1, "Bool", "bool"},  // 11
    {1, "QInt8", "qint8"},  // 12
    {1, "QUInt8", "quint8"},  // 13
    {4, "QInt32", "qint32"},  // 14
    {2, "BFloat16", "bfloat16"},  // 15
    {1, "QUInt4x2", "quint4x2"},  // 16
    {1, "QUInt2x4", "quint2x4"},  // 17
    {1, "Bits1x8", "bits1x8"},  // 18
    {1, "Bits2x4", "bits2x4"},  // 19
    {1, "Bits4x2", "bits4x2"},  // 20
    {1, "Bits8", "bits8"},  // 21
    {2, "Bits16", "bits16"},  // 22
    {1, "Float8_e5m2", "float8_e5m2"},  // 23
    {1, "Float8_e4m3fn", "float8_e4m3fn"},  // 24
    {1, "Float8_e5m2fnuz", "float8_e5m2fnuz"},  // 25
    {1, "Float8_e4m3fnuz", "float8_e4m3fnuz"},  // 26
    {2, "UInt16", "uint16"},  // 27
    {4, "UInt32", "uint32"},  // 28
    {8, "UInt64", "uint64"},  // 29
};
}  // namespace scalar_type_detail

/// Element size in bytes; 0 for a value outside 0..29.
constexpr size_t element_size(ScalarType t) {
  return is_valid(t) ? scalar_type_detail::kInfo[static_cast<int>(t)].size : 0;
}

/// The runtime's name for a dtype ("Float"), as upstream's toString prints it (TensorInfo repr).
constexpr std::string_view name(ScalarType t) {
  return is_valid(t) ? scalar_type_detail::kInfo[static_cast<int>(t)].name : std::string_view("Undefined");
}

/// The NumPy / torch spelling of a dtype ("float32", "bfloat16").
constexpr std::string_view numpy_name(ScalarType t) {
  return is_valid(t) ? scalar_type_detail::kInfo[static_cast<int>(t)].numpy_name : std::string_view("undefined");
}

constexpr bool is_floating(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half ||
         t == ScalarType::BFloat16;
}
constexpr bool is_integral(ScalarType t, bool include_bool) {
  switch (t) {
    case ScalarType::Byte: case ScalarType::Char: case ScalarType::Short: case ScalarType::Int:
    case ScalarType::Long: case ScalarType::UInt16: case ScalarType::UInt32: case ScalarType::UInt64:
      return true;
    case ScalarType::Bool:
      return include_bool;
    default:
      return false;
  }
}
constexpr bool is_complex(ScalarType t) {
  return t == ScalarType::ComplexHalf || t == ScalarType::ComplexFloat || t == ScalarType::ComplexDouble;
}

// ---- C++ type <-> ScalarType -------------------------------------------------------------------------------

template <class T>
struct dtype_traits;
#define ETRT_DTYPE(CTYPE, ST)                                        \
  template <>                                                        \
  struct dtype_traits<CTYPE> {                                       \
    static constexpr ScalarType value = ScalarType::ST;              \
  };
ETRT_DTYPE(uint8_t, Byte)
ETRT_DTYPE(int8_t, Char)
ETRT_DTYPE(int16_t, Short)
ETRT_DTYPE(int32_t, Int)
ETRT_DTYPE(int64_t, Long)
ETRT_DTYPE(Half, Half)
ETRT_DTYPE(float, Float)
ETRT_DTYPE(double, Double)
ETRT_DTYPE(std::complex<float>, ComplexFloat)
ETRT_DTYPE(std::complex<double>, ComplexDouble)
ETRT_DTYPE(bool, Bool)
ETRT_DTYPE(BFloat16, BFloat16)
ETRT_DTYPE(uint16_t, UInt16)
ETRT_DTYPE(uint32_t, UInt32)
ETRT_DTYPE(uint64_t, UInt64)
#undef ETRT_DTYPE

template <class T>
inline constexpr ScalarType dtype_of = dtype_traits<T>::value;

// ---- named type lists and one visit function instead of a macro family ----------------------------------------

template <class... Ts>
struct types {};

using int_types = types<uint8_t, int8_t, int16_t, int32_t, int64_t>;
using float_types = types<float, double, Half, BFloat16>;
using real_types = types<uint8_t, int8_t, int16_t, int32_t, int64_t, float, double, Half, BFloat16>;
using real_bool_types = types<uint8_t, int8_t, int16_t, int32_t, int64_t, float, double, Half, BFloat16, bool>;
using all_types = types<uint8_t, int8_t, int16_t, int32_t, int64_t, float, double, Half, BFloat16, bool, uint16_t,
                        uint32_t, uint64_t, std::complex<float>, std::complex<double>>;

template <class... Ts>
constexpr bool contains(types<Ts...>, ScalarType st) {
  return ((dtype_of<Ts> == st) || ...);
}

/// Calls `f.template operator()<T>()` for the T in the list whose dtype is `st`; fails naming `op` otherwise.
template <class... Ts, class F>
inline Status visit(ScalarType st, types<Ts...>, std::string_view op, F&& f) {
  Status result;
  const bool found = ((st == dtype_of<Ts> && ((result = f.template operator()<Ts>()), true)) || ...);
  if (!found) return fail(Error::InvalidArgument, op, ": unsupported dtype ", name(st));
  return result;
}

}  // namespace etrt
