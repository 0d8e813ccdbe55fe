// Contiguous float loops for the elementwise node kinds in the shapes XNNPACK graphs use them: equal shapes, a
// scalar, or a vector repeated over the rows (a channel scale or bias in NHWC, as squeeze-and-excitation and
// swish produce). The loops are plain enough for the compiler to vectorize, and split across threads when long;
// any other broadcast goes to the portable kernels' general engine (node_run.h).
#pragma once

#include <cstdint>

#include "etrt/backends/xnnpack/shape_inference.h"
#include "etrt/kernels/util/fast_math.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/vec.h"

namespace etrt::xnnpack::fast {

// The binary operations, with torch's NaN rule for minimum / maximum (a NaN on either side is the result).
struct Add {
  float operator()(float a, float b) const { return a + b; }
};
struct Sub {
  float operator()(float a, float b) const { return a - b; }
};
struct Mul {
  float operator()(float a, float b) const { return a * b; }
};
struct Div {
  float operator()(float a, float b) const { return a / b; }
};
struct Min {
  float operator()(float a, float b) const { return (a < b || a != a) ? a : b; }
};
struct Max {
  float operator()(float a, float b) const { return (a > b || a != a) ? a : b; }
};

/// The number of trailing elements of `full` that `part` covers when `part`, with its leading 1s dropped, equals the
/// trailing dims of `full` (a scalar covers 1); -1 otherwise.
inline int64_t repeated_suffix(const ValueShape& part, const ValueShape& full) {
  uint32_t lead = 0;
  while (lead < part.rank && part.d[lead] == 1) ++lead;
  const uint32_t len = part.rank - lead;
  if (len > full.rank) return -1;
  int64_t inner = 1;
  for (uint32_t k = 0; k < len; ++k) {
    if (part.d[lead + k] != full.d[full.rank - len + k]) return -1;
    inner *= part.d[lead + k];
  }
  return inner;
}

/// o = op(a, b) when the shapes are one of the fast patterns; false (nothing written) otherwise.
template <class Op>
inline bool binary(const ValueShape& as, const float* a, const ValueShape& bs, const float* b, const ValueShape& os,
                   float* o, Op op) {
  const int64_t n = os.numel();
  if (as == os && bs == os) {
    kernels::parallel_elements(n, 1, [&](int64_t i0, int64_t i1) {
      kernels::isa::dispatch_avx2([&]() ETRT_ISA_INLINE {
        for (int64_t i = i0; i < i1; ++i) o[i] = op(a[i], b[i]);
      });
    });
    return true;
  }
  const bool a_full = as == os;
  if (!a_full && !(bs == os)) return false;
  const int64_t inner = a_full ? repeated_suffix(bs, os) : repeated_suffix(as, os);
  if (inner <= 0) return false;
  // Split by whole rows of `inner` elements.
  kernels::parallel_elements(n / inner, inner, [&](int64_t r0, int64_t r1) {
    kernels::isa::dispatch_avx2([&]() ETRT_ISA_INLINE {
      if (a_full) {
        for (int64_t r = r0 * inner; r < r1 * inner; r += inner)
          for (int64_t c = 0; c < inner; ++c) o[r + c] = op(a[r + c], b[c]);
      } else {
        for (int64_t r = r0 * inner; r < r1 * inner; r += inner)
          for (int64_t c = 0; c < inner; ++c) o[r + c] = op(a[c], b[r + c]);
      }
    });
  });
  return true;
}

/// y = 1 / (1 + e^-x) with the lane-wise exp (kernels/util/vec.h, within 2 ulp of libm's expf): large negative x
/// gives 0, NaN stays NaN.
/// Bound by arithmetic (the exp), so AVX-512 where there is one, and split across threads when long.
inline void sigmoid(const float* x, float* y, int64_t n) {
  kernels::parallel_elements(n, 16, [&](int64_t i0, int64_t i1) {
    kernels::isa::dispatch([&]() ETRT_ISA_INLINE {
      constexpr int L = 16;
      using V = kernels::vec::Vec<L>;
      int64_t i = i0;
      for (; i + L <= i1; i += L) {
        V v, e;
        kernels::vec::load(v, x + i);
        kernels::vec::exp<L>(e, -v);
        kernels::vec::store(y + i, 1.0f / (1.0f + e));
      }
      for (; i < i1; ++i) y[i] = 1.0f / (1.0f + kernels::exp_fast(-x[i]));
    });
  });
}

}  // namespace etrt::xnnpack::fast
