// A depthwise convolution of a statically quantized NHWC activation held as bytes (Note [byte activations] in the
// XNNPACK delegate's byte_values.h) by an int8 filter, written as bytes of the output's grid.
//
// Note [byte depthwise]: with input bytes u (the real number (u - zu) x sx) and an int8 filter w with one scale sw[c]
// per channel, output channel c of a pixel is
//   v = clamp(acc x scale[c] + bias[c], lo, hi),   acc = sum over the window's taps of (u - zu) x w,
// scale[c] = sx x sw[c], then rounded onto the output's grid and stored as its byte (qgemm::OutputGrid::byte_of).
// The sum is computed in float, where every term is an integer of magnitude <= 255 x 128 and a window of at most
// kMaxDepthwiseTaps taps sums to < 2^24: exact, so it is the int32 sum XNNPACK's qs8 kernels compute, whatever the
// order. The output rows are walked in bands of output columns; for a band, each input row a thread needs is turned
// once into floats u - zu over the band's input columns, into a ring of KH rows (row ih in slot ih % KH) with the
// padding columns and a padding row as zeros (the real 0 a padding tap stands for), so every output pixel reads
// whole windows without bounds checks, and the taps' loads are the float loop's (a conversion per tap and pixel cost
// three times the float kernel's time). A band is as wide as keeps the ring within 32 KB, in L1: a ring of whole
// rows (172 KB for mobilenet's 112 x 96 input) was written to L2 as it was converted, and the conversion's stores
// took 40% of the layer's time (its 56 x 56 x 96 stride-2 layer ran 253 -> 142 us on one thread). Neighbouring bands
// share KW - sw input columns, converted once for each. Channels are padded to whole 16-lane blocks in the ring and
// the filter (zero weights); the padding lanes' results are never stored. One output per input channel and no
// dilation along H (the caller checks both).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/nhwc_conv.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/qgemm.h"
#include "etrt/kernels/util/vec.h"

#ifdef ETRT_ISA_X86
#include <immintrin.h>
#endif

namespace etrt::kernels::nhwc {

/// Lanes of the byte depthwise loops, and the channel padding of its ring and filter.
inline constexpr int64_t kByteDepthwiseLanes = 16;

/// Channels rounded up to whole blocks of kByteDepthwiseLanes.
inline int64_t byte_depthwise_channels(int64_t c) {
  return (c + kByteDepthwiseLanes - 1) / kByteDepthwiseLanes * kByteDepthwiseLanes;
}

/// What a byte depthwise convolution reads besides its input (Note [byte depthwise]). weights: KH x KW x Cp
/// (tap-major, Cp = byte_depthwise_channels(C), zeros past C), the int8 filter's integers as floats; scale and
/// bias: Cp entries.
struct ByteDepthwise {
  const float* weights = nullptr;
  const float* scale = nullptr;
  const float* bias = nullptr;  // null: none
  float in_zero = 0.f;  // the input's byte of the real 0
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  qgemm::OutputGrid out;  // the output's grid (byte_of); bytes and out unused
  const float* acc_init = nullptr;  // Cp sums to start from, null for 0 (Note [xnnpack requantization]: the bias)
};

namespace detail {

/// dst[w * Cp + c] = src[w * C + c] - zero for w < W, c < Cp (whole blocks of 16: the last block reads up to 15 bytes
/// past the row, the channels of the next pixel or the readable tail past the value, Note [byte activations], into
/// padding lanes).
using ConvertRow = void (*)(const uint8_t* src, float* dst, int64_t W, int64_t C, int64_t Cp, float zero);

inline void convert_row_base(const uint8_t* src, float* dst, int64_t W, int64_t C, int64_t Cp, float zero) {
  for (int64_t w = 0; w < W; ++w, src += C, dst += Cp)
    for (int64_t c = 0; c < Cp; c += kByteDepthwiseLanes)
      vec::store(dst + c, vec::load_bytes<kByteDepthwiseLanes>(src + c) - zero);
}
#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593, as in qgemm.h
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The vector extension's byte-to-float conversion compiles to eight shuffles; AVX-512 does it in one.
[[ETRT_TARGET_AVX512]] inline void convert_row_avx512(const uint8_t* src, float* dst, int64_t W, int64_t C, int64_t Cp,
                                                      float zero) {
  static_assert(kByteDepthwiseLanes == 16);
  const __m512 z = _mm512_set1_ps(zero);
  for (int64_t w = 0; w < W; ++w, src += C, dst += Cp)
    for (int64_t c = 0; c < Cp; c += 16) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c));
      _mm512_storeu_ps(dst + c, _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)), z));
    }
}
#pragma GCC diagnostic pop
#endif
inline ConvertRow pick_convert_row() {
#ifdef ETRT_ISA_X86
  if (isa::level() >= isa::kAvx512) return &convert_row_avx512;
#endif
  return &convert_row_base;
}

/// Output pixels a block of channels walks with its weights in registers (byte_depthwise_rows).
inline constexpr int64_t kPixelChunk = 8;

/// v -> its byte (qgemm::OutputGrid::byte_of after the node's clamp), with every constant in a register and the
/// second grid (Next: a folded Convert) decided at compile time.
template <int L, bool Next>
struct ByteFinish {
  using V = vec::Vec<L>;
  V lo, hi, inv, qlo, qhi, scale, nlo, nhi, ninv, nqlo, nqhi, shift, unshift, fqlo, fqhi;
  explicit ByteFinish(const ByteDepthwise& k) {
    const qgemm::OutputGrid& g = k.out;
    constexpr float kShift = 12582912.0f;  // vec::round_small's 1.5 x 2^23
    lo = V{} + k.lo, hi = V{} + k.hi;
    inv = V{} + g.grid.inv, qlo = V{} + g.grid.qlo, qhi = V{} + g.grid.qhi, scale = V{} + g.grid.scale;
    nlo = V{} + g.lo, nhi = V{} + g.hi;
    ninv = V{} + g.next_grid.inv, nqlo = V{} + g.next_grid.qlo, nqhi = V{} + g.next_grid.qhi;
    shift = V{} + kShift;
    unshift = V{} + (kShift - g.byte_zero);  // an integer below 2^24: exact, so the result is the step + zero
    // Without a second grid the node's clamp folds into the step range: a positive multiply keeps order.
    fqlo = V{} + std::max(g.grid.qlo, k.lo * g.grid.inv), fqhi = V{} + std::min(g.grid.qhi, k.hi * g.grid.inv);
  }
  static V clamp(V v, V a, V b) {
    v = v < a ? a : v;  // a NaN compares false and stays, as vec::clamped
    return v > b ? b : v;
  }
  [[gnu::always_inline]] V operator()(V v) const {
    if constexpr (Next) {
      v = ((clamp(clamp(v, lo, hi) * inv, qlo, qhi) + shift) - shift) * scale;
      return (clamp(clamp(v, nlo, nhi) * ninv, nqlo, nqhi) + shift) - unshift;
    } else {
      return (clamp(v * inv, fqlo, fqhi) + shift) - unshift;
    }
  }
};

/// The ring's size for a band of output pixels (Note [byte depthwise]): a band's windows span input columns
/// [ow0 * sw - pl, that + band_columns); KH rows of them plus a row of zeros.
inline int64_t band_columns(const Geometry& g, int64_t band) { return (band - 1) * g.sw + (g.KW - 1) * g.dw + 1; }
inline size_t ring_floats(const Geometry& g, int64_t band) {
  return static_cast<size_t>((g.KH + 1) * band_columns(g, band) * byte_depthwise_channels(g.C));
}
/// Output pixels per band: whole chunks of kPixelChunk, as many as keep the ring within kRingBytes, but at least one
/// chunk (a band's windows overlap the next band's by KW - sw columns, converted twice: narrower bands of many
/// channels cost more in conversions than the L1 saves).
inline constexpr int64_t kRingBytes = 32 * 1024;
inline int64_t band_pixels(const Geometry& g) {
  const int64_t cols = kRingBytes / (4 * (g.KH + 1) * byte_depthwise_channels(g.C));
  const int64_t fit = cols > (g.KW - 1) * g.dw ? (cols - (g.KW - 1) * g.dw - 1) / g.sw + 1 : 1;
  return std::min(g.OW, std::max(kPixelChunk, fit / kPixelChunk * kPixelChunk));
}

/// Output rows [r0, r1) (row = n * OH + oh), on one thread, band by band of `band` output pixels, with its ring
/// (Note [byte depthwise]) at `ring`: ring_floats(g, band). KH = KW = 0: the window's size read from g. `convert`
/// turns a run of pixels into floats (ConvertRow).
template <int KH, int KW, bool Next>
[[gnu::always_inline]] inline void byte_depthwise_rows(const Geometry& g, const uint8_t* in, const ByteDepthwise& k,
                                                       uint8_t* out, int64_t r0, int64_t r1, int64_t band,
                                                       float* ring, ConvertRow convert) {
  constexpr int L = kByteDepthwiseLanes;
  using V = vec::Vec<L>;
  const int64_t kh_n = KH ? KH : g.KH, kw_n = KW ? KW : g.KW, taps = kh_n * kw_n;
  const int64_t C = g.C, Cp = byte_depthwise_channels(C), row_floats = band_columns(g, band) * Cp;
  // Locals: a byte store may alias anything, so fields read through k would be reloaded after every one.
  const ByteFinish<L, Next> finish(k);
  const float zero = k.in_zero;
  const float* weights = k.weights;
  const float* scale = k.scale;
  const float* bias = k.bias;
  const float* init = k.acc_init;
  float* zero_row = ring + kh_n * row_floats;
  std::fill(zero_row, zero_row + row_floats, 0.f);
  const float* rows[kMaxDepthwiseTaps];
  int64_t held[kMaxDepthwiseTaps];  // the input row (n * H + ih) each slot holds for this band; -1: none yet
  alignas(64) uint8_t tail[L];
  for (int64_t bw0 = 0; bw0 < g.OW; bw0 += band) {
    const int64_t bw1 = std::min(g.OW, bw0 + band);
    // The band's input columns [iw0, iw0 + cols): those inside the input converted, the rest (padding) zeros.
    const int64_t iw0 = bw0 * g.sw - g.pl, cols = band_columns(g, bw1 - bw0);
    const int64_t in_lo = std::clamp<int64_t>(iw0, 0, g.W), in_hi = std::clamp<int64_t>(iw0 + cols, 0, g.W);
    for (int64_t slot = 0; slot < kh_n; ++slot) held[slot] = -1;
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t oh = row % g.OH, n = row / g.OH;
      for (int64_t kh = 0; kh < kh_n; ++kh) {
        const int64_t ih = oh * g.sh - g.pt + kh;
        if (ih < 0 || ih >= g.H) {
          rows[kh] = zero_row;
          continue;
        }
        float* slot = ring + (ih % kh_n) * row_floats;
        rows[kh] = slot;
        if (held[ih % kh_n] == n * g.H + ih) continue;
        held[ih % kh_n] = n * g.H + ih;
        std::fill(slot, slot + (in_lo - iw0) * Cp, 0.f);
        std::fill(slot + std::max<int64_t>(in_hi - iw0, 0) * Cp, slot + cols * Cp, 0.f);
        // The pixels' bytes minus the zero; a last block reads up to 15 bytes past the run (the channels of the
        // next pixel, or the readable tail past the value: Note [byte activations]), into padding lanes.
        if (in_hi > in_lo)
          convert(in + ((n * g.H + ih) * g.W + in_lo) * C, slot + (in_lo - iw0) * Cp, in_hi - in_lo, C, Cp, zero);
      }
      uint8_t* orow = out + row * g.OW * C;
      // Locals for the loops below, as for k's fields: their byte stores would make them reload g's and rows'
      // entries.
      const int64_t xs = g.sw * Cp, ts = g.dw * Cp;
      const float* rp[KH ? KH : 1];
      if constexpr (KH != 0)
        for (int kh = 0; kh < KH; ++kh) rp[kh] = rows[kh];
      // Pixels in chunks whose windows' ring lines stay in L1 while each block of channels walks them with its
      // weights in registers.
      for (int64_t ow0 = bw0; ow0 < bw1; ow0 += kPixelChunk) {
        const int64_t ow1 = std::min(bw1, ow0 + kPixelChunk);
        for (int64_t c = 0; c < Cp; c += L) {
          V w[KH && KW ? KH * KW : 1], sc, b{}, start{};
          if (init) vec::load(start, init + c);
          if constexpr (KH && KW) {
#pragma GCC unroll 25
            for (int t = 0; t < KH * KW; ++t) vec::load(w[t], weights + t * Cp + c);
          }
          vec::load(sc, scale + c);
          if (bias) vec::load(b, bias + c);
          const bool whole = c + L <= C;
          for (int64_t ow = ow0; ow < ow1; ++ow) {
            const int64_t x0 = (ow - bw0) * xs + c;  // the ring's columns start at the band's
            V acc = start, v;
            if constexpr (KH && KW) {
              V part[KH];  // one sum per kernel row: shorter chains of dependent adds
#pragma GCC unroll 5
              for (int kh = 0; kh < KH; ++kh) {
                vec::load(v, rp[kh] + x0);
                part[kh] = v * w[kh * KW];
#pragma GCC unroll 5
                for (int kw = 1; kw < KW; ++kw) {
                  vec::load(v, rp[kh] + x0 + kw * ts);
                  part[kh] += v * w[kh * KW + kw];
                }
              }
#pragma GCC unroll 5
              for (int kh = 0; kh < KH; ++kh) acc += part[kh];
            } else {
              for (int64_t t = 0; t < taps; ++t) {
                V wt;
                vec::load(wt, weights + t * Cp + c);
                vec::load(v, rows[t / kw_n] + x0 + (t % kw_n) * ts);
                acc += v * wt;
              }
            }
            const V q = finish(acc * sc + b);
            if (whole) {
              vec::store_bytes<L>(orow + ow * C + c, q);
            } else {  // the last block: only its C - c channels
              vec::store_bytes<L>(tail, q);
              std::memcpy(orow + ow * C + c, tail, static_cast<size_t>(C - c));
            }
          }
        }
      }
    }
  }
}

/// The ring of the calling thread, grown to `floats` (kept for the next call: no allocation once it fits).
inline float* byte_depthwise_ring(size_t floats) {
  thread_local std::unique_ptr<float[]> ring;
  thread_local size_t cap = 0;
  if (floats > cap) {
    ring.reset(new (std::nothrow) float[floats]);
    cap = ring ? floats : 0;
  }
  return ring.get();
}

}  // namespace detail

/// Whether depthwise_bytes takes this geometry: one output per channel, no dilation along H, a window within
/// kMaxDepthwiseTaps.
inline bool byte_depthwise_fits(const Geometry& g) {
  return g.O == g.C && g.dh == 1 && g.KH * g.KW <= kMaxDepthwiseTaps;
}

/// out [N, OH, OW, C] (bytes of the output's grid) = the depthwise convolution of Note [byte depthwise] of in [N, H,
/// W, C] (bytes, readable 15 bytes past their end); false (nothing written) where byte_depthwise_fits does not hold
/// or a thread's ring cannot be allocated.
inline bool depthwise_bytes(const Geometry& g, const uint8_t* in, const ByteDepthwise& k, uint8_t* out) {
  if (!byte_depthwise_fits(g)) return false;
  const int64_t rows = g.N * g.OH;
  const int64_t band = detail::band_pixels(g);
  std::atomic<bool> failed{false};
  const detail::ConvertRow convert = detail::pick_convert_row();
  const auto run_rows = [&](int64_t r0, int64_t r1) {
    float* ring = detail::byte_depthwise_ring(detail::ring_floats(g, band));
    if (!ring) {
      failed = true;
      return;
    }
    isa::dispatch([&]() ETRT_ISA_INLINE {
      const auto rows = [&]<bool Next>() ETRT_ISA_INLINE {
        if (g.KH == 3 && g.KW == 3) detail::byte_depthwise_rows<3, 3, Next>(g, in, k, out, r0, r1, band, ring, convert);
        else if (g.KH == 5 && g.KW == 5) detail::byte_depthwise_rows<5, 5, Next>(g, in, k, out, r0, r1, band, ring, convert);
        else detail::byte_depthwise_rows<0, 0, Next>(g, in, k, out, r0, r1, band, ring, convert);
      };
      if (k.out.next) rows.template operator()<true>();
      else rows.template operator()<false>();
    });
  };
  if (rows * g.OW * g.O * g.KH * g.KW < min_parallel_work() || rows < 2) run_rows(0, rows);
  else parallel_for(rows, 1, run_rows);
  return !failed;
}

}  // namespace etrt::kernels::nhwc
