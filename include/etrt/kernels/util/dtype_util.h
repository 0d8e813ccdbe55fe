// Type promotion and element conversion shared by the portable kernels.
#pragma once

#include <limits>
#include <complex>
#include <type_traits>

#include "etrt/core/tensor.h"

namespace etrt::kernels {

/// The arithmetic type a stored element type computes in: Half and BFloat16 compute in float.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

namespace detail {
constexpr int category(ScalarType t) {  // 0 bool, 1 integral, 2 floating, 3 complex
  if (t == ScalarType::Bool) return 0;
  if (is_complex(t)) return 3;
  if (is_floating(t)) return 2;
  return 1;
}
}  // namespace detail

/// torch.promote_types for the dtypes the runtime computes with.
constexpr ScalarType promote_types(ScalarType a, ScalarType b) {
  using ST = ScalarType;
  if (a == b) return a;
  const int ca = detail::category(a), cb = detail::category(b);
  if (ca != cb) {
    if (ca == 3 || cb == 3) {
      const ST other = ca == 3 ? b : a;
      const ST cplx = ca == 3 ? a : b;
      return (other == ST::Double || cplx == ST::ComplexDouble) ? ST::ComplexDouble : cplx;
    }
    return ca > cb ? a : b;
  }
  if (ca == 2) {
    if ((a == ST::Half && b == ST::BFloat16) || (a == ST::BFloat16 && b == ST::Half)) return ST::Float;
    if (a == ST::Double || b == ST::Double) return ST::Double;
    if (a == ST::Float || b == ST::Float) return ST::Float;
    return a;
  }
  if (ca == 3) return ST::ComplexDouble;
  // Integral: uint8 with a signed type needs the next wider signed type.
  auto rank = [](ST t) {
    switch (t) {
      case ST::Char: case ST::Byte: return 1;
      case ST::Short: case ST::UInt16: return 2;
      case ST::Int: case ST::UInt32: return 3;
      default: return 4;
    }
  };
  auto is_unsigned = [](ST t) { return t == ST::Byte || t == ST::UInt16 || t == ST::UInt32 || t == ST::UInt64; };
  if (is_unsigned(a) == is_unsigned(b)) return rank(a) >= rank(b) ? a : b;
  const ST u = is_unsigned(a) ? a : b, s = is_unsigned(a) ? b : a;
  if (rank(s) > rank(u)) return s;
  switch (rank(u)) {
    case 1: return ST::Short;
    case 2: return ST::Int;
    default: return ST::Long;
  }
}

/// torch's result_type for two tensor operands: a zero-dim operand only raises the category, not the width.
inline ScalarType result_type(const Tensor& a, const Tensor& b) {
  const bool za = a.dim() == 0, zb = b.dim() == 0;
  if (za == zb) return promote_types(a.dtype(), b.dtype());
  const Tensor& dimmed = za ? b : a;
  const Tensor& zero = za ? a : b;
  if (detail::category(zero.dtype()) > detail::category(dimmed.dtype())) {
    // e.g. int tensor + float rank-0 tensor -> default float; keep the zero-dim type's family.
    if (is_floating(zero.dtype()) && !is_floating(dimmed.dtype())) return ScalarType::Float;
    return promote_types(a.dtype(), b.dtype());
  }
  return dimmed.dtype();
}

/// The dtype a Scalar operand contributes when combined with a tensor of dtype `t` (torch's wrapped-number rule).
inline ScalarType result_type_with_scalar(ScalarType t, bool scalar_is_floating, bool scalar_is_bool) {
  if (scalar_is_bool) return t;
  if (scalar_is_floating && (is_integral(t, true))) return ScalarType::Float;
  if (!scalar_is_floating && t == ScalarType::Bool) return ScalarType::Long;
  return t;
}

/// Converts one element of dtype T to C.
template <class C, class T>
inline C convert(T v) {
  if constexpr (std::is_same_v<C, T>) {
    return v;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return convert<C>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<C, Half> || std::is_same_v<C, BFloat16>) {
    return C(convert<float>(v));
  } else if constexpr (std::is_same_v<C, bool>) {
    if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>)
      return v != T{};
    else
      return v != T{0};
  } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    if constexpr (std::is_same_v<C, std::complex<float>> || std::is_same_v<C, std::complex<double>>)
      return C(v);
    else
      return convert<C>(v.real());  // the real part, with the float rules below (NaN and range for integers)
  } else if constexpr (std::is_integral_v<C> && std::is_floating_point_v<T>) {
    // Out-of-range and NaN float-to-int conversions are undefined in C++: NaN becomes 0 and anything else
    // saturates to C's range (data can hold any float, the result must not be undefined behaviour).
    if (!(v == v)) return C{0};
    if (v <= static_cast<T>(std::numeric_limits<C>::lowest())) return std::numeric_limits<C>::lowest();
    if (v >= static_cast<T>(std::numeric_limits<C>::max())) return std::numeric_limits<C>::max();
    return static_cast<C>(v);
  } else {
    return static_cast<C>(v);
  }
}

/// Integer add/sub/mul wrap around (two's complement) as torch's do; signed overflow is undefined in C++, so they
/// compute in the unsigned type (at least `unsigned`, so that narrow types are not promoted back to int).
template <class C>
using wrap_unsigned_t = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
template <class C>
inline C wrapping_add(C x, C y) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>)
    return static_cast<C>(static_cast<wrap_unsigned_t<C>>(x) + static_cast<wrap_unsigned_t<C>>(y));
  else
    return static_cast<C>(x + y);
}
template <class C>
inline C wrapping_sub(C x, C y) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>)
    return static_cast<C>(static_cast<wrap_unsigned_t<C>>(x) - static_cast<wrap_unsigned_t<C>>(y));
  else
    return static_cast<C>(x - y);
}
template <class C>
inline C wrapping_mul(C x, C y) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>)
    return static_cast<C>(static_cast<wrap_unsigned_t<C>>(x) * static_cast<wrap_unsigned_t<C>>(y));
  else
    return static_cast<C>(x * y);
}

template <class C>
using LoadFn = C (*)(const void*, int64_t);
template <class C>
using StoreFn = void (*)(void*, int64_t, C);

/// One element of a bool tensor. Its byte is read as a byte: memory planning may hand a bool tensor bytes another
/// dtype wrote (a hostile plan can overlap them), and loading a byte other than 0 or 1 as bool is undefined.
inline bool load_bool(const void* base, int64_t i) { return static_cast<const uint8_t*>(base)[i] != 0; }

template <class C, class T>
inline C load_as(const void* base, int64_t i) {
  if constexpr (std::is_same_v<T, bool>)
    return convert<C>(load_bool(base, i));
  else
    return convert<C>(static_cast<const T*>(base)[i]);
}
template <class C, class T>
inline void store_as(void* base, int64_t i, C v) {
  static_cast<T*>(base)[i] = convert<T>(v);
}

/// `pick.template operator()<T>()` for the stored type T of dtype `st` (over all_types); null when none matches.
/// The one dtype-to-function lookup behind the loaders, storers and the elementwise engine's row converters.
template <class Fn, class Pick>
inline Fn pick_for_dtype(ScalarType st, Pick pick) {
  Fn fn = nullptr;
  [&]<class... Ts>(types<Ts...>) {
    (void)((st == dtype_of<Ts> ? (fn = pick.template operator()<Ts>(), true) : false) || ...);
  }(all_types{});
  return fn;
}

/// A loader from any stored dtype to C, chosen once per tensor; null for an unsupported dtype.
template <class C>
inline LoadFn<C> loader_for(ScalarType st) {
  return pick_for_dtype<LoadFn<C>>(st, []<class T>() { return &load_as<C, T>; });
}
template <class C>
inline StoreFn<C> storer_for(ScalarType st) {
  return pick_for_dtype<StoreFn<C>>(st, []<class T>() { return &store_as<C, T>; });
}

/// Reads a Scalar as the compute type C.
template <class C>
inline C scalar_as(const Scalar& s) {
  if (s.is_floating()) return convert<C>(std::get<double>(s.v));
  if (s.is_bool()) return convert<C>(std::get<bool>(s.v));
  return convert<C>(std::get<int64_t>(s.v));
}

}  // namespace etrt::kernels
