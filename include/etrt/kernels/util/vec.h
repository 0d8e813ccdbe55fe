// Fixed-width float vectors through the GCC / clang vector extension: a register of the target's width when the
// loop is compiled for it (16 lanes under AVX-512, 8 under AVX2), lowered to narrower registers otherwise. For loops
// the auto-vectorizer leaves scalar (conditional selects, integer bit tricks).
#pragma once

#include <cstdint>
#include <cstring>

#include "etrt/kernels/util/fast_math.h"

namespace etrt::kernels::vec {

template <int Lanes>
struct VecOf {  // a struct, not an alias template: GCC drops attributes on alias templates
  typedef float type __attribute__((vector_size(Lanes * sizeof(float))));
  typedef int32_t itype __attribute__((vector_size(Lanes * sizeof(int32_t))));
  typedef uint8_t btype __attribute__((vector_size(Lanes)));
};
template <int Lanes>
using Vec = typename VecOf<Lanes>::type;
template <int Lanes>
using IVec = typename VecOf<Lanes>::itype;
template <int Lanes>
using ByteVec = typename VecOf<Lanes>::btype;

// Through references: a vector passed by value wider than the translation unit's ISA changes the calling ABI.
template <class V>
[[gnu::always_inline]] inline void load(V& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}
template <class V>
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

/// Lanes bytes at p, as floats.
template <int Lanes>
[[gnu::always_inline]] inline Vec<Lanes> load_bytes(const uint8_t* p) {
  ByteVec<Lanes> b;
  std::memcpy(&b, p, sizeof b);
  // Through 16 and 32 bits: GCC converts bytes to floats or to int32 one lane at a time, each widening by two in
  // zero-extensions.
  typedef uint16_t Half __attribute__((vector_size(Lanes * sizeof(uint16_t))));
  return __builtin_convertvector(__builtin_convertvector(__builtin_convertvector(b, Half), IVec<Lanes>), Vec<Lanes>);
}

/// Stores v, whose lanes are integers within [0, 255], as bytes at p.
template <int Lanes>
[[gnu::always_inline]] inline void store_bytes(uint8_t* p, const Vec<Lanes>& v) {
  const ByteVec<Lanes> b = __builtin_convertvector(__builtin_convertvector(v, IVec<Lanes>), ByteVec<Lanes>);
  std::memcpy(p, &b, sizeof b);
}

/// v rounded to the nearest integer, ties to even, for |v| <= 2^22, on a float or a Vec: adding 1.5 x 2^23 leaves
/// no fraction bits, so the add rounds in the default mode and the subtract is exact. Two adds where nearbyint is
/// a library call per element that keeps a loop scalar. NaN stays NaN.
template <class T>
[[gnu::always_inline]] inline T round_small(T v) {
  constexpr float kShift = 12582912.0f;  // 1.5 x 2^23
  return (v + kShift) - kShift;
}

/// v within [lo, hi], for a float or a Vec; a NaN compares false and stays NaN.
template <class T>
[[gnu::always_inline]] inline T clamped(T v, float lo, float hi) {
  v = v < lo ? T{} + lo : v;
  return v > hi ? T{} + hi : v;
}

/// The dequantized point of a quantization grid nearest v: round(clamp(v x inv, qlo, qhi)) x scale, where qlo and
/// qhi are the stored integer range minus the zero point. |qlo|, |qhi| <= 2^22 (round_small's range). NaN stays
/// NaN: it is never converted to an integer here.
template <class T>
[[gnu::always_inline]] inline T grid_point(T v, float inv, float qlo, float qhi, float scale) {
  return round_small(clamped(v * inv, qlo, qhi)) * scale;
}

/// The range of x where e^x is a finite, normal float, as vec::exp and exp_fast bound it.
inline constexpr float kExpLo = -87.3365447504f, kExpHi = 88.3762626647949f;

/// e^x lane by lane for x already within [kExpLo, kExpHi] (not NaN): vec::exp without its handling of the ends.
template <int Lanes>
[[gnu::always_inline]] inline void exp_in_range(Vec<Lanes>& y, const Vec<Lanes>& x) {
  using V = Vec<Lanes>;
  using IV = IVec<Lanes>;
  const V n = round_small(x * 1.44269504088896341f);
  const V r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  V p;
  exp_reduced(p, r);
  const IV bits = (__builtin_convertvector(n, IV) + 127) << 23;
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  y = p * scale;
}

/// e^x lane by lane, the algorithm of kernels::exp_fast (within 2 ulp of libm): NaN stays NaN, x above ~88.38 is
/// inf, below ~-87.34 is 0.
template <int Lanes>
[[gnu::always_inline]] inline void exp(Vec<Lanes>& y, const Vec<Lanes>& x) {
  using V = Vec<Lanes>;
  V xc = x < kExpLo ? kExpLo : x;
  xc = xc > kExpHi ? kExpHi : xc;
  xc = x != x ? V{} : xc;  // the integer conversion below must see a finite value
  V out;
  exp_in_range<Lanes>(out, xc);
  out = x > kExpHi ? __builtin_inff() : out;
  out = x < kExpLo ? 0.0f : out;
  y = x != x ? x : out;
}

/// out = erf(x) lane by lane, on a float or a Vec (through references, as exp), within 2.5 ulp of the exact value
/// (1.2e-7 absolute): plain arithmetic and selects, so that it vectorizes where libm's erff is a call per element
/// (about a tenth of vit_b_32_q8's time, in its GELUs). Below |x| = 0.875 an odd polynomial x P(x^2); above,
/// 1 - e^(-x^2) R(x), R a polynomial in x mapped onto [-1, 1] over [0.875, 3.95] approximating erfc(x) e^(x^2); from
/// 3.95 on erf rounds to +-1. Both coefficient sets were fitted here by weighted least squares against the
/// double-precision erf (relative error of P and of R) and checked at two million points over [-6, 6] and the powers
/// of two below 1. NaN propagates; +-inf gives +-1. The float and the Vec forms run the same operations in the same
/// order, so a vector loop and its scalar tail agree element for element.
template <class T>
[[gnu::always_inline]] inline void erf(T& out, const T& x) {
  constexpr float kLo = 0.875f, kHi = 3.95f;
  const T a = x < 0.f ? -x : x;
  const T s = a * a;
  T p = s * 0.f + -0.0006199344643391669f;
  p = p * s + 0.0050314245745539665f;
  p = p * s + -0.02679094858467579f;
  p = p * s + 0.11282441020011902f;
  p = p * s + -0.3761254847049713f;
  p = p * s + 1.1283791065216064f;
  const T small = a * p;
  const T ac = a > kHi ? T{} + kHi : a;  // NaN stays NaN (the comparison is false)
  const T z = (ac - 0.5f * (kLo + kHi)) * (2.f / (kHi - kLo));
  T r = z * 0.f + -5.802566010970622e-05f;
  r = r * z + 0.00016204190615098923f;
  r = r * z + -0.00023943612177390605f;
  r = r * z + 0.0005433282349258661f;
  r = r * z + -0.0014500682009384036f;
  r = r * z + 0.0033497544936835766f;
  r = r * z + -0.007343201898038387f;
  r = r * z + 0.015714267268776894f;
  r = r * z + -0.03243425488471985f;
  r = r * z + 0.06419695168733597f;
  r = r * z + -0.12131204456090927f;
  r = r * z + 0.21750818192958832f;
  T e;
  if constexpr (sizeof(T) == sizeof(float)) e = exp_fast(-(ac * ac));
  else exp<sizeof(T) / sizeof(float)>(e, -(ac * ac));
  T y = a < kLo ? small : 1.f - e * r;
  y = a >= kHi ? T{} + 1.f : y;
  out = x < 0.f ? -y : y;
}

/// out = GELU(x), exact form, lane by lane: 0.5 x (1 + erf(x / sqrt 2)) with vec::erf.
template <class T>
[[gnu::always_inline]] inline void gelu_erf(T& out, const T& x) {
  T e;
  erf(e, x * 0.70710678118654752440f);
  out = 0.5f * x * (1.f + e);
}

}  // namespace etrt::kernels::vec
