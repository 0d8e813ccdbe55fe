// 2-D max pooling on NHWC activations (the layout XNNPACK payloads use), float: per output pixel, the maximum of
// the window's in-bounds taps, eight channels at a time along the contiguous channel dim. Padding taps count as
// -infinity (a window entirely in the padding gives -infinity), a NaN in the window gives NaN, as torch's max_pool2d.
// No indices are computed: an XNNPACK MaxPooling2d node has none. Average pooling (AvgPooling2d) lists the same
// windows and takes the mean of their in-bounds taps.
// Global average pooling (XNNPACK's GlobalAvgPooling2d, the squeeze of efficientnet's squeeze-and-excitation
// blocks): per channel, the mean over the pixels, along the contiguous channels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

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

/// A pooling window's in-bounds taps (of float or byte pixels), listed once per output pixel. A window wholly
/// inside the input lists them as the window's corner plus offsets computed once: the bounds checks of every tap
/// cost more than a small-channel pixel's maxima (a 2x2 window over 8 channels: 12 ns a pixel, 4 with the offsets).
template <class T = float>
class WindowTaps {
 public:
  explicit WindowTaps(const Geometry& g) : g_(g), all_(g.KH * g.KW <= kMaxPoolTaps ? g.KH * g.KW : 0) {
    for (int64_t t = 0; t < all_; ++t) offsets_[t] = ((t / g.KW) * g.dh * g.W + (t % g.KW) * g.dw) * g.C;
  }
  /// Whether windows fit the list (at most kMaxPoolTaps taps).
  bool listed() const { return all_ > 0; }
  /// Lists output pixel (n, oh, ow)'s taps into taps(); returns how many.
  [[gnu::always_inline]] int64_t list(const T* in, int64_t n, int64_t oh, int64_t ow) {
    const int64_t ih0 = oh * g_.sh - g_.pt, iw0 = ow * g_.sw - g_.pl;
    int64_t nt = 0;
    if (ih0 >= 0 && ih0 + (g_.KH - 1) * g_.dh < g_.H && iw0 >= 0 && iw0 + (g_.KW - 1) * g_.dw < g_.W) {
      const T* corner = in + ((n * g_.H + ih0) * g_.W + iw0) * g_.C;
      for (; nt < all_; ++nt) taps_[nt] = corner + offsets_[nt];
    } else {
      for_each_tap(g_, in, n, oh, ow, [&](int64_t, const T* x) ETRT_ISA_INLINE { taps_[nt++] = x; });
    }
    return nt;
  }
  const T* const* taps() const { return taps_; }

 private:
  const Geometry& g_;
  int64_t all_;
  const T* taps_[kMaxPoolTaps];
  int64_t offsets_[kMaxPoolTaps];
};

/// f(pixel, taps, count) for each output pixel of rows [r0, r1) (pixel = row * OW + ow, row = n * OH + oh), its
/// window's in-bounds taps listed (WindowTaps; the geometry's windows are listed()).
template <class T, class F>
[[gnu::always_inline]] inline void each_window(const Geometry& g, const T* in, int64_t r0, int64_t r1, F&& f) {
  WindowTaps<T> window(g);
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t oh = row % g.OH, n = row / g.OH;
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t nt = window.list(in, n, oh, ow);
      f(row * g.OW + ow, window.taps(), nt);
    }
  }
}

/// Output rows [r0, r1) (row = n * OH + oh); O == C. Each register of channels takes the maximum of the window's
/// taps (WindowTaps) in a register and is stored once.
inline void max_pool_rows(const Geometry& g, const float* in, float* out, int64_t r0, int64_t r1) {
  isa::dispatch_lanes<8>([&]<int L>() ETRT_ISA_INLINE {  // Note [vector lanes per level]
    using V = vec::Vec<L>;
    const float ninf = -std::numeric_limits<float>::infinity();
    const int64_t C = g.C;
    WindowTaps<float> window(g);
    const bool listed = window.listed();
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t oh = row % g.OH, n = row / g.OH;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        float* o = out + (row * g.OW + ow) * C;
        if (listed) {
          const int64_t nt = window.list(in, n, oh, ow);
          const float* const* taps = window.taps();
          int64_t c = 0;
          for (; c + L <= C; c += L) {
            // The maximum through `v > m ? v : m` (one vmaxps a tap) and the window's last NaN aside, off that
            // chain: max_nan's compare, or and blend a tap made a 4-tap window a chain of about 24 cycles.
            V m = V{} + ninf, nan = m, v;
            for (int64_t t = 0; t < nt; ++t) {
              vec::load(v, taps[t] + c);
              m = v > m ? v : m;
              nan = v != v ? v : nan;
            }
            vec::store(o + c, nan != nan ? nan : m);
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
          for (; c + L <= C; c += L) {
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

/// max_pool_rows over bytes (Note [byte activations]: a value held as its grid's step count plus a zero, so larger
/// bytes stand for larger reals): the windows listed (WindowTaps::listed), 4 L bytes a vector. A window wholly in
/// the padding gives byte 0, the byte of the grid's lowest real, where the float loop's -infinity rounds to.
inline void max_pool_bytes_rows(const Geometry& g, const uint8_t* in, uint8_t* out, int64_t r0, int64_t r1) {
  isa::dispatch_lanes<8>([&]<int L>() ETRT_ISA_INLINE {  // Note [vector lanes per level]
    using B = vec::ByteVec<4 * L>;
    const int64_t C = g.C;
    each_window(g, in, r0, r1, [&](int64_t pixel, const uint8_t* const* taps, int64_t nt) ETRT_ISA_INLINE {
      uint8_t* o = out + pixel * C;
      int64_t c = 0;
      for (; c + 4 * L <= C; c += 4 * L) {
        B m{}, v;
        for (int64_t t = 0; t < nt; ++t) {
          std::memcpy(&v, taps[t] + c, sizeof v);
          m = v > m ? v : m;
        }
        std::memcpy(o + c, &m, sizeof m);
      }
      for (; c < C; ++c) {
        uint8_t m = 0;
        for (int64_t t = 0; t < nt; ++t) m = std::max(m, taps[t][c]);
        o[c] = m;
      }
    });
  });
}

/// Output rows [r0, r1) of average pooling; O == C, windows listed (WindowTaps::listed). Each output pixel is the
/// sum of its window's in-bounds taps in the window's row-major order, divided by their count (the padding is not
/// counted, as avg_pool2d with count_include_pad=False, the portable kernel the delegate ran before: the same sums
/// in the same order, so the same floats); a window with no tap inside gives 0, as there.
inline void avg_pool_rows(const Geometry& g, const float* in, float* out, int64_t r0, int64_t r1) {
  isa::dispatch_lanes<8>([&]<int L>() ETRT_ISA_INLINE {  // Note [vector lanes per level]
    using V = vec::Vec<L>;
    const int64_t C = g.C;
    each_window(g, in, r0, r1, [&](int64_t pixel, const float* const* taps, int64_t nt) ETRT_ISA_INLINE {
      float* o = out + pixel * C;
      if (nt == 0) {
        std::fill(o, o + C, 0.f);
        return;
      }
      const float count = static_cast<float>(nt);
      int64_t c = 0;
      for (; c + L <= C; c += L) {
        V sum{}, v;
        for (int64_t t = 0; t < nt; ++t) {
          vec::load(v, taps[t] + c);
          sum += v;
        }
        vec::store(o + c, sum / count);
      }
      for (; c < C; ++c) {
        float sum = 0.f;
        for (int64_t t = 0; t < nt; ++t) sum += taps[t][c];
        o[c] = sum / count;
      }
    });
  });
}

/// Runs rows(r0, r1) over the N * OH output rows of g, on the pool when the work is worth it.
template <class Rows>
inline void pool_rows(const Geometry& g, Rows rows_fn) {
  const int64_t rows = g.N * g.OH;
  const int64_t work = rows * g.OW * g.C * g.KH * g.KW;
  if (work < min_parallel_work() || rows < 2) rows_fn(0, rows);
  else parallel_for(rows, 1, rows_fn);
}

}  // namespace detail

/// out [N, OH, OW, C] = max pooling of in [N, H, W, C] over g's window (g.O == g.C; the geometry is valid).
inline void max_pool(const Geometry& g, const float* in, float* out) {
  detail::pool_rows(g, [&](int64_t r0, int64_t r1) { detail::max_pool_rows(g, in, out, r0, r1); });
}

/// Whether max_pool_bytes takes this geometry: windows of at most detail::kMaxPoolTaps taps.
inline bool max_pool_bytes_fits(const Geometry& g) { return g.KH * g.KW <= detail::kMaxPoolTaps; }

/// max_pool over bytes standing for reals on one grid, input and output alike (Note [byte activations]): the
/// maximum byte is the byte of the maximum real. g as max_pool's, and max_pool_bytes_fits.
inline void max_pool_bytes(const Geometry& g, const uint8_t* in, uint8_t* out) {
  detail::pool_rows(g, [&](int64_t r0, int64_t r1) { detail::max_pool_bytes_rows(g, in, out, r0, r1); });
}

/// out [N, OH, OW, C] = average pooling of in [N, H, W, C] over g's window, the padding not counted (g.O == g.C;
/// the geometry is valid); false (nothing written) for a window of more than kMaxPoolTaps taps.
inline bool avg_pool(const Geometry& g, const float* in, float* out) {
  if (!detail::WindowTaps<float>(g).listed()) return false;
  detail::pool_rows(g, [&](int64_t r0, int64_t r1) { detail::avg_pool_rows(g, in, out, r0, r1); });
  return true;
}

namespace detail {

/// The means of in [N, P, C] over its P pixels, mean(sum) turning each channel's double total into its output at
/// out [N, C]. Sixteen channels at a time: float sums of blocks of 64 pixels, in two registers taking alternate
/// pixels, each block's sum added into a double total (a sum over thousands of pixels keeps its precision).
/// Channels are split across threads, each summed whole by one, so the result does not depend on the thread count.
/// T is float, or bytes whose sums are exact (a block's below 2^24).
template <class T, class Mean>
inline void channel_means(const T* in, int64_t N, int64_t P, int64_t C, float* out, int64_t parallel_work,
                          Mean mean) {
  constexpr int64_t L = 16, kBlock = 64;
  const int64_t blocks = (C + L - 1) / L;
  const auto run = [&](int64_t b0, int64_t b1) {
    isa::dispatch([&]() ETRT_ISA_INLINE {
      using V = vec::Vec<L>;
      const auto load = [](const T* p) ETRT_ISA_INLINE {
        if constexpr (std::is_same_v<T, uint8_t>) {
          return vec::load_bytes<16>(p);  // L (a lambda does not see it as a constant here)
        } else {
          V v;
          vec::load(v, p);
          return v;
        }
      };
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t c = b * L, w = std::min(L, C - c);
          const T* x = in + n * P * C + c;
          double total[L] = {};
          for (int64_t p0 = 0; p0 < P; p0 += kBlock) {
            const int64_t p1 = std::min(P, p0 + kBlock);
            if (w == L) {
              V s0{}, s1{};
              int64_t p = p0;
              for (; p + 2 <= p1; p += 2) {
                s0 += load(x + p * C);
                s1 += load(x + (p + 1) * C);
              }
              if (p < p1) s0 += load(x + p * C);
              s0 += s1;
              for (int64_t l = 0; l < L; ++l) total[l] += s0[l];
            } else {
              for (int64_t l = 0; l < w; ++l) {
                float s = 0.f;
                for (int64_t p = p0; p < p1; ++p) s += static_cast<float>(x[p * C + l]);
                total[l] += s;
              }
            }
          }
          for (int64_t l = 0; l < w; ++l) out[n * C + c + l] = mean(total[l]);
        }
    });
  };
  if (N * P * C < parallel_work || blocks < 2) run(0, blocks);
  else parallel_for(blocks, 1, run);
}

}  // namespace detail

/// out [N, C] = the mean of in [N, P, C] over its P pixels (detail::channel_means). (The portable mean, which this
/// node ran before, accumulated each channel in double one pixel at a time in SSE: a 56x56x144 pool took ~150 us.)
inline void global_avg_pool(const float* in, int64_t N, int64_t P, int64_t C, float* out) {
  detail::channel_means(in, N, P, C, out, min_parallel_work(),
                        [P](double total) { return static_cast<float>(total / static_cast<double>(P)); });
}

/// global_avg_pool of bytes standing for (byte - zero) x scale (Note [byte activations]): the bytes' exact integer
/// sums, then (sum / P - zero) x scale in double: the mean of the reals, rounded once. A quarter of the float pool's
/// bytes per element, so it takes a thread per part only at four times the float pool's size.
inline void global_avg_pool_bytes(const uint8_t* in, int64_t N, int64_t P, int64_t C, float zero, float scale,
                                  float* out) {
  detail::channel_means(in, N, P, C, out, 4 * min_parallel_work(), [P, zero, scale](double total) {
    return static_cast<float>((total / static_cast<double>(P) - zero) * static_cast<double>(scale));
  });
}

}  // namespace etrt::kernels::nhwc
