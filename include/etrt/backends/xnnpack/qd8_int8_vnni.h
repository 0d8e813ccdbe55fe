// The qd8 x 8-bit fully-connected product on AVX-512 VNNI (8da8w programs' linear layers, decode and prefill): the
// weight repacked at load so that one vpdpbusd multiplies 4 columns of 16 output rows at once.
//
// Note [qd8 x int8 vnni layout]: the weight [N, K] (K a multiple of 4) becomes panels of 16 output rows (N rounded
// up; the rows past N are zeros, computed and never stored). Per panel, each run of 4 columns 4j..4j+3 is 64 bytes:
// byte 4 * lane + t holds row (16 * panel + lane)'s column 4j + t. The activation row, kept in column order as
// bytes q + zero_point + 128 (the row packing's `bytes`, as for the 4-bit kernel), meets a run as one 4-byte group
// broadcast to every lane. The int32 sum is then sum (q - zero_point) x w + (zero_point + 128) x sum w, and the
// second term is taken out with each row's weight sum, computed here: the same exact integer the other 8-bit
// kernels compute from 16-bit activations, scaled the same way (qd8_finish_int8).
// int32 cannot overflow: a lane adds at most 255 x 128 x K < 2^31 for K <= kInt8MaxCols.
// Without it a decode step of stories15M's 8da8w program ran its 32000 x 288 output layer at 13 GB/s on a Zen 4
// core pair (the vpmaddwd row-at-a-time kernel, a horizontal sum per output), 2.6 times upstream's whole step.
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

/// An 8-bit weight in the layout of Note [qd8 x int8 vnni layout]; empty when the layout does not apply.
struct Int8Vnni {
  std::vector<int8_t, AlignedAllocator<int8_t>> w;  // panels x (k / 4) x 64 bytes
  std::vector<int32_t> sums;  // panels x 16: each row's sum of its weights (0 past the last row)
  int64_t panels = 0;
  bool empty() const { return w.empty(); }
};

/// Repacks a [rows, k] int8 weight (row-major); k must be a multiple of 4.
inline Int8Vnni pack_int8_vnni(const int8_t* data, int64_t rows, int64_t k) {
  Int8Vnni p;
  if (rows <= 0 || k <= 0 || k % 4 != 0) return p;
  const int64_t runs = k / 4;
  p.panels = (rows + 15) / 16;
  p.w.assign(static_cast<size_t>(p.panels * runs * 64), 0);
  p.sums.assign(static_cast<size_t>(p.panels * 16), 0);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t panel = row / 16, lane = row % 16;
    const int8_t* src = data + row * k;
    for (int64_t j = 0; j < runs; ++j)
      std::memcpy(p.w.data() + (panel * runs + j) * 64 + lane * 4, src + 4 * j, 4);
    int32_t s = 0;
    for (int64_t c = 0; c < k; ++c) s += src[c];
    p.sums[static_cast<size_t>(row)] = s;
  }
  return p;
}

namespace detail {

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593: the AVX-512 intrinsics' self-initialised "undefined" vectors
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// MR activation rows from i0 against NP panels from p0, then the qd8 finish into out (rows ldo floats apart,
/// n_total valid columns): out = ascale x wscale x (int32 sum - azero x weight sum) + bias, NaN for a row that held
/// one. `bytes` are the activation rows in column order (k bytes each); ascale/azero/anan per activation row as
/// Qd8Rows holds them.
template <int MR, int NP>
[[ETRT_TARGET_AVX512VNNI]] inline void int8_vnni_tile(const Int8Vnni& w, const uint8_t* bytes, const float* ascale,
                                                      const int32_t* azero, const uint8_t* anan, int64_t k,
                                                      int64_t i0, int64_t p0, const float* wscale, const float* bias,
                                                      int64_t n_total, float* out, int64_t ldo) {
  const int64_t runs = k / 4;
  __m512i acc[MR][NP];
  #pragma GCC unroll 4
  for (auto& row : acc)
    #pragma GCC unroll 4
    for (auto& v : row) v = _mm512_setzero_si512();
  const int8_t* wp = w.w.data() + p0 * runs * 64;
  for (int64_t j = 0; j < runs; ++j) {
    __m512i wv[NP];
    #pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) wv[p] = _mm512_loadu_si512(wp + (p * runs + j) * 64);
    #pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      int32_t x;
      std::memcpy(&x, bytes + (i0 + r) * k + 4 * j, 4);
      const __m512i b = _mm512_set1_epi32(x);
      #pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], b, wv[p]);
    }
  }
  #pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    const int64_t n0 = (p0 + p) * 16;
    const int64_t valid = std::min<int64_t>(16, n_total - n0);
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    const __m512i sums = _mm512_loadu_si512(w.sums.data() + (p0 + p) * 16);
    const __m512 ws = _mm512_maskz_loadu_ps(mask, wscale + n0);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + n0) : _mm512_setzero_ps();
    #pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const int64_t i = i0 + r;
      __m512 v = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
      if (!anan[i]) {
        const __m512i dot = _mm512_sub_epi32(acc[r][p], _mm512_mullo_epi32(_mm512_set1_epi32(azero[i]), sums));
        v = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(ascale[i]), ws), _mm512_cvtepi32_ps(dot), b);
      }
      _mm512_mask_storeu_ps(out + i * ldo + n0, mask, v);
    }
  }
}

/// Panels [p_begin, p_end) against all m activation rows, in walk_vnni_tiles' order.
[[ETRT_TARGET_AVX512VNNI]] inline void int8_vnni_panels(const Int8Vnni& w, const uint8_t* bytes, const float* ascale,
                                                        const int32_t* azero, const uint8_t* anan, int64_t m,
                                                        int64_t k, const float* wscale, const float* bias,
                                                        int64_t n_total, float* out, int64_t ldo, int64_t p_begin,
                                                        int64_t p_end) {
  walk_vnni_tiles(m, p_begin, p_end, [&]<int MR, int NP>(int64_t i0, int64_t p0) {
    int8_vnni_tile<MR, NP>(w, bytes, ascale, azero, anan, k, i0, p0, wscale, bias, n_total, out, ldo);
  });
}
#pragma GCC diagnostic pop
#endif

}  // namespace detail

}  // namespace etrt::xnnpack::quant
