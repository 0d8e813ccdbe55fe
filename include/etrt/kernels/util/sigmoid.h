// The logistic function over float arrays at the machine's width, shared by the portable sigmoid and the XNNPACK
// delegate's Sigmoid node (which rounds the result onto a quantized grid through `out`), and x * sigmoid(x) (SiLU),
// which the delegate computes as a convolution writes its output (Note [xnnpack silu]).
//
// y = 1 / (1 + e^-x) with the lane-wise exp (vec::exp's values, within 2 ulp of libm's expf, computed without its
// end handling and the ends restored on y): +inf (x below about -88) gives 0 and NaN stays NaN. The division
// stays: a reciprocal estimate with a Newton step measured slower on efficientnet_b0's activations, which this loop
// reads from L2, and saved under 10% standalone.
#pragma once

#include <cstdint>

#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/vec.h"

namespace etrt::kernels {

namespace detail {
/// y[i] = out(sigmoid(x[i])), or out(x[i] * sigmoid(x[i])) with kTimesX, for the whole 16-lane blocks of [0, n);
/// returns how many it did.
template <bool kTimesX, class Out>
inline int64_t logistic_blocks(const float* x, float* y, int64_t n, const Out& out) {
  return isa::dispatch([&]() ETRT_ISA_INLINE {
    using V = vec::Vec<16>;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      V v;
      vec::load(v, x + i);
      // e^-v as vec::exp computes it inside its finite range, without its selects for the ends: -v is clamped
      // into the range (a NaN to its low end), and what the ends give is restored on s. The same values as
      // 1 / (1 + vec::exp(-v)), element for element, in about four fifths of the time.
      V t = -v;
      t = t > vec::kExpLo ? t : vec::kExpLo;  // a NaN compares false: the integer conversion below sees a finite value
      t = t < vec::kExpHi ? t : vec::kExpHi;
      V e;
      vec::exp_in_range<16>(e, t);
      V s = 1.0f / (1.0f + e);
      s = v < -vec::kExpHi ? V{} : s;  // e^-v overflows: vec::exp's inf, 1 / inf
      if constexpr (kTimesX) {
        vec::store(y + i, out(v * s));  // a NaN v makes the product NaN
      } else {
        s = v != v ? v : s;
        vec::store(y + i, out(s));
      }
    }
    return i;
  });
}
}  // namespace detail

/// y[i] = out(sigmoid(x[i])) for the whole 16-lane blocks of [0, n); returns how many it did (the caller finishes
/// the tail with its scalar form). `out` maps a Vec<16> (the identity, or a rounding onto a grid).
template <class Out>
inline int64_t sigmoid_blocks(const float* x, float* y, int64_t n, const Out& out) {
  return detail::logistic_blocks<false>(x, y, n, out);
}

/// y[i] = out(x[i] * sigmoid(x[i])) for the whole 16-lane blocks of [0, n), as sigmoid_blocks then a multiply
/// would give it (the same roundings in the same order); returns how many it did.
template <class Out>
inline int64_t silu_blocks(const float* x, float* y, int64_t n, const Out& out) {
  return detail::logistic_blocks<true>(x, y, n, out);
}

}  // namespace etrt::kernels
