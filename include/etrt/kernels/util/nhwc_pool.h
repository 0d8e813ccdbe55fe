// 2-D max pooling on NHWC activations (the layout XNNPACK payloads use), float: per output pixel, the maximum of
// the window's in-bounds taps, eight channels at a time along the contiguous channel dim. Padding taps count as
// -infinity (a window entirely in the padding gives -infinity), a NaN in the window gives NaN, as torch's max_pool2d.
// No indices are computed: an XNNPACK MaxPooling2d node has none.
// Global average pooling (XNNPACK's GlobalAvgPooling2d, the squeeze of efficientnet's squeeze-and-excitation
// blocks): per channel, the mean over the pixels, along the contiguous channels.
#pragma once

#include <algorithm>
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

/// out [N, C] = the mean of in [N, P, C] over its P pixels. Sixteen channels at a time: float sums of blocks of 64
/// pixels, in two registers taking alternate pixels, each block's sum added into a double total (a sum over
/// thousands of pixels keeps its precision), divided by P at the end. Channels are split across threads, each
/// summed whole by one, so the result does not depend on the thread count. (The portable mean, which this node
/// ran before, accumulated each channel in double one pixel at a time in SSE: a 56x56x144 pool took ~150 us.)
inline void global_avg_pool(const float* in, int64_t N, int64_t P, int64_t C, float* out) {
  constexpr int64_t L = 16, kBlock = 64;
  const int64_t blocks = (C + L - 1) / L;
  const auto run = [&](int64_t b0, int64_t b1) {
    isa::dispatch([&]() ETRT_ISA_INLINE {
      using V = vec::Vec<L>;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t c = b * L, w = std::min(L, C - c);
          const float* x = in + n * P * C + c;
          double total[L] = {};
          for (int64_t p0 = 0; p0 < P; p0 += kBlock) {
            const int64_t p1 = std::min(P, p0 + kBlock);
            if (w == L) {
              V s0{}, s1{}, v0, v1;
              int64_t p = p0;
              for (; p + 2 <= p1; p += 2) {
                vec::load(v0, x + p * C);
                vec::load(v1, x + (p + 1) * C);
                s0 += v0;
                s1 += v1;
              }
              if (p < p1) {
                vec::load(v0, x + p * C);
                s0 += v0;
              }
              s0 += s1;
              for (int64_t l = 0; l < L; ++l) total[l] += s0[l];
            } else {
              for (int64_t l = 0; l < w; ++l) {
                float s = 0.f;
                for (int64_t p = p0; p < p1; ++p) s += x[p * C + l];
                total[l] += s;
              }
            }
          }
          for (int64_t l = 0; l < w; ++l) out[n * C + c + l] = static_cast<float>(total[l] / static_cast<double>(P));
        }
    });
  };
  if (N * P * C < min_parallel_work() || blocks < 2) run(0, blocks);
  else parallel_for(blocks, 1, run);
}

/// global_avg_pool of bytes standing for (byte - zero) x scale (Note [byte activations]): the bytes' exact integer
/// sums (floats over blocks of 64 pixels, each below 2^24, added into double totals), then (sum / P - zero) x scale
/// in double: the mean of the reals, rounded once.
inline void global_avg_pool_bytes(const uint8_t* in, int64_t N, int64_t P, int64_t C, float zero, float scale,
                                  float* out) {
  constexpr int64_t L = 16, kBlock = 64;
  const int64_t blocks = (C + L - 1) / L;
  const auto run = [&](int64_t b0, int64_t b1) {
    isa::dispatch([&]() ETRT_ISA_INLINE {
      using V = vec::Vec<L>;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t c = b * L, w = std::min(L, C - c);
          const uint8_t* x = in + n * P * C + c;
          double total[L] = {};
          for (int64_t p0 = 0; p0 < P; p0 += kBlock) {
            const int64_t p1 = std::min(P, p0 + kBlock);
            if (w == L) {
              V s0{}, s1{};
              int64_t p = p0;
              for (; p + 2 <= p1; p += 2) {
                s0 += vec::load_bytes<L>(x + p * C);
                s1 += vec::load_bytes<L>(x + (p + 1) * C);
              }
              if (p < p1) s0 += vec::load_bytes<L>(x + p * C);
              s0 += s1;
              for (int64_t l = 0; l < L; ++l) total[l] += s0[l];
            } else {
              for (int64_t l = 0; l < w; ++l)
                for (int64_t p = p0; p < p1; ++p) total[l] += x[p * C + l];
            }
          }
          for (int64_t l = 0; l < w; ++l)
            out[n * C + c + l] =
                static_cast<float>((total[l] / static_cast<double>(P) - zero) * static_cast<double>(scale));
        }
    });
  };
  if (N * P * C < 4 * min_parallel_work() || blocks < 2) run(0, blocks);
  else parallel_for(blocks, 1, run);
}

}  // namespace etrt::kernels::nhwc
