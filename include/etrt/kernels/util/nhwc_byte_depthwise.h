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

#include "etrt/core/aligned_buffer.h"
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

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593, as in qgemm.h
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// Note [byte depthwise vnni]: a 3 x 3 window on AVX-512 VNNI with VBMI sums in int32 with vpdpbusd, four input rows
/// a byte each. For an output row a thread interleaves the input rows ih0 .. ih0 + 3 (ih0 = oh x sh - pt) into
/// quads: one 64-byte vector per input column and block of 16 channels, lane c the four rows' bytes of channel c
/// (the input's zero byte zu outside the input), made by one byte permute of the rows' four 16-byte runs. A tap
/// column kw is then one vpdpbusd of the quad at column ow x sw + kw against (w[0][kw], w[1][kw], w[2][kw], 0) in
/// each lane: three per 16 outputs where the float loop loads and multiplies nine. With stride 1 the next output row
/// reads rows ih0 + 1 .. ih0 + 3, the same quads against (0, w[0][kw], w[1][kw], w[2][kw]), so rows go in pairs and
/// each quad serves two. The window's sum is sum u x w, padding taps holding zu, so sum (u - zu) x w = that - zu x
/// sum w: the integer the float loop sums exactly (Note [byte depthwise]), turned into the same float before the same
/// finish, so the bytes are the float loop's, bit for bit. Output columns go in bands whose quads stay within
/// kQuadBytes of L1 (a whole 112-pixel row of 96 channels, 43 KB, was read back from L2 and ran slower than the
/// float loop). One thread, Zen 4: mobilenet_v2's 56 x 56 x 144 layer 137 -> 100 us, 28 x 28 x 192 64 -> 34,
/// 14 x 14 x 576 37 -> 26. Without VBMI, widening the rows to int32 lanes to interleave them took half the time and
/// left the kernel no faster than the float loop, which such CPUs keep.
inline constexpr int64_t kQuadBytes = 40 * 1024;
/// Output pixels per band (at least 4, at most OW) and the quad columns a band takes.
inline int64_t vnni_band(const Geometry& g) {
  const int64_t col_bytes = byte_depthwise_channels(g.C) * 4, cols = std::max<int64_t>(kQuadBytes / col_bytes, 3);
  return std::clamp<int64_t>((cols - 3) / g.sw + 1, 4, g.OW);
}
inline int64_t vnni_quad_bytes(const Geometry& g) {
  const int64_t cols = (vnni_band(g) - 1) * g.sw + 3, Cp = byte_depthwise_channels(g.C);
  return cols * Cp * 4 + Cp + 64;  // the quads, then a pixel of zero bytes read up to 15 bytes past its Cp
}
inline bool vnni_fits(const Geometry& g) { return g.KH == 3 && g.KW == 3 && g.dh == 1 && g.dw == 1; }

#define ETRT_TARGET_BYTE_DEPTHWISE_VNNI \
  gnu::target("avx512vnni,avx512vbmi,avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")

/// Output rows [r0, r1) of depthwise_bytes for vnni_fits geometries (Note [byte depthwise vnni]); `quads` holds
/// vnni_quad_bytes(g).
template <bool Next>
[[ETRT_TARGET_BYTE_DEPTHWISE_VNNI]] inline void byte_depthwise_vnni_rows(const Geometry& g, const uint8_t* in,
                                                                        const ByteDepthwise& k, uint8_t* out,
                                                                        int64_t r0, int64_t r1, uint8_t* quads) {
  constexpr int L = kByteDepthwiseLanes;
  using V = vec::Vec<L>;
  const int64_t C = g.C, Cp = byte_depthwise_channels(C), blocks = Cp / L, band = vnni_band(g);
  const int64_t col_bytes = Cp * 4;  // one quad column: a 64-byte vector per block
  const ByteFinish<L, Next> finish(k);
  const uint8_t zb = static_cast<uint8_t>(k.in_zero);
  // Locals: a byte store may alias anything, so fields read through k would be reloaded after every one.
  const float* weights = k.weights;
  const float* scale = k.scale;
  const float* bias = k.bias;
  const float* init = k.acc_init;
  uint8_t* zero_pixel = quads + ((band - 1) * g.sw + 3) * col_bytes;
  std::memset(zero_pixel, zb, static_cast<size_t>(Cp + 64));
  const __m512i low = _mm512_set1_epi32(0xFF), zb_lanes = _mm512_set1_epi32(zb);
  alignas(64) uint8_t order[64];  // byte 4c + j of a quad <- byte c of row j (row j's 16 bytes at 16j)
  for (int p = 0; p < 64; ++p) order[p] = static_cast<uint8_t>(16 * (p % 4) + p / 4);
  const __m512i interleave = _mm512_load_si512(order);
  // For ByteFinish's steps on the registers (Next = false): its constants, and the byte zero as an integer.
  const bool unit = k.out.grid.inv == 1.f;
  const __m512i bz = _mm512_set1_epi32(static_cast<int32_t>(k.out.byte_zero));
  alignas(16) uint8_t tail[L];
  for (int64_t row = r0; row < r1;) {
    const int64_t oh = row % g.OH, n = row / g.OH;
    const bool pair = g.sh == 1 && row + 1 < r1 && oh + 1 < g.OH;
    const int64_t ih0 = oh * g.sh - g.pt;
    const uint8_t* rows[4];
    for (int j = 0; j < 4; ++j) {
      const int64_t ih = ih0 + j;
      // The fourth row only for the pair's second output row; otherwise its weights are zero.
      rows[j] = ih >= 0 && ih < g.H && (j < 3 || pair) ? in + (n * g.H + ih) * g.W * C : nullptr;
    }
    uint8_t* orow = out + row * g.OW * C;
    for (int64_t ow0 = 0; ow0 < g.OW; ow0 += band) {
      const int64_t ow1 = std::min(g.OW, ow0 + band), x0 = ow0 * g.sw, cols = (ow1 - 1 - ow0) * g.sw + 3;
      for (int64_t x = 0; x < cols; ++x) {
        const int64_t iw = x0 + x - g.pl;
        const bool inside = iw >= 0 && iw < g.W;
        const uint8_t* src[4];
        for (int j = 0; j < 4; ++j) src[j] = inside && rows[j] ? rows[j] + iw * C : zero_pixel;
        uint8_t* q = quads + x * col_bytes;
        // The last block reads up to 15 bytes past the pixel (the next pixel's channels, or the readable tail past
        // the value, Note [byte activations]) into lanes whose weights are zero.
        for (int64_t b = 0; b < blocks; ++b) {
          __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src[0] + b * L)));
          v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[1] + b * L)), 1);
          v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[2] + b * L)), 2);
          v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[3] + b * L)), 3);
          _mm512_storeu_si512(q + b * 64, _mm512_permutexvar_epi8(interleave, v));
        }
      }
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t c = b * L;
        __m512i wa[3], wb[3], wsum = _mm512_setzero_si512();
        for (int kw = 0; kw < 3; ++kw) {
          const __m512i w0 = _mm512_cvttps_epi32(_mm512_loadu_ps(weights + kw * Cp + c));
          const __m512i w1 = _mm512_cvttps_epi32(_mm512_loadu_ps(weights + (3 + kw) * Cp + c));
          const __m512i w2 = _mm512_cvttps_epi32(_mm512_loadu_ps(weights + (6 + kw) * Cp + c));
          wsum = _mm512_add_epi32(wsum, _mm512_add_epi32(w0, _mm512_add_epi32(w1, w2)));
          wa[kw] = _mm512_or_si512(_mm512_and_si512(w0, low),
                                   _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(w1, low), 8),
                                                   _mm512_slli_epi32(_mm512_and_si512(w2, low), 16)));
          wb[kw] = _mm512_slli_epi32(wa[kw], 8);  // (0, w0, w1, w2): the pair's second row
        }
        // The sums start from the integer start (Note [xnnpack requantization]: the int32 bias) less zu x sum w.
        const __m512i start = _mm512_sub_epi32(
            init ? _mm512_cvttps_epi32(_mm512_loadu_ps(init + c)) : _mm512_setzero_si512(),
            _mm512_mullo_epi32(zb_lanes, wsum));
        V sc, bv{};
        vec::load(sc, scale + c);
        if (bias) vec::load(bv, bias + c);
        const bool whole = c + L <= C;
        for (int64_t ow = ow0; ow < ow1; ++ow) {
          const uint8_t* qx = quads + (ow - ow0) * g.sw * col_bytes + b * 64;
          const __m512i q0 = _mm512_loadu_si512(qx), q1 = _mm512_loadu_si512(qx + col_bytes),
                        q2 = _mm512_loadu_si512(qx + 2 * col_bytes);
          for (int half = 0; half < (pair ? 2 : 1); ++half) {
            const __m512i* w = half ? wb : wa;
            const __m512i acc =
                _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, q0, w[0]), q1, w[1]), q2, w[2]);
            const V a = _mm512_cvtepi32_ps(acc);
            __m128i q;
            if constexpr (Next) {
              q = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(finish(a * sc + bv)));
            } else {
              // ByteFinish's steps on the registers: the multiply by the grid's inverse step skipped where it is 1
              // (the exact requantization's steps), the clamp as vmaxps / vminps (the sums are finite), the rounding
              // by vcvtps2dq (half to even, as the add of 1.5 x 2^23), the byte zero an integer add.
              __m512 v = bias ? _mm512_fmadd_ps(a, sc, bv) : _mm512_mul_ps(a, sc);
              if (!unit) v = _mm512_mul_ps(v, finish.inv);
              v = _mm512_min_ps(_mm512_max_ps(v, finish.fqlo), finish.fqhi);
              q = _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), bz));
            }
            uint8_t* o = orow + (half * g.OW + ow) * C + c;
            if (whole) {
              _mm_storeu_si128(reinterpret_cast<__m128i*>(o), q);
            } else {  // the last block: only its C - c channels
              _mm_storeu_si128(reinterpret_cast<__m128i*>(tail), q);
              std::memcpy(o, tail, static_cast<size_t>(C - c));
            }
          }
        }
      }
    }
    row += pair ? 2 : 1;
  }
}
#undef ETRT_TARGET_BYTE_DEPTHWISE_VNNI
#pragma GCC diagnostic pop
#endif

struct RingScratch;  // the tag of the calling thread's ring (core/aligned_buffer.h's thread_scratch)

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
#ifdef ETRT_ISA_X86
  // Note [byte depthwise vnni]: 3 x 3 windows without dilation, on CPUs with VNNI and VBMI.
  if (isa::level() >= isa::kAvx512Vnni && isa::avx512_vbmi() && detail::vnni_fits(g)) {
    const auto vnni_rows = [&](int64_t r0, int64_t r1) {
      auto* quads = reinterpret_cast<uint8_t*>(
          thread_scratch<float, detail::RingScratch>(static_cast<size_t>(detail::vnni_quad_bytes(g) + 3) / 4));
      if (!quads) {
        failed = true;
        return;
      }
      if (k.out.next) detail::byte_depthwise_vnni_rows<true>(g, in, k, out, r0, r1, quads);
      else detail::byte_depthwise_vnni_rows<false>(g, in, k, out, r0, r1, quads);
    };
    if (rows * g.OW * g.O * 9 < min_parallel_work() || rows < 2) vnni_rows(0, rows);
    else parallel_for(rows, 2, vnni_rows);
    return !failed;
  }
#endif
  const detail::ConvertRow convert = detail::pick_convert_row();
  const auto run_rows = [&](int64_t r0, int64_t r1) {
    float* ring = thread_scratch<float, detail::RingScratch>(detail::ring_floats(g, band));
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
