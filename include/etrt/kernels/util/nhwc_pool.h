// 2-D max pooling on NHWC activations (the layout XNNPACK payloads use), float: per output pixel, the maximum of
// the window's in-bounds taps, eight channels at a time along the contiguous channel dim. Padding taps count as
// -infinity (a window entirely in the padding gives -infinity), a NaN in the window gives NaN, as torch's max_pool2d.
// No indices are computed: an XNNPACK MaxPooling2d node has none.
#pragma once

#include <cstdint>
#include <limits>

#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/nhwc_conv.h"  // Geometry
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/vec.h"

namespace etrt::kernels::nhwc {

namespace detail {

/// The NaN-propagating maximum: x wins when it is larger or NaN.
template <class T>
[[gnu::always_inline]] inline T max_nan(T m, T x) {
  return (x > m) | (x != x) ? x : m;
}
[[gnu::always_inline]] inline float max_nan(float m, float x) { return x > m || x != x ? x : m; }

/// The most taps a window gathers into its tap list; a larger window reads its taps through the output instead.
inline constexpr int64_t kMaxPoolTaps = 64;

/// Output rows [r0, r1) (row = n * OH + oh); O == C. The window's in-bounds taps are listed once per output pixel,
/// then each register of channels takes their maximum in a register and is stored once.
inline void max_pool_rows(const Geometry& g, const float* in, float* out, int64_t r0, int64_t r1) {
  isa::dispatch_avx2([&]() ETRT_ISA_INLINE {
    using V = vec::Vec<8>;
    const float ninf = -std::numeric_limits<float>::infinity();
    const int64_t C = g.C;
    const bool listed = g.KH * g.KW <= kMaxPoolTaps;
    const float* taps[kMaxPoolTaps];
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t oh = row % g.OH, n = row / g.OH;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        float* o = out + (row * g.OW + ow) * C;
        if (listed) {
          int64_t nt = 0;
          for_each_tap(g, in, n, oh, ow, [&](int64_t, const float* x) ETRT_ISA_INLINE { taps[nt++] = x; });
          int64_t c = 0;
          for (; c + 8 <= C; c += 8) {
            V m = V{} + ninf, v;
            for (int64_t t = 0; t < nt; ++t) {
              vec::load(v, taps[t] + c);
              m = max_nan(m, v);
            }
            vec::store(o + c, m);
          }
          for (; c < C; ++c) {
            float m = ninf;
            for (int64_t t = 0; t < nt; ++t) m = max_nan(m, taps[t][c]);
            o[c] = m;
          }
          continue;
        }
        for (int64_t c = 0; c < C; ++c) o[c] = ninf;
        for_each_tap(g, in, n, oh, ow, [&](int64_t, const float* x) ETRT_ISA_INLINE {
          int64_t c = 0;
          for (; c + 8 <= C; c += 8) {
            V m, v;
            vec::load(m, o + c);
            vec::load(v, x + c);
            vec::store(o + c, max_nan(m, v));
          }
          for (; c < C; ++c) o[c] = max_nan(o[c], x[c]);
        });
      }
    }
  });
}

}  // namespace detail

/// out [N, OH, OW, C] = max pooling of in [N, H, W, C] over g's window (g.O == g.C; the geometry is valid).
inline void max_pool(const Geometry& g, const float* in, float* out) {
  const int64_t rows = g.N * g.OH;
  const int64_t work = rows * g.OW * g.C * g.KH * g.KW;
  const auto run = [&](int64_t r0, int64_t r1) { detail::max_pool_rows(g, in, out, r0, r1); };
  if (work < min_parallel_work() || rows < 2) run(0, rows);
  else parallel_for(rows, 1, run);
}

}  // namespace etrt::kernels::nhwc
