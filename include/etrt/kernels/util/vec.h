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
};
template <int Lanes>
using Vec = typename VecOf<Lanes>::type;
template <int Lanes>
using IVec = typename VecOf<Lanes>::itype;

// Through references: a vector passed by value wider than the translation unit's ISA changes the calling ABI.
template <class V>
[[gnu::always_inline]] inline void load(V& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}
template <class V>
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
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

/// e^x lane by lane, the algorithm of kernels::exp_fast (within 2 ulp of libm): NaN stays NaN, x above ~88.38 is
/// inf, below ~-87.34 is 0.
template <int Lanes>
[[gnu::always_inline]] inline void exp(Vec<Lanes>& y, const Vec<Lanes>& x) {
  using V = Vec<Lanes>;
  using IV = IVec<Lanes>;
  constexpr float kHi = 88.3762626647949f, kLo = -87.3365447504f;
  V xc = x < kLo ? kLo : x;
  xc = xc > kHi ? kHi : xc;
  xc = x != x ? V{} : xc;  // the integer conversion below must see a finite value
  const V n = round_small(xc * 1.44269504088896341f);
  const V r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  V p;
  exp_reduced(p, r);
  const IV bits = (__builtin_convertvector(n, IV) + 127) << 23;
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  V out = p * scale;
  out = x > kHi ? __builtin_inff() : out;
  out = x < kLo ? 0.0f : out;
  y = x != x ? x : out;
}

}  // namespace etrt::kernels::vec
