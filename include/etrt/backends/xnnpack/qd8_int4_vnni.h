// The qd8 x 4-bit fully-connected product on AVX-512 VNNI (the kernel of LLM decode and prefill in 8da4w / qc4
// programs): the weight repacked at load so that one vpdpbusd multiplies 4 columns of 16 output rows at once.
//
// Note [qd8 x int4 vnni layout]: the weight [N, K] becomes panels of 16 output rows (N rounded up; the rows past N
// are zero nibbles, computed and never stored). Per panel, each run of 8 columns 8j..8j+7 is 64 bytes: byte
// 4 * lane + t holds row (16 * panel + lane)'s column 8j + t in its low nibble and column 8j + 4 + t in its high
// nibble, each the stored nibble u = value + 8. A 64-byte load therefore gives, after a mask and a shift, two
// registers whose 32-bit lanes are 4 columns of one row each, and the activation row, kept in column order, meets
// them as one 4-byte group broadcast to every lane.
// The products are unsigned bytes (activations q + zero_point + 128, as Note [qd8 x int4 layout]) by nibbles
// 0..15, summed exactly in int32 per scale group; the nibbles' +8 is taken out once per group as 8 x the group's
// activation byte sum, which the row packing computes. Then, per group, the int32 sum is scaled by the group's 16
// row scales (packed beside the panel) into float accumulators; the zero point's share and the activation's scale
// are applied as the output is stored, as the other qd8 kernels do (qd8_finish).
// The row scales are kept as bfloat16 when every one of them is a bfloat16 value (the exporter stores blockwise
// scales so): at 32 columns per group they are a fifth of the bytes a decode step streams as float32, a ninth as
// bfloat16, and the step is bound by those bytes (stories15M's output layer: 5.8 MB a token).
// int32 cannot overflow: a lane adds at most 255 x 15 x group < 2^31 for groups of up to kInt4VnniMaxGroup columns.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "etrt/backends/xnnpack/qd8_vnni_tiles.h"
#include "etrt/core/aligned_buffer.h"
#include "etrt/kernels/util/isa.h"

#ifdef ETRT_ISA_X86
#include <immintrin.h>
#endif

namespace etrt::xnnpack::quant {

/// The widest scale group whose int32 sums cannot overflow (Note [qd8 x int4 vnni layout]).
inline constexpr int64_t kInt4VnniMaxGroup = int64_t{1} << 19;

/// A 4-bit weight in the layout of Note [qd8 x int4 vnni layout]; empty when the layout does not apply.
struct Int4Vnni {
  std::vector<uint8_t, AlignedAllocator<uint8_t>> w;  // panels x (k / 8) x 64 bytes
  std::vector<float> scales;  // panels x groups x 16 floats (0 past the last row), or empty when
  std::vector<uint16_t> scales_bf16;  // holds them as bfloat16 bits (every scale a bfloat16 value)
  int64_t panels = 0;
  bool empty() const { return w.empty(); }
};

/// Repacks a [rows, k] weight (two columns per byte, the even one in the low nibble) with `group` columns per
/// scale, scales[row * (k / group) + g]. k and group must be multiples of 32 with k % group == 0.
inline Int4Vnni pack_int4_vnni(const uint8_t* data, const float* scales, int64_t rows, int64_t k, int64_t group) {
  Int4Vnni p;
  if (rows <= 0 || k <= 0 || k % 32 != 0 || group <= 0 || group % 32 != 0 || k % group != 0 ||
      group > kInt4VnniMaxGroup)
    return p;
  const int64_t groups = k / group, chunks = k / 8;
  p.panels = (rows + 15) / 16;
  p.w.assign(static_cast<size_t>(p.panels * chunks * 64), 0);
  p.scales.assign(static_cast<size_t>(p.panels * groups * 16), 0.f);
  const auto nibble = [&](int64_t row, int64_t c) -> uint8_t {
    const uint8_t b = data[row * (k / 2) + c / 2];
    return c % 2 == 0 ? b & 0xF : b >> 4;
  };
  const auto bf16_bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  const bool bf16 = std::all_of(scales, scales + rows * groups, [&](float f) { return (bf16_bits(f) & 0xFFFF) == 0; });
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t panel = row / 16, lane = row % 16;
    for (int64_t j = 0; j < chunks; ++j) {
      uint8_t* dst = p.w.data() + (panel * chunks + j) * 64 + lane * 4;
      for (int64_t t = 0; t < 4; ++t)
        dst[t] = static_cast<uint8_t>(nibble(row, 8 * j + t) | nibble(row, 8 * j + 4 + t) << 4);
    }
    for (int64_t g = 0; g < groups; ++g)
      p.scales[static_cast<size_t>((panel * groups + g) * 16 + lane)] = scales[row * groups + g];
  }
  if (bf16) {
    p.scales_bf16.resize(p.scales.size());
    std::transform(p.scales.begin(), p.scales.end(), p.scales_bf16.begin(),
                   [&](float f) { return static_cast<uint16_t>(bf16_bits(f) >> 16); });
    std::vector<float>().swap(p.scales);
  }
  return p;
}

namespace detail {

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593: the AVX-512 intrinsics' self-initialised "undefined" vectors
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// MR activation rows from i0 against NP panels from p0: dot[i][n] = sum over groups of scale x (int32 sum - 8 x
/// activation sum), then the qd8 finish into out (rows ldo floats apart, n_total valid columns). `bytes` are the
/// activation rows in column order (k bytes each), `offsets` 8 x each row's group sums, `scale`/`zero`/`nan` per
/// activation row as Qd8Rows holds them.
template <int MR, int NP, bool Bf16>
[[ETRT_TARGET_AVX512VNNI]] inline void int4_vnni_tile(const Int4Vnni& w, const uint8_t* bytes, const int32_t* offsets,
                                                      const float* ascale, const int32_t* azero, const uint8_t* anan,
                                                      int64_t k, int64_t group, int64_t i0, int64_t p0,
                                                      const float* row_sums, const float* bias, int64_t n_total,
                                                      float* out, int64_t ldo) {
  const int64_t chunks = k / 8, per_group = group / 8, groups = k / group;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc[MR][NP];
  #pragma GCC unroll 4
  for (auto& row : acc)
    #pragma GCC unroll 4
    for (auto& v : row) v = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512i lo[MR][NP], hi[MR][NP];
    #pragma GCC unroll 4
    for (int r = 0; r < MR; ++r)
      #pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) lo[r][p] = hi[r][p] = _mm512_setzero_si512();
    for (int64_t j = g * per_group; j < (g + 1) * per_group; ++j) {
      __m512i wl[NP], wh[NP];
      #pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const __m512i v = _mm512_loadu_si512(w.w.data() + ((p0 + p) * chunks + j) * 64);
        wl[p] = _mm512_and_si512(v, low4);
        wh[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      }
      #pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const uint8_t* x = bytes + (i0 + r) * k + 8 * j;
        int32_t x0, x1;
        std::memcpy(&x0, x, 4);
        std::memcpy(&x1, x + 4, 4);
        const __m512i b0 = _mm512_set1_epi32(x0), b1 = _mm512_set1_epi32(x1);
        #pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) {
          lo[r][p] = _mm512_dpbusd_epi32(lo[r][p], b0, wl[p]);
          hi[r][p] = _mm512_dpbusd_epi32(hi[r][p], b1, wh[p]);
        }
      }
    }
    __m512 sc[NP];
    #pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const int64_t at = ((p0 + p) * groups + g) * 16;
      if constexpr (Bf16)
        sc[p] = _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.scales_bf16.data() + at))), 16));
      else
        sc[p] = _mm512_loadu_ps(w.scales.data() + at);
    }
    #pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const __m512i off = _mm512_set1_epi32(offsets[(i0 + r) * groups + g]);
      #pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const __m512i s = _mm512_sub_epi32(_mm512_add_epi32(lo[r][p], hi[r][p]), off);
        acc[r][p] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, s), sc[p], acc[r][p]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    const int64_t n0 = (p0 + p) * 16;
    const int64_t valid = std::min<int64_t>(16, n_total - n0);
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    const __m512 rs = _mm512_maskz_loadu_ps(mask, row_sums + n0);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + n0) : _mm512_setzero_ps();
    #pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const int64_t i = i0 + r;
      __m512 v = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
      if (!anan[i]) {
        const __m512 t = _mm512_fnmadd_ps(_mm512_set1_ps(static_cast<float>(azero[i])), rs, acc[r][p]);
        v = _mm512_fmadd_ps(_mm512_set1_ps(ascale[i]), t, b);
      }
      _mm512_mask_storeu_ps(out + i * ldo + n0, mask, v);
    }
  }
}

/// Panels [p_begin, p_end) against all m activation rows, in walk_vnni_tiles' order.
[[ETRT_TARGET_AVX512VNNI]] inline void int4_vnni_panels(const Int4Vnni& w, const uint8_t* bytes,
                                                        const int32_t* offsets, const float* ascale,
                                                        const int32_t* azero, const uint8_t* anan, int64_t m,
                                                        int64_t k, int64_t group, const float* row_sums,
                                                        const float* bias, int64_t n_total, float* out, int64_t ldo,
                                                        int64_t p_begin, int64_t p_end) {
  const bool bf16 = !w.scales_bf16.empty();
  walk_vnni_tiles(m, p_begin, p_end, [&]<int MR, int NP>(int64_t i0, int64_t p0) {
    if (bf16)
      int4_vnni_tile<MR, NP, true>(w, bytes, offsets, ascale, azero, anan, k, group, i0, p0, row_sums, bias, n_total,
                                   out, ldo);
    else
      int4_vnni_tile<MR, NP, false>(w, bytes, offsets, ascale, azero, anan, k, group, i0, p0, row_sums, bias, n_total,
                                    out, ldo);
  });
}
#pragma GCC diagnostic pop
#endif

}  // namespace detail

}  // namespace etrt::xnnpack::quant
