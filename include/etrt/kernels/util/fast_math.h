// Vectorizable float math for hot loops: GCC does not vectorize calls to libm's expf, nor float reductions
// (which would need reassociation), so these are written as plain arithmetic and lane-split accumulators.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "etrt/kernels/util/isa.h"

namespace etrt::kernels {

/// p = e^r for |r| <= ln2 / 2: Taylor terms through r^7 / 5040, truncation error below 2e-8 relative. T is float or
/// a float vector (util/vec.h), passed by reference: a vector passed by value wider than the translation unit's
/// ISA changes the calling ABI.
template <class T>
[[gnu::always_inline]] inline void exp_reduced(T& p, const T& r) {
  p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
}

/// e^x for float, within 2 ulp of libm over the normal range; NaN propagates, large x gives inf, small x 0.
inline float exp_fast(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;        // ln 2 split so that n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  // Written so that NaN lands on the lower bound: the integer conversion below must see a finite value.
  const float xc = x >= -87.3365447504f ? (x <= 88.3762626647949f ? x : 88.3762626647949f) : -87.3365447504f;
  // Round to nearest by adding and removing 1.5 * 2^23 (SSE2 has no vector round instruction; nearbyint
  // would be a libm call per element).
  constexpr float kRound = 12582912.0f;
  const float n = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  float p;
  exp_reduced(p, r);
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float y = p * std::bit_cast<float>(bits);
  y = x > 88.3762626647949f ? std::numeric_limits<float>::infinity() : y;
  y = x < -87.3365447504f ? 0.0f : y;
  return x != x ? x : y;
}

inline constexpr int kLanes = 16;

/// Dot product with lane-split partial sums (vectorizes without reassociation flags).
[[gnu::always_inline]] inline float dot_lanes(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int w = kLanes / 2; w > 0; w /= 2)  // pairwise: vector adds instead of a chain of L scalar ones
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  float s = acc[0];
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// max over n floats (NaN-ignoring; callers that need NaN propagation get it from the following arithmetic).
inline float max_lanes(const float* x, int64_t n) {
  return isa::dispatch([&]() ETRT_ISA_INLINE {
    float acc[kLanes];
    for (float& a : acc) a = -std::numeric_limits<float>::infinity();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
    float m = -std::numeric_limits<float>::infinity();
    for (int k = 0; k < kLanes; ++k) m = acc[k] > m ? acc[k] : m;
    for (; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
  });
}

/// y[i] = exp(x[i] - shift); returns the sum of the y (lane-split, then combined).
inline float exp_shift_sum(const float* x, float* y, int64_t n, float shift) {
  return isa::dispatch([&]() ETRT_ISA_INLINE {
    float acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) {
        const float e = exp_fast(x[i + k] - shift);
        y[i + k] = e;
        acc[k] += e;
      }
    float s = 0;
    for (int k = 0; k < kLanes; ++k) s += acc[k];
    for (; i < n; ++i) {
      y[i] = exp_fast(x[i] - shift);
      s += y[i];
    }
    return s;
  });
}

}  // namespace etrt::kernels
