// The logistic function over float arrays at the machine's width, shared by the portable sigmoid and the XNNPACK
// delegate's Sigmoid node (which rounds the result onto a quantized grid through `out`), and x * sigmoid(x) (SiLU),
// which the delegate computes as a convolution writes its output (Note [xnnpack silu]).
//
// y = 1 / (1 + e^-x) with the lane-wise exp (vec::exp's values, within 2 ulp of libm's expf, computed without its
// end handling and the ends restored on y; at AVX2 and AVX-512 a table-driven e^-x of their own): +inf (x below
// about -88) gives 0 and NaN stays NaN. The division stays: a reciprocal estimate with a Newton step measured slower
// (0.28 -> 0.30 ns an element at AVX-512, standalone).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/vec.h"

#ifdef ETRT_ISA_X86
#include <immintrin.h>
#endif

namespace etrt::kernels {

namespace detail {
/// Stores out(v * s), or out(s) without kTimesX, for s = 1 / (1 + e) with e = e^-v clamped to the finite range: the
/// ends restored (e^-v overflows below -kExpHi: 0; a NaN v stays NaN, through the product or the select).
template <bool kTimesX, class V, class Out>
[[gnu::always_inline]] inline void store_logistic(float* y, const V& v, const V& e, const Out& out) {
  V s = 1.0f / (1.0f + e);
  s = v < -vec::kExpHi ? V{} : s;
  if constexpr (kTimesX) {
    vec::store(y, out(v * s));
  } else {
    s = v != v ? v : s;
    vec::store(y, out(s));
  }
}

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593: the AVX-512 intrinsics' self-initialised "undefined" vectors
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// 2^(j / 16) for j = 0 .. 15, rounded to float: the table of logistic_blocks_avx512's e^-x (one zmm register).
inline constexpr float kExp2Sixteenths[16] = {
    1.0f,                1.0442737824274138f, 1.0905077326652577f, 1.1387886347566916f,
    1.1892071150027210f, 1.2418578120734840f, 1.2968395546510096f, 1.3542555469368927f,
    1.4142135623730951f, 1.4768261459394993f, 1.5422108254079407f, 1.6104903319492543f,
    1.6817928305074290f, 1.7562521603732995f, 1.8340080864093424f, 1.9152065613971472f};

/// logistic_blocks' loop at AVX-512, in fewer instructions. It is most of the finish of a SiLU-activated layer
/// (efficientnet_b0's convolutions): the generic loop took 0.42 ns an element on a Zen 4 core, a loop with the
/// generic one's exp and vscalefps 0.28, this one 0.22-0.23 (standalone, L1 or L2). A Zen 4 core issues about two
/// 512-bit operations a cycle here, so what counts is how many there are:
/// - e^t as 2^(n / 16) e^r with n = round(16 t / ln 2): |r| <= ln 2 / 32, where r + r^2 / 2 + r^3 / 6 is within
///   1e-8 of e^r - 1 (three operations where the generic loop's degree-7 polynomial over |r| <= ln 2 / 2 takes
///   seven). 2^((n mod 16) / 16) comes from a 16-float table by vpermps, whose index is the low four bits of the
///   magic-biased n; 2^(n >> 4) is added into its exponent field as an integer (a shift and an add, on the
///   integer pipes: the low 13 bits of the biased n shifted left by 19, against entries stored less j << 19). On
///   the clamped range n >> 4 stays within [-126, 127] and 2^(n / 16) e^r below 2^128: every sum is the bits of
///   a normal float;
/// - the range clamps by vmaxps / vminps (a NaN t gives the second operand, the bound).
/// Its sigmoid is within 3.1 ulp of the exact value and its SiLU within 3.5 (the generic loop: 2.5 and 2.8), over
/// every 7th float below 100 in magnitude where the result is a normal float.
template <bool kTimesX, class Out>
[[ETRT_TARGET_AVX512]] inline int64_t logistic_blocks_avx512(const float* x, float* y, int64_t n, const Out& out_ref) {
  using V = vec::Vec<16>;
  const __m512 lo = _mm512_set1_ps(vec::kExpLo), hi = _mm512_set1_ps(vec::kExpHi);
  // Each entry less j in its mantissa's top four bits: adding n << 19 then adds (n >> 4) << 23 to the exponent
  // and puts j back.
  const __m512i table =
      _mm512_sub_epi32(_mm512_castps_si512(_mm512_loadu_ps(kExp2Sixteenths)),
                       _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 19));
  constexpr float kMagic = 12582912.0f;  // 1.5 x 2^23: adding it rounds to an integer held in the low mantissa bits
  const Out out = out_ref;  // Note [captured scalars]
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    V v;
    vec::load(v, x + i);
    const V t = _mm512_min_ps(_mm512_max_ps(-v, lo), hi);
    const V biased = t * 23.083120654223414f + kMagic;  // 16 / ln 2
    const V k = biased - kMagic;
    const V r = (t - k * (0.693359375f / 16)) - k * (-2.12194440e-4f / 16);  // ln 2 / 16 in two parts, k * hi exact
    const __m512i bits = _mm512_castps_si512(biased);
    const __m512 entry = _mm512_permutexvar_ps(bits, _mm512_castsi512_ps(table));
    const __m512i scaled = _mm512_add_epi32(_mm512_castps_si512(entry), _mm512_slli_epi32(bits, 19));
    const V two_n16 = _mm512_castsi512_ps(scaled);
    const V expm1_r = ((r * (1.0f / 6) + 0.5f) * r + 1.0f) * r;
    const V e = two_n16 * expm1_r + two_n16;
    store_logistic<kTimesX>(y + i, v, e, out);
  }
  return i;
}

/// 2^(j / 8) for j = 0 .. 7, rounded to float: logistic_blocks_avx2's table (one ymm register).
inline constexpr float kExp2Eighths[8] = {1.0f,                1.0905077326652577f, 1.1892071150027210f,
                                          1.2968395546510096f, 1.4142135623730951f, 1.5422108254079407f,
                                          1.6817928305074290f, 1.8340080864093424f};

/// logistic_blocks' loop at AVX2, as logistic_blocks_avx512 with vpermps' eight lanes: n = round(8 t / ln 2),
/// |r| <= ln 2 / 16, e^r - 1 by its degree-4 Taylor polynomial (within 1.3e-9), 2^(n >> 3) added to the entry's
/// exponent by the biased n shifted left by 20 against entries stored less j << 20. 0.525 -> 0.39 ns an element
/// on a Zen 4 core at this level (standalone); sigmoid within 2.5 ulp, SiLU within 2.9, measured as the AVX-512
/// loop's.
template <bool kTimesX, class Out>
[[ETRT_TARGET_AVX2]] inline int64_t logistic_blocks_avx2(const float* x, float* y, int64_t n, const Out& out_ref) {
  using V = vec::Vec<8>;
  const __m256 lo = _mm256_set1_ps(vec::kExpLo), hi = _mm256_set1_ps(vec::kExpHi);
  const __m256i table = _mm256_sub_epi32(_mm256_castps_si256(_mm256_loadu_ps(kExp2Eighths)),
                                         _mm256_slli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), 20));
  constexpr float kMagic = 12582912.0f;  // 1.5 x 2^23
  const Out out = out_ref;  // Note [captured scalars]
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    V v;
    vec::load(v, x + i);
    const V t = _mm256_min_ps(_mm256_max_ps(-v, lo), hi);  // a NaN t gives the second operand, the bound
    const V biased = t * 11.541560327111707f + kMagic;  // 8 / ln 2
    const V k = biased - kMagic;
    const V r = (t - k * (0.693359375f / 8)) - k * (-2.12194440e-4f / 8);  // ln 2 / 8 in two parts, k * hi exact
    const __m256i bits = _mm256_castps_si256(biased);
    const V two_n8 = _mm256_castsi256_ps(_mm256_add_epi32(
        _mm256_castps_si256(_mm256_permutevar8x32_ps(_mm256_castsi256_ps(table), bits)), _mm256_slli_epi32(bits, 20)));
    const V expm1_r = (((r * (1.0f / 24) + 1.0f / 6) * r + 0.5f) * r + 1.0f) * r;
    const V e = two_n8 * expm1_r + two_n8;
    store_logistic<kTimesX>(y + i, v, e, out);
  }
  return i;
}
#pragma GCC diagnostic pop
#endif

/// y[i] = out(sigmoid(x[i])), or out(x[i] * sigmoid(x[i])) with kTimesX, for the whole blocks of [0, n) (16 lanes
/// at AVX-512, fewer below: Note [vector lanes per level]); returns how many it did.
template <bool kTimesX, class Out>
inline int64_t logistic_blocks(const float* x, float* y, int64_t n, const Out& out) {
#ifdef ETRT_ISA_X86
  if (isa::level() >= isa::kAvx512) return logistic_blocks_avx512<kTimesX>(x, y, n, out);
  if (isa::level() >= isa::kAvx2) return logistic_blocks_avx2<kTimesX>(x, y, n, out);
#endif
  // Below AVX2 and on ARM: one 128-bit register's lanes (Note [vector lanes per level]); the wider levels have
  // their own loops above.
  constexpr int L = 4;
  using V = vec::Vec<L>;
  const Out o = out;  // Note [captured scalars]
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V v;
    vec::load(v, x + i);
    // e^-v as vec::exp computes it inside its finite range, without its selects for the ends: -v is clamped
    // into the range (a NaN to its low end), and what the ends give is restored on s. The same values as
    // 1 / (1 + vec::exp(-v)), element for element, in about four fifths of the time.
    V t = -v;
    t = t > vec::kExpLo ? t : vec::kExpLo;  // a NaN compares false: the integer conversion below sees a finite value
    t = t < vec::kExpHi ? t : vec::kExpHi;
    V e;
    vec::exp_in_range<L>(e, t);
    store_logistic<kTimesX>(y + i, v, e, o);
  }
  return i;
}
}  // namespace detail

/// y[i] = out(sigmoid(x[i])) for the whole blocks of [0, n) (logistic_blocks'); returns how many it did (the caller
/// finishes the tail: blocks_with_padded_tail). `out` maps a Vec of any width (the identity, or a rounding onto a
/// grid).
template <class Out>
inline int64_t sigmoid_blocks(const float* x, float* y, int64_t n, const Out& out) {
  return detail::logistic_blocks<false>(x, y, n, out);
}

/// y[i] = out(x[i] * sigmoid(x[i])) for the whole blocks of [0, n), as sigmoid_blocks then a multiply
/// would give it (the same roundings in the same order); returns how many it did.
template <class Out>
inline int64_t silu_blocks(const float* x, float* y, int64_t n, const Out& out) {
  return detail::logistic_blocks<true>(x, y, n, out);
}

/// Runs `blocks` (one of the *_blocks functions, bound to its `out`) over all of [0, n): the whole blocks in place,
/// the last partial one on a zero-padded copy. Every element then goes through the same instructions wherever it
/// sits. A scalar tail would not: it is compiled for the baseline ISA, and from -O2 on GCC fuses the blocks'
/// multiply-adds where the target has FMA (its default -ffp-contract=fast), so the same x gave results an ulp or two
/// apart in the body and in the tail of one tensor.
template <class Blocks>
inline void blocks_with_padded_tail(const float* x, float* y, int64_t n, const Blocks& blocks) {
  const int64_t i = blocks(x, y, n);
  if (i == n) return;
  float xt[16] = {}, yt[16];
  std::copy(x + i, x + n, xt);
  blocks(xt, yt, int64_t{16});
  std::copy(yt, yt + (n - i), y + i);
}

/// y[i] = out(sigmoid(x[i])) for i < n.
template <class Out>
inline void sigmoid_all(const float* x, float* y, int64_t n, const Out& out) {
  blocks_with_padded_tail(x, y, n, [&](const float* a, float* b, int64_t m) { return sigmoid_blocks(a, b, m, out); });
}

/// y[i] = clamp(x[i] * sigmoid(x[i]), lo, hi) for i < n, with the clamp left out where [lo, hi] bounds nothing (a
/// SiLU's Multiply seldom clamps; the clamp's selects were a fifth of the loop).
inline void silu_clamped(const float* x, float* y, int64_t n, float lo, float hi) {
  const bool bounded = lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity();
  if (bounded) {
    const auto clamp = [lo, hi](auto v) ETRT_ISA_INLINE { return vec::clamped(v, lo, hi); };
    blocks_with_padded_tail(x, y, n, [&](const float* a, float* b, int64_t m) { return silu_blocks(a, b, m, clamp); });
  } else {
    const auto as_is = [](auto v) ETRT_ISA_INLINE { return v; };
    blocks_with_padded_tail(x, y, n, [&](const float* a, float* b, int64_t m) { return silu_blocks(a, b, m, as_is); });
  }
}

}  // namespace etrt::kernels
