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

// The binary operations, with torch's NaN rule for minimum / maximum (a NaN on either side is the result), on a
// float or a Vec.
struct Add {
  template <class T>
  T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <class T>
  T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <class T>
  T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <class T>
  T operator()(T a, T b) const { return a / b; }
};
struct Min {
  template <class T>
  T operator()(T a, T b) const { return (a < b) | (a != a) ? a : b; }
};
struct Max {
  template <class T>
  T operator()(T a, T b) const { return (a > b) | (a != a) ? a : b; }
};

/// A per-tensor quantized output rounded as the loop writes it: clamped to [lo, hi] (the node's output_min_max,
/// infinite for none), then onto its grid, the executor's requantize pass (Note [xnnpack quantized values]) done
/// on the registers. Stored values equal the pass's.
struct OutGrid {
  float lo, hi, inv, qlo, qhi, scale;
  template <class T>
  [[gnu::always_inline]] T operator()(T v) const {
    return kernels::vec::grid_point(kernels::vec::clamped(v, lo, hi), inv, qlo, qhi, scale);
  }
};
/// A float output: stored as computed.
struct AsIs {
  template <class T>
  [[gnu::always_inline]] T operator()(T v) const { return v; }
};

/// o[i] = out(op(a[i], b[i])) for i < n, where a or b may be a single value repeated (a_step / b_step 0), 16 lanes
/// at a time. Spelled in vectors: the module's -O2 leaves a loop of unknown trip count scalar.
template <class Op, class Out>
[[gnu::always_inline]] inline void map2(const float* a, int a_step, const float* b, int b_step, float* o, int64_t n,
                                        Op op, Out out) {
  using V = kernels::vec::Vec<16>;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    V va, vb;
    if (a_step) kernels::vec::load(va, a + i);
    else va = V{} + a[0];
    if (b_step) kernels::vec::load(vb, b + i);
    else vb = V{} + b[0];
    kernels::vec::store(o + i, out(op(va, vb)));
  }
  for (; i < n; ++i) o[i] = out(op(a[a_step ? i : 0], b[b_step ? i : 0]));
}

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

/// o = out(op(a, b)) when the shapes are one of the fast patterns; false (nothing written) otherwise.
template <class Op, class Out = AsIs>
inline bool binary(const ValueShape& as, const float* a, const ValueShape& bs, const float* b, const ValueShape& os,
                   float* o, Op op, Out out = {}) {
  const int64_t n = os.numel();
  if (as == os && bs == os) {
    kernels::parallel_elements(n, 1, [&](int64_t i0, int64_t i1) {
      kernels::isa::dispatch([&]() ETRT_ISA_INLINE { map2(a + i0, 1, b + i0, 1, o + i0, i1 - i0, op, out); });
    });
    return true;
  }
  const bool a_full = as == os;
  if (!a_full && !(bs == os)) return false;
  const int64_t inner = a_full ? repeated_suffix(bs, os) : repeated_suffix(as, os);
  if (inner <= 0) return false;
  if (inner == 1) {  // a scalar on one side
    kernels::parallel_elements(n, 1, [&](int64_t i0, int64_t i1) {
      kernels::isa::dispatch([&]() ETRT_ISA_INLINE {
        if (a_full) map2(a + i0, 1, b, 0, o + i0, i1 - i0, op, out);
        else map2(a, 0, b + i0, 1, o + i0, i1 - i0, op, out);
      });
    });
    return true;
  }
  // A row repeated: split by whole rows of `inner` elements.
  kernels::parallel_elements(n / inner, inner, [&](int64_t r0, int64_t r1) {
    kernels::isa::dispatch([&]() ETRT_ISA_INLINE {
      for (int64_t r = r0 * inner; r < r1 * inner; r += inner) {
        if (a_full) map2(a + r, 1, b, 1, o + r, inner, op, out);
        else map2(a, 1, b + r, 1, o + r, inner, op, out);
      }
    });
  });
  return true;
}

/// y = 1 / (1 + e^-x) with the lane-wise exp (kernels/util/vec.h, within 2 ulp of libm's expf): large negative x
/// gives 0, NaN stays NaN.
/// Bound by arithmetic (the exp), so AVX-512 where there is one, and split across threads when long.
template <class Out = AsIs>
inline void sigmoid(const float* x, float* y, int64_t n, Out out = {}) {
  kernels::parallel_elements(n, 16, [&](int64_t i0, int64_t i1) {
    kernels::isa::dispatch([&]() ETRT_ISA_INLINE {
      constexpr int L = 16;
      using V = kernels::vec::Vec<L>;
      int64_t i = i0;
      for (; i + L <= i1; i += L) {
        V v, e;
        kernels::vec::load(v, x + i);
        kernels::vec::exp<L>(e, -v);
        kernels::vec::store(y + i, out(1.0f / (1.0f + e)));
      }
      for (; i < i1; ++i) y[i] = out(1.0f / (1.0f + kernels::exp_fast(-x[i])));
    });
  });
}

}  // namespace etrt::xnnpack::fast
