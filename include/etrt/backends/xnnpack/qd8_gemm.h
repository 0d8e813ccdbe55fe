// Fully-connected nodes whose activation is dynamically quantized int8 (qdint8, one scale and zero point per row)
// and whose weight stays quantized, computed in integers as XNNPACK's qd8-f32-qb4w / qd8-f32-qc8w kernels do: the
// weight is read as its stored integers, never widened to floats.
//
// 4-bit weights (blockwise, or one scale per output row): each block of 32 columns is one exact int32 dot
// product, scaled by its block's scale in float (Note [qd8 x int4 layout]).
// 8-bit weights (one scale per output row): the row is one exact int32 dot product of 16-bit activations
// q - zero_point and sign-extended weights (vpmaddwd), scaled once.
//
// Note [qd8 x int4 layout]: a weight row's bytes hold two columns each, the even one in the low nibble, each
// stored as value + 8. One 16-byte load is one 32-column block; its low nibbles are the block's 16 even columns and
// its high nibbles the 16 odd ones. The activation rows are packed once per call in the same order, so a row
// meets the weight's nibbles without any shuffle: per 64 columns (two blocks), [even columns of block 0, even
// columns of block 1, odd of block 0, odd of block 1]; a last lone block as [its even columns, its odd ones].
// Activations are stored unsigned (q + 128, with the zero point raised by 128 to match) so that the products fit
// the one unsigned x signed byte multiply-add x86 has (vpmaddubsw): |255 x 8| x 2 pairs x 2 nibbles < 2^15, no
// saturation. The zero point's share, zero_point x sum of the weights, is subtracted per row from per-row weight
// sums computed at load.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "etrt/backends/xnnpack/qd8_int4_vnni.h"
#include "etrt/backends/xnnpack/qd8_int8_vnni.h"
#include "etrt/backends/xnnpack/quant_params.h"
#include "etrt/backends/xnnpack/quantization.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/qgemm.h"

#ifdef ETRT_ISA_X86
#include <immintrin.h>
#endif
#ifdef ETRT_ISA_ARM64
#include <arm_neon.h>
#endif

namespace etrt::xnnpack::quant {

/// Columns per block of the 4-bit integer dot products (the nibbles of one 16-byte load).
inline constexpr int64_t kInt4Block = 32;
/// The widest 8-bit weight row whose int32 dot product cannot overflow: |255 x 128| x k < 2^31.
inline constexpr int64_t kInt8MaxCols = 65536;

enum class Qd8Weight : uint8_t { None, Int4, Int8 };

/// What the integer path knows of one weight at load: its kind, its scale group (columns per scale) and, for 4-bit
/// weights, each row's sum of value x scale (the zero point's share of an output is zero_point x that sum) and, on
/// a CPU with AVX-512 VNNI, the weight repacked for its kernel (qd8_int4_vnni.h, qd8_int8_vnni.h).
struct Qd8Plan {
  Qd8Weight weight = Qd8Weight::None;
  int64_t group = 0;
  std::vector<float> row_sums;
  Int4Vnni vnni;
  Int8Vnni vnni8;
};

/// Whether a call runs the VNNI kernel: packed at load, and the level still allows it (tests lower it).
inline bool int4_vnni_runs(const Qd8Plan& p) {
  return p.weight == Qd8Weight::Int4 && !p.vnni.empty() && kernels::isa::level() >= kernels::isa::kAvx512Vnni;
}

/// Whether a call runs the 8-bit VNNI kernel: packed at load, and the level still allows it.
inline bool int8_vnni_runs(const Qd8Plan& p) {
  return p.weight == Qd8Weight::Int8 && !p.vnni8.empty() && kernels::isa::level() >= kernels::isa::kAvx512Vnni;
}

/// Floats of memory a plan for a [rows, k] weight may hold at most: the row sums and the VNNI copy (4-bit: k / 8
/// floats of nibbles and k / 32 of scales a row; 8-bit: k / 4 floats of bytes and a sum).
inline uint64_t qd8_plan_floats(int64_t rows, int64_t k) {
  const auto padded = static_cast<uint64_t>((rows + 15) / 16 * 16), cols = static_cast<uint64_t>(k);
  return static_cast<uint64_t>(rows) + padded * std::max(cols / 8 + cols / 32, cols / 4 + 1);
}

/// The scale group of a 4-bit [N, K] weight the integer path reads, or 0 when its layout does not fit it: blocks of
/// whole 32-column blocks, or one scale per output row.
inline int64_t int4_scale_group(Datatype d, const Quant& q, std::span<const int64_t> dims) {
  if (dims.size() != 2 || dims[1] <= 0 || dims[1] % kInt4Block != 0) return 0;
  const int64_t k = dims[1];
  if (d == Datatype::QBInt4 && q.kind == QuantKind::PerChannelGroup && q.group_size > 0 &&
      q.group_size % kInt4Block == 0 && k % q.group_size == 0)
    return q.group_size;
  if (d == Datatype::QCInt4 && q.kind == QuantKind::PerChannel && q.channel_dim == 0) return k;
  return 0;
}

/// The plan for a constant [N, K] weight (validated by parse_value); weight None when the integer path cannot
/// read it.
inline Qd8Plan qd8_plan(Datatype d, const Quant& q, std::span<const int64_t> dims, const uint8_t* data) {
  Qd8Plan p;
  if (dims.size() != 2 || dims[0] <= 0 || dims[1] <= 0) return p;
  const int64_t rows = dims[0], k = dims[1];
  if (d == Datatype::QCInt8 && q.kind == QuantKind::PerChannel && q.channel_dim == 0 && k <= kInt8MaxCols) {
    p.weight = Qd8Weight::Int8;
    p.group = k;
    if (kernels::isa::level() >= kernels::isa::kAvx512Vnni)
      p.vnni8 = pack_int8_vnni(reinterpret_cast<const int8_t*>(data), rows, k);
    return p;
  }
  p.group = int4_scale_group(d, q, dims);
  if (p.group == 0) return p;
  p.weight = Qd8Weight::Int4;
  const int64_t groups = k / p.group;
  p.row_sums.resize(static_cast<size_t>(rows));
  for (int64_t n = 0; n < rows; ++n) {
    const uint8_t* row = data + n * (k / 2);
    float s = 0.f;
    for (int64_t g = 0; g < groups; ++g) {
      int32_t v = 0;
      for (int64_t c = g * p.group / 2; c < (g + 1) * p.group / 2; ++c)
        v += static_cast<int32_t>(row[c] & 0xF) + static_cast<int32_t>(row[c] >> 4) - 16;
      s += static_cast<float>(v) * q.scales[static_cast<size_t>(n * groups + g)];
    }
    p.row_sums[static_cast<size_t>(n)] = s;
  }
  if (kernels::isa::level() >= kernels::isa::kAvx512Vnni)
    p.vnni = pack_int4_vnni(data, q.scales.data(), rows, k, p.group);
  return p;
}

/// Activation rows quantized for the kernels, m x k: for 4-bit weights `bytes` (q + 128, Note [qd8 x int4
/// layout], or in column order for the VNNI kernel, which also reads `offsets`: 8 x the bytes' sum per scale
/// group, Note [qd8 x int4 vnni layout]), for 8-bit ones `wide` (q - zero_point, in column order) or, for their VNNI
/// kernel, `bytes` in column order (Note [qd8 x int8 vnni layout]); and per row its
/// scale, its zero point + 128, and whether the row held a NaN (its outputs are NaN, as the float product's are).
struct Qd8Rows {
  uint8_t* bytes = nullptr;
  int16_t* wide = nullptr;
  float* scale = nullptr;
  int32_t* zero = nullptr;
  uint8_t* nan = nullptr;
  int32_t* offsets = nullptr;
};

/// Bytes of scratch the packed rows take for m rows of k columns, any layout (16-byte aligned pieces).
inline uint64_t qd8_rows_bytes(int64_t m, int64_t k) {
  const auto up16 = [](uint64_t b) { return (b + 15) / 16 * 16; };
  const uint64_t rows = static_cast<uint64_t>(m);
  return up16(rows * static_cast<uint64_t>(k) * 2) + up16(rows * 4) * 2 + up16(rows) +
         up16(rows * static_cast<uint64_t>(k / kInt4Block + 1) * 4);
}
inline Qd8Rows qd8_rows_in(void* scratch, int64_t m, int64_t k) {
  const auto up16 = [](uint64_t b) { return (b + 15) / 16 * 16; };
  auto* p = static_cast<uint8_t*>(scratch);
  Qd8Rows r;
  r.bytes = p;
  r.wide = reinterpret_cast<int16_t*>(p);
  p += up16(static_cast<uint64_t>(m * k) * 2);
  r.scale = reinterpret_cast<float*>(p);
  p += up16(static_cast<uint64_t>(m) * 4);
  r.zero = reinterpret_cast<int32_t*>(p);
  p += up16(static_cast<uint64_t>(m) * 4);
  r.nan = p;
  p += up16(static_cast<uint64_t>(m));
  r.offsets = reinterpret_cast<int32_t*>(p);
  return r;
}

/// The position of column c (k % 32 == 0) in a row packed for 4-bit weights.
inline int64_t qd8_position(int64_t c, int64_t k) {
  const int64_t chunk = c / 64 * 64, in = c - chunk;
  if (chunk + 64 > k) return chunk + (in % 2) * 16 + in / 2;  // the last lone block
  return chunk + (in % 2) * 32 + (in / 32) * 16 + (in % 32) / 2;
}

/// Packs m rows of `x` (each on the grid `params[i]` set when the activation was quantized, Note [xnnpack quantized
/// values], or not rounded onto it yet, which gives the same bytes: Note [qd8 inputs left unrounded]) in the layout
/// the kernel this call runs for `plan` reads.
inline void pack_qd8_rows(const Qd8Plan& plan, const float* x, int64_t m, int64_t k, const DynamicParams* params,
                          Qd8Rows out) {
  const bool vnni = int4_vnni_runs(plan), vnni8 = int8_vnni_runs(plan);
  for (int64_t i = 0; i < m; ++i) {
    const DynamicParams p = params[i];
    const float* row = x + i * k;
    out.scale[i] = 1.f / p.inv_scale;
    out.zero[i] = p.zero_point + 128;
    if (vnni || vnni8) {  // bytes in column order (quantize_row's byte is the one below); 4-bit: the groups' sums
      uint8_t* bytes = out.bytes + i * k;
      kernels::qgemm::quantize_row(row, k, p.inv_scale, p.zero_point + 128, bytes);
      int nan = 0;
      for (int64_t c = 0; c < k; ++c) nan |= row[c] != row[c];
      out.nan[i] = static_cast<uint8_t>(nan);
      if (vnni8) continue;  // Note [qd8 x int8 vnni layout]
      const int64_t groups = k / plan.group;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t sum = 0;
        for (int64_t c = g * plan.group; c < (g + 1) * plan.group; ++c) sum += bytes[c];
        out.offsets[i * groups + g] = 8 * sum;
      }
      continue;
    }
    const float lo = static_cast<float>(-128 - p.zero_point), hi = static_cast<float>(127 - p.zero_point);
    bool nan = false;
    for (int64_t c = 0; c < k; ++c) {
      const float v = row[c];
      nan = nan || v != v;
      float q = std::min(std::max(std::nearbyint(v * p.inv_scale), lo), hi);  // q - zero_point
      q = q == q ? q : lo;
      if (plan.weight == Qd8Weight::Int8) out.wide[i * k + c] = static_cast<int16_t>(q);
      else out.bytes[i * k + qd8_position(c, k)] = static_cast<uint8_t>(static_cast<int32_t>(q) + p.zero_point + 128);
    }
    out.nan[i] = nan;
  }
}

namespace detail {

/// The result of one weight row and one activation row from its blocks' float sum.
inline float qd8_finish(const Qd8Rows& a, int64_t i, float dot, float row_sum, float bias) {
  if (a.nan[i]) return std::numeric_limits<float>::quiet_NaN();
  return a.scale[i] * (dot - static_cast<float>(a.zero[i]) * row_sum) + bias;
}
inline float qd8_finish_int8(const Qd8Rows& a, int64_t i, int32_t dot, float scale, float bias) {
  if (a.nan[i]) return std::numeric_limits<float>::quiet_NaN();
  return a.scale[i] * scale * static_cast<float>(dot) + bias;
}

/// The int32 dot product of 16 weight bytes (one block) with the block's packed activations: `even` and `odd` the
/// activations of its even and odd columns.
inline int32_t qd8_block_dot(const uint8_t* wb, const uint8_t* even, const uint8_t* odd) {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j)
    s += static_cast<int32_t>(even[j]) * ((wb[j] & 0xF) - 8) + static_cast<int32_t>(odd[j]) * ((wb[j] >> 4) - 8);
  return s;
}

/// Weight rows [n0, n1) against every activation row, portable C++ (the layout of Note [qd8 x int4 layout]).
inline void qd8_int4_rows_portable(const Qd8Rows& a, int64_t m, int64_t k, const uint8_t* w, const float* scales,
                                   int64_t group, const float* row_sums, const float* bias, float* out, int64_t ldo,
                                   int64_t n0, int64_t n1) {
  const int64_t groups = k / group, pairs_end = k / 64 * 64;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wr = w + n * (k / 2);
    const float* sc = scales + n * groups;
    for (int64_t i = 0; i < m; ++i) {
      const uint8_t* ar = a.bytes + i * k;
      float dot = 0.f;
      for (int64_t c = 0; c < pairs_end; c += 64) {
        dot += static_cast<float>(qd8_block_dot(wr + c / 2, ar + c, ar + c + 32)) * sc[c / group];
        dot += static_cast<float>(qd8_block_dot(wr + c / 2 + 16, ar + c + 16, ar + c + 48)) * sc[(c + 32) / group];
      }
      if (pairs_end < k)
        dot += static_cast<float>(qd8_block_dot(wr + pairs_end / 2, ar + pairs_end, ar + pairs_end + 16)) *
               sc[pairs_end / group];
      out[i * ldo + n] = qd8_finish(a, i, dot, row_sums[n], bias ? bias[n] : 0.f);
    }
  }
}

/// 8-bit weight rows [n0, n1) against every activation row, portable C++.
inline void qd8_int8_rows_portable(const Qd8Rows& a, int64_t m, int64_t k, const int8_t* w, const float* scales,
                                   const float* bias, float* out, int64_t ldo, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * k;
    for (int64_t i = 0; i < m; ++i) {
      const int16_t* ar = a.wide + i * k;
      int32_t s = 0;
      for (int64_t c = 0; c < k; ++c) s += static_cast<int32_t>(ar[c]) * wr[c];
      out[i * ldo + n] = qd8_finish_int8(a, i, s, scales[n], bias ? bias[n] : 0.f);
    }
  }
}

#ifdef ETRT_ISA_X86
[[ETRT_TARGET_AVX2]] inline float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Weight rows [n0, n1) against every activation row, up to four activation rows per pass over a weight row.
[[ETRT_TARGET_AVX2]] inline void qd8_int4_rows_avx2(const Qd8Rows& a, int64_t m, int64_t k, const uint8_t* w,
                                                     const float* scales, int64_t group, const float* row_sums,
                                                     const float* bias, float* out, int64_t ldo, int64_t n0,
                                                     int64_t n1) {
  const int64_t groups = k / group, pairs_end = k / 64 * 64;
  const __m256i low4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wr = w + n * (k / 2);
    const float* sc = scales + n * groups;
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
      const int rows = static_cast<int>(std::min<int64_t>(4, m - i0));
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (int64_t c = 0; c < pairs_end; c += 64) {  // two blocks: 32 weight bytes
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + c / 2));
        const __m256i even = _mm256_sub_epi8(_mm256_and_si256(v, low4), eight);
        const __m256i odd = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), eight);
        const __m256 s = _mm256_set_m128(_mm_set1_ps(sc[(c + 32) / group]), _mm_set1_ps(sc[c / group]));
        for (int r = 0; r < rows; ++r) {
          const uint8_t* ar = a.bytes + (i0 + r) * k + c;
          const __m256i pe = _mm256_maddubs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ar)), even);
          const __m256i po = _mm256_maddubs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ar + 32)), odd);
          const __m256i d = _mm256_madd_epi16(_mm256_add_epi16(pe, po), ones);
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), s, acc[r]);
        }
      }
      if (pairs_end < k) {  // the last lone block: 16 weight bytes
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + pairs_end / 2));
        const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
        const __m256i wv = _mm256_sub_epi8(_mm256_and_si256(both, low4), eight);
        const __m256 s = _mm256_set1_ps(sc[pairs_end / group]);
        for (int r = 0; r < rows; ++r) {
          const uint8_t* ar = a.bytes + (i0 + r) * k + pairs_end;
          const __m256i p = _mm256_maddubs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ar)), wv);
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), s, acc[r]);
        }
      }
      for (int r = 0; r < rows; ++r)
        out[(i0 + r) * ldo + n] = qd8_finish(a, i0 + r, hsum_avx2(acc[r]), row_sums[n], bias ? bias[n] : 0.f);
    }
  }
}

[[ETRT_TARGET_AVX2]] inline int32_t hsum_epi32_avx2(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

/// 8-bit weight rows [n0, n1) against every activation row, up to four activation rows per pass over a weight row:
/// 16 sign-extended weights meet 16 activations in one vpmaddwd.
[[ETRT_TARGET_AVX2]] inline void qd8_int8_rows_avx2(const Qd8Rows& a, int64_t m, int64_t k, const int8_t* w,
                                                     const float* scales, const float* bias, float* out, int64_t ldo,
                                                     int64_t n0, int64_t n1) {
  const int64_t vec_end = k / 16 * 16;
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * k;
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
      const int rows = static_cast<int>(std::min<int64_t>(4, m - i0));
      __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                        _mm256_setzero_si256()};
      for (int64_t c = 0; c < vec_end; c += 16) {
        const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + c)));
        for (int r = 0; r < rows; ++r) {
          const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.wide + (i0 + r) * k + c));
          acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(av, wv));
        }
      }
      for (int r = 0; r < rows; ++r) {
        int32_t s = hsum_epi32_avx2(acc[r]);
        for (int64_t c = vec_end; c < k; ++c) s += static_cast<int32_t>(a.wide[(i0 + r) * k + c]) * wr[c];
        out[(i0 + r) * ldo + n] = qd8_finish_int8(a, i0 + r, s, scales[n], bias ? bias[n] : 0.f);
      }
    }
  }
}
#endif

#ifdef ETRT_ISA_ARM64
// Note [qd8 on neon]: NEON multiplies signed bytes by signed bytes, so the kernels read a packed activation byte
// (q + 128, Note [qd8 x int4 layout]) with its top bit flipped: q itself, as int8. The products then lack the
// 128 x weight share the x86 kernels' unsigned bytes carry, and the zero point's share is zero_point x row sum
// (qd8_finish_signed) rather than (zero_point + 128) x row sum. A block of 32 columns is 16 even and 16 odd
// products; without the dot product extension they are widened to int16 (|128 x 8| x 2 < 2^15) and pairwise added
// into four int32 lanes, with it one SDOT per 16 (Note [isa dispatch], level neondot). SDOT goes through inline
// assembly: GCC's intrinsic refuses to be inlined into a function not itself compiled for dotprod, and the kernel
// body is shared by both levels. Its `.arch` line only widens what the assembler accepts after it (binutils takes
// dotprod only on an ARMv8.2 base); the compiler still emits ARMv8.0 code.

inline float qd8_finish_signed(const Qd8Rows& a, int64_t i, float dot, float row_sum, float bias) {
  if (a.nan[i]) return std::numeric_limits<float>::quiet_NaN();
  return a.scale[i] * (dot - static_cast<float>(a.zero[i] - 128) * row_sum) + bias;
}

[[gnu::always_inline]] inline int32x4_t sdot_lanes(int32x4_t acc, int8x16_t a, int8x16_t w) {
  asm(".arch armv8.2-a+dotprod\n\tsdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(w));
  return acc;
}

/// The int32 partial sums (four lanes) of one block: even and odd activations against even and odd weights.
template <bool Dot>
[[gnu::always_inline]] inline int32x4_t qd8_block_neon(int8x16_t ae, int8x16_t ao, int8x16_t we, int8x16_t wo) {
  if constexpr (Dot) {
    return sdot_lanes(sdot_lanes(vdupq_n_s32(0), ae, we), ao, wo);
  } else {
    const int16x8_t lo = vmlal_s8(vmull_s8(vget_low_s8(ae), vget_low_s8(we)), vget_low_s8(ao), vget_low_s8(wo));
    const int16x8_t hi = vmlal_high_s8(vmull_high_s8(ae, we), ao, wo);
    return vpadalq_s16(vpaddlq_s16(lo), hi);
  }
}

[[gnu::always_inline]] inline int8x16_t signed_bytes(const uint8_t* p) {
  return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p), vdupq_n_u8(0x80)));
}

/// Weight rows [n0, n1) against every activation row, up to four activation rows per pass over a weight row.
template <bool Dot>
inline void qd8_int4_rows_neon(const Qd8Rows& a, int64_t m, int64_t k, const uint8_t* w, const float* scales,
                               int64_t group, const float* row_sums, const float* bias, float* out, int64_t ldo,
                               int64_t n0, int64_t n1) {
  const int64_t groups = k / group, pairs_end = k / 64 * 64;
  const uint8x16_t low4 = vdupq_n_u8(0x0F);
  const int8x16_t eight = vdupq_n_s8(8);
  const auto nibbles = [&](const uint8_t* p, int8x16_t& even, int8x16_t& odd) {
    const uint8x16_t v = vld1q_u8(p);
    even = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, low4)), eight);
    odd = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
  };
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wr = w + n * (k / 2);
    const float* sc = scales + n * groups;
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
      const int rows = static_cast<int>(std::min<int64_t>(4, m - i0));
      float32x4_t acc[4] = {vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f)};
      for (int64_t c = 0; c < pairs_end; c += 64) {  // two blocks: 32 weight bytes
        int8x16_t e0, o0, e1, o1;
        nibbles(wr + c / 2, e0, o0);
        nibbles(wr + c / 2 + 16, e1, o1);
        const float s0 = sc[c / group], s1 = sc[(c + 32) / group];
        for (int r = 0; r < rows; ++r) {
          const uint8_t* ar = a.bytes + (i0 + r) * k + c;
          const int32x4_t d0 = qd8_block_neon<Dot>(signed_bytes(ar), signed_bytes(ar + 32), e0, o0);
          const int32x4_t d1 = qd8_block_neon<Dot>(signed_bytes(ar + 16), signed_bytes(ar + 48), e1, o1);
          acc[r] = vfmaq_n_f32(vfmaq_n_f32(acc[r], vcvtq_f32_s32(d0), s0), vcvtq_f32_s32(d1), s1);
        }
      }
      if (pairs_end < k) {  // the last lone block: 16 weight bytes
        int8x16_t e, o;
        nibbles(wr + pairs_end / 2, e, o);
        const float s = sc[pairs_end / group];
        for (int r = 0; r < rows; ++r) {
          const uint8_t* ar = a.bytes + (i0 + r) * k + pairs_end;
          acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(qd8_block_neon<Dot>(signed_bytes(ar), signed_bytes(ar + 16), e, o)), s);
        }
      }
      for (int r = 0; r < rows; ++r)
        out[(i0 + r) * ldo + n] = qd8_finish_signed(a, i0 + r, vaddvq_f32(acc[r]), row_sums[n], bias ? bias[n] : 0.f);
    }
  }
}

/// 8-bit weight rows [n0, n1) against every activation row, up to four activation rows per pass over a weight row:
/// 8 sign-extended weights meet 8 activations in two widening multiply-adds.
inline void qd8_int8_rows_neon(const Qd8Rows& a, int64_t m, int64_t k, const int8_t* w, const float* scales,
                               const float* bias, float* out, int64_t ldo, int64_t n0, int64_t n1) {
  const int64_t vec_end = k / 8 * 8;
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * k;
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
      const int rows = static_cast<int>(std::min<int64_t>(4, m - i0));
      int32x4_t acc[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
      for (int64_t c = 0; c < vec_end; c += 8) {
        const int16x8_t wv = vmovl_s8(vld1_s8(wr + c));
        for (int r = 0; r < rows; ++r) {
          const int16x8_t av = vld1q_s16(a.wide + (i0 + r) * k + c);
          acc[r] = vmlal_high_s16(vmlal_s16(acc[r], vget_low_s16(av), vget_low_s16(wv)), av, wv);
        }
      }
      for (int r = 0; r < rows; ++r) {
        int32_t s = vaddvq_s32(acc[r]);
        for (int64_t c = vec_end; c < k; ++c) s += static_cast<int32_t>(a.wide[(i0 + r) * k + c]) * wr[c];
        out[(i0 + r) * ldo + n] = qd8_finish_int8(a, i0 + r, s, scales[n], bias ? bias[n] : 0.f);
      }
    }
  }
}
#endif

}  // namespace detail

/// out[i, n] = sum_k a[i, k] * W(n, k) + bias[n]: `a` the m activation rows packed for `plan`'s weight kind
/// (pack_qd8_rows), W the [N, K] quantized weight `plan` was made for; `out` rows are `N` apart. Output rows split
/// across the worker pool when the product is large.
inline void qd8_gemm(const Qd8Plan& plan, const Qd8Rows& a, int64_t m, std::span<const int64_t> dims,
                     const uint8_t* w, const Quant& q, const float* bias, float* out) {
  const int64_t rows = dims[0], k = dims[1];
  const bool int4 = plan.weight == Qd8Weight::Int4;
  const auto* w8 = reinterpret_cast<const int8_t*>(w);
#ifdef ETRT_ISA_X86
  if (int4_vnni_runs(plan) || int8_vnni_runs(plan)) {
    const auto panels = [&](int64_t p0, int64_t p1) {
      if (int4)
        detail::int4_vnni_panels(plan.vnni, a.bytes, a.offsets, a.scale, a.zero, a.nan, m, k, plan.group,
                                 plan.row_sums.data(), bias, rows, out, rows, p0, p1);
      else
        detail::int8_vnni_panels(plan.vnni8, a.bytes, a.scale, a.zero, a.nan, m, k, q.scales.data(), bias, rows, out,
                                 rows, p0, p1);
    };
    // A 16 x 32 block takes ten or so cycles: split only products far above the float kernels' threshold.
    const int64_t count = int4 ? plan.vnni.panels : plan.vnni8.panels;
    if (m * rows * k < 32 * kernels::min_parallel_work()) panels(0, count);
    else kernels::parallel_chunks(count, std::max<int64_t>(4, count / (8 * kernels::thread_count().load()) / 4 * 4),
                                  panels);
    return;
  }
#endif
  auto run = [&](int64_t n0, int64_t n1) {
#ifdef ETRT_ISA_X86
    if (kernels::isa::level() >= kernels::isa::kAvx2) {
      if (int4)
        detail::qd8_int4_rows_avx2(a, m, k, w, q.scales.data(), plan.group, plan.row_sums.data(), bias, out, rows,
                                   n0, n1);
      else
        detail::qd8_int8_rows_avx2(a, m, k, w8, q.scales.data(), bias, out, rows, n0, n1);
      return;
    }
#endif
#ifdef ETRT_ISA_ARM64
    if (int4 && kernels::isa::level() >= kernels::isa::kNeonDot)
      detail::qd8_int4_rows_neon<true>(a, m, k, w, q.scales.data(), plan.group, plan.row_sums.data(), bias, out,
                                       rows, n0, n1);
    else if (int4)
      detail::qd8_int4_rows_neon<false>(a, m, k, w, q.scales.data(), plan.group, plan.row_sums.data(), bias, out,
                                        rows, n0, n1);
    else
      detail::qd8_int8_rows_neon(a, m, k, w8, q.scales.data(), bias, out, rows, n0, n1);
    return;
#endif
    if (int4)
      detail::qd8_int4_rows_portable(a, m, k, w, q.scales.data(), plan.group, plan.row_sums.data(), bias, out, rows,
                                     n0, n1);
    else
      detail::qd8_int8_rows_portable(a, m, k, w8, q.scales.data(), bias, out, rows, n0, n1);
  };
  // Integer products run several times faster than the float GEMV's, hence the larger threshold.
  if (m * rows * k < (int4 ? 4 : 2) * kernels::min_parallel_work() || rows < 32) run(0, rows);
  else kernels::parallel_for(rows, 16, run);
}

}  // namespace etrt::xnnpack::quant
