// A blocked single-threaded GEMM: C = alpha * A * B + beta * C over arbitrary (row, column) element strides.
//
// Note [gemm blocking]: the classic three-level scheme. B is packed in KC x NC blocks into column panels of NR
// (row-major within a panel), A in MC x KC blocks into row panels of MR; a micro-kernel multiplies one MR-panel by
// one NR-panel into an MR x NR register tile. Panels are zero-padded to MR / NR, so the micro-kernel has no edge
// cases; the driver adds alpha * tile into the valid part of C. beta is applied once before the product (beta == 0
// overwrites C, so NaNs in C do not propagate, as BLAS and torch's addmm do).
//
// Note [gemm micro-kernel]: the micro-kernel is a plain triple loop over a fixed-size accumulator array; with the
// trip counts constant GCC -O3 unrolls it and keeps the accumulators in vector registers. It is compiled several
// times under function-level target attributes (AVX-512, AVX2+FMA, baseline) and picked once at runtime, so the
// library gets wide vectors without requiring -march flags from its users.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>  // integer_sequence: the tile tails
#include <vector>

#include "etrt/core/aligned_buffer.h"
#include "etrt/kernels/util/fast_math.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/parallel.h"

#ifdef ETRT_ISA_X86
#include <immintrin.h>
#endif
#ifdef ETRT_ISA_ARM64
#include <arm_neon.h>
#endif

namespace etrt::kernels::gemm {

/// A matrix operand: element (i, j) is at data[i * rs + j * cs].
template <class T>
struct MatRef {
  const T* data;
  int64_t rs;
  int64_t cs;
};

namespace detail {

/// Where a micro-kernel writes its tile: C (row stride ldc), after adding C itself (accumulate) or the bias (null
/// for none), clamped to [lo, hi] when clamp is set. `segments` runs of kc steps make up the tile's K (Note
/// [conv rows in place]): run s reads A from a + s * a_ss and B from the panel's rows s * kc on.
template <class T>
struct Tile {
  T* c;
  int64_t ldc;
  const T* bias;
  bool accumulate;
  bool clamp;
  T lo, hi;
  int64_t segments = 1;
  int64_t a_ss = 0;
  /// Where non-null, the AVX-512 float tiles touch one cache line a step from here on, into L2 (Note [next panel
  /// prefetch]); other levels' tiles and those summing runs (Seg) do not.
  const char* prefetch = nullptr;
};

/// The most rows a micro tile has at any level (AVX-512: 8 rows of two registers), which sizes the edge-tile buffers
/// of the blocked and packed GEMMs: a taller tile must raise it (a 12-row AVX-512 tile overran those buffers when
/// they were sized by a literal 8, and measured no faster once they were not).
inline constexpr int kMaxMr = 8;
/// Steps of a tile between its bursts of prefetches (Note [next panel prefetch]).
inline constexpr int64_t kPrefetchBurst = 16;

/// An MR x NR tile of A * B over kc, A read at a[p * a_ps + i * a_is] (packed panels: MR, 1; rows of a row-major
/// matrix read in place: 1, lda), B one packed panel whose rows are BS apart (BS > NR: the left NR columns of a
/// wider panel); the epilogue runs on the accumulators in registers.
/// The A strides are run-time values on purpose: with constant ones GCC hoists all MR broadcasts of a step ahead
/// of the multiplies and runs out of vector registers (an AVX2 6 x 16 tile then spilled 4 of its 12 accumulators
/// to the stack on every step and ran at a third of the speed).
template <class T, int MR, int NR, bool Fma, int BS = NR>
[[gnu::always_inline]] inline void micro_tile(int64_t kc, const T* __restrict a, int64_t a_ps, int64_t a_is,
                                              const T* __restrict b, const Tile<T>& t) {
  static_assert(MR <= kMaxMr && MR * NR <= kMaxMr * 32, "the edge-tile buffers hold kMaxMr x 32 values");
  T acc[MR * NR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    T bv[NR];  // one row of the B panel, reused by every row of the tile
#pragma GCC unroll 64
    for (int j = 0; j < NR; ++j) bv[j] = b[p * BS + j];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const T av = a[p * a_ps + i * a_is];
#pragma GCC unroll 64
      for (int j = 0; j < NR; ++j) {
        if constexpr (!Fma)
          acc[i * NR + j] += av * bv[j];
        else if constexpr (std::is_same_v<T, float>)
          acc[i * NR + j] = __builtin_fmaf(av, bv[j], acc[i * NR + j]);
        else
          acc[i * NR + j] = __builtin_fma(av, bv[j], acc[i * NR + j]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    T* __restrict crow = t.c + i * t.ldc;
    T* r = acc + i * NR;
    if (t.accumulate) {
#pragma GCC unroll 64
      for (int j = 0; j < NR; ++j) r[j] += crow[j];
    } else if (t.bias) {
#pragma GCC unroll 64
      for (int j = 0; j < NR; ++j) r[j] += t.bias[j];
    }
    if (t.clamp) {
#pragma GCC unroll 64
      for (int j = 0; j < NR; ++j) r[j] = std::min(std::max(r[j], t.lo), t.hi);  // NaN stays NaN
    }
#pragma GCC unroll 64
    for (int j = 0; j < NR; ++j) crow[j] = r[j];
  }
}

#ifdef ETRT_ISA_X86
// One wrapper per instruction set: the target attribute is what lets micro_tile's loops use that set's registers.
template <class T, int MR, int NR, int BS = NR>
[[ETRT_TARGET_AVX512]] inline void micro_avx512(int64_t kc, const T* a, int64_t ps, int64_t is, const T* b,
                                                const Tile<T>& t) {
  micro_tile<T, MR, NR, true, BS>(kc, a, ps, is, b, t);
}
template <class T, int MR, int NR, int BS = NR>
[[ETRT_TARGET_AVX2]] inline void micro_avx2(int64_t kc, const T* a, int64_t ps, int64_t is, const T* b,
                                            const Tile<T>& t) {
  micro_tile<T, MR, NR, true, BS>(kc, a, ps, is, b, t);
}

// Note [float micro-kernels in intrinsics]: the float tiles of the two x86 levels are written in intrinsics, the
// accumulators an array of registers. From micro_tile's per-element loops GCC vectorized the multiply loop well but
// took the accumulators apart lane by lane for the bias and clamp (shuffles, scalar adds and max/min), and a layer
// with K = 16 (mobilenet's expansions) spent four fifths of its time there rather than in the multiplies.
// The clamp is max(lo, .) then min(hi, .) with the value second: maxps / minps return their second operand when
// either is NaN, so NaN stays NaN as std::max / std::min leave it. They serve the packed GEMM (its bias and clamp);
// the blocked GEMM, whose tiles only add into C, keeps micro_tile: with these its 64^3 and 256^3 products ran
// 15-20% slower inside the module (not in a standalone build of the same header), for reasons not found.
#pragma GCC diagnostic push  // GCC bug 105593: the AVX-512 intrinsics' self-initialised "undefined" vectors
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Note [narrow tiles]: an AVX-512 tile NR % 16 == 8 columns wide (8 or 24) adds one 256-bit accumulator a row to
// its 512-bit ones, multiplied by the lower half of the same broadcast. It serves a 32-column panel's last 8 or 24
// columns (a layer of 24 or 40 output channels), which the 32- or 16-column tiles padded by a third or a half. A
// 256-bit FMA costs half a 512-bit one where the core splits 512-bit operations in two (Zen 4: mobilenet_v2's
// 3136 x 144 x 24 layer 262 -> 216 us on one core) and the same where it does not, so the padded columns it spares
// never cost more.
template <int MR, int NR, int BS = NR, bool Seg = false>
[[ETRT_TARGET_AVX512]] inline void micro_f32_avx512(int64_t kc, const float* __restrict a, int64_t a_ps,
                                                    int64_t a_is, const float* __restrict b, const Tile<float>& t) {
  static_assert(NR % 8 == 0 && MR <= kMaxMr && MR * NR <= kMaxMr * 32);
  constexpr int NV = NR / 16;             // 512-bit accumulators a row
  constexpr bool kYmm = NR % 16 != 0;     // and one 256-bit one (Note [narrow tiles])
  constexpr int NA = NV > 0 ? NV : 1;     // array extents (a tile of 8 columns has no 512-bit accumulator)
  __m512 acc[MR][NA];
  __m256 acc8[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
    if constexpr (kYmm) acc8[i] = _mm256_setzero_ps();
  }
  const auto steps = [&](const float* __restrict a, const float* __restrict b, int64_t kn) ETRT_LAMBDA_AVX512 {
    for (int64_t p = 0; p < kn; ++p) {
      __m512 bv[NA];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + p * BS + 16 * v);
      __m256 b8;
      if constexpr (kYmm) b8 = _mm256_loadu_ps(b + p * BS + 16 * NV);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m512 av = _mm512_set1_ps(a[p * a_ps + i * a_is]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
        if constexpr (kYmm) acc8[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(av), b8, acc8[i]);
      }
    }
  };
  if (!Seg && t.prefetch) {
    for (int64_t p0 = 0; p0 < kc; p0 += kPrefetchBurst) {  // Note [next panel prefetch]
      const int64_t kn = std::min(kPrefetchBurst, kc - p0);
      for (int64_t l = 0; l < kn; ++l) _mm_prefetch(t.prefetch + (p0 + l) * 64, _MM_HINT_T1);
      steps(a + p0 * a_ps, b + p0 * BS, kn);
    }
  } else {
    steps(a, b, kc);
  }
  if constexpr (Seg)
    for (int64_t s = 1; s < t.segments; ++s) steps(a + s * t.a_ss, b + s * kc * BS, kc);
  const __m512 lo = _mm512_set1_ps(t.lo), hi = _mm512_set1_ps(t.hi);
  __m512 bias[NA];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) bias[v] = t.bias ? _mm512_loadu_ps(t.bias + 16 * v) : _mm512_setzero_ps();
  __m256 bias8 = _mm256_setzero_ps();
  if constexpr (kYmm)
    if (t.bias) bias8 = _mm256_loadu_ps(t.bias + 16 * NV);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* crow = t.c + i * t.ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      __m512 r = _mm512_add_ps(acc[i][v], t.accumulate ? _mm512_loadu_ps(crow + 16 * v) : bias[v]);
      if (t.clamp) r = _mm512_min_ps(hi, _mm512_max_ps(lo, r));
      _mm512_storeu_ps(crow + 16 * v, r);
    }
    if constexpr (kYmm) {
      __m256 r = _mm256_add_ps(acc8[i], t.accumulate ? _mm256_loadu_ps(crow + 16 * NV) : bias8);
      if (t.clamp) r = _mm256_min_ps(_mm512_castps512_ps256(hi), _mm256_max_ps(_mm512_castps512_ps256(lo), r));
      _mm256_storeu_ps(crow + 16 * NV, r);
    }
  }
}
template <int MR, int NR, int BS = NR, bool Seg = false>
[[ETRT_TARGET_AVX2]] inline void micro_f32_avx2(int64_t kc, const float* __restrict a, int64_t a_ps, int64_t a_is,
                                                const float* __restrict b, const Tile<float>& t) {
  static_assert(NR % 8 == 0 && MR <= kMaxMr && MR * NR <= kMaxMr * 32);
  constexpr int NV = NR / 8;
  __m256 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  const auto steps = [&](const float* __restrict a, const float* __restrict b) ETRT_LAMBDA_AVX2 {
    for (int64_t p = 0; p < kc; ++p) {
      __m256 bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(b + p * BS + 8 * v);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m256 av = _mm256_set1_ps(a[p * a_ps + i * a_is]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
      }
    }
  };
  steps(a, b);
  if constexpr (Seg)
    for (int64_t s = 1; s < t.segments; ++s) steps(a + s * t.a_ss, b + s * kc * BS);
  const __m256 lo = _mm256_set1_ps(t.lo), hi = _mm256_set1_ps(t.hi);
  __m256 bias[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) bias[v] = t.bias ? _mm256_loadu_ps(t.bias + 8 * v) : _mm256_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* crow = t.c + i * t.ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      __m256 r = _mm256_add_ps(acc[i][v], t.accumulate ? _mm256_loadu_ps(crow + 8 * v) : bias[v]);
      if (t.clamp) r = _mm256_min_ps(hi, _mm256_max_ps(lo, r));
      _mm256_storeu_ps(crow + 8 * v, r);
    }
  }
}
#pragma GCC diagnostic pop
#endif
#ifdef ETRT_ISA_ARM64
// Note [neon float tile]: aarch64's float tile is 6 rows x 16 columns, 24 of its 32 128-bit registers as
// accumulators, 4 holding a row of the B panel, one a broadcast of A: the AVX2 tile's shape, so the panels and half
// panels (6 x 8) are laid out alike. One fused multiply-add per accumulator per step (fmla by element), then the
// bias, the clamp (fmax(lo, .) and fmin(hi, .) keep a NaN, as std::max / std::min leave it) and the store, in
// registers. It serves the blocked and the packed GEMM alike.
template <int MR, int NR, int BS = NR, bool Seg = false>
inline void micro_f32_neon(int64_t kc, const float* __restrict a, int64_t a_ps, int64_t a_is,
                           const float* __restrict b, const Tile<float>& t) {
  static_assert(NR % 4 == 0 && MR <= kMaxMr && MR * NR <= kMaxMr * 32);
  constexpr int NV = NR / 4;
  float32x4_t acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = vdupq_n_f32(0.f);
  const auto steps = [&](const float* __restrict a, const float* __restrict b) ETRT_ISA_INLINE {
    for (int64_t p = 0; p < kc; ++p) {
      float32x4_t bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = vld1q_f32(b + p * BS + 4 * v);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const float av = a[p * a_ps + i * a_is];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = vfmaq_n_f32(acc[i][v], bv[v], av);
      }
    }
  };
  steps(a, b);
  if constexpr (Seg)
    for (int64_t s = 1; s < t.segments; ++s) steps(a + s * t.a_ss, b + s * kc * BS);
  const float32x4_t lo = vdupq_n_f32(t.lo), hi = vdupq_n_f32(t.hi);
  float32x4_t bias[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) bias[v] = t.bias ? vld1q_f32(t.bias + 4 * v) : vdupq_n_f32(0.f);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* crow = t.c + i * t.ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float32x4_t r = vaddq_f32(acc[i][v], t.accumulate ? vld1q_f32(crow + 4 * v) : bias[v]);
      if (t.clamp) r = vminq_f32(hi, vmaxq_f32(lo, r));
      vst1q_f32(crow + 4 * v, r);
    }
  }
}
#endif
/// The portable tile. With Seg, a tile of several K runs (Tile::segments) is one call a run, the first adding the
/// bias (or C) and the last clamping: micro_tile, which the blocked GEMM shares, takes one run.
template <class T, int MR, int NR, int BS = NR, bool Seg = false>
inline void micro_base(int64_t kc, const T* a, int64_t ps, int64_t is, const T* b, const Tile<T>& t) {
  if (!Seg || t.segments == 1) return micro_tile<T, MR, NR, false, BS>(kc, a, ps, is, b, t);
  for (int64_t s = 0; s < t.segments; ++s) {
    const bool first = s == 0, last = s + 1 == t.segments;
    const Tile<T> run{t.c, t.ldc, first ? t.bias : nullptr, !first || t.accumulate, last && t.clamp, t.lo, t.hi};
    micro_tile<T, MR, NR, false, BS>(kc, a + s * t.a_ss, ps, is, b + s * kc * BS, run);
  }
}

template <class T>
struct Micro {
  using Fn = void (*)(int64_t, const T*, int64_t, int64_t, const T*, const Tile<T>&);
  Fn full;  // MR x NR
  Fn row;   // 1 x NR
  int mr;
  int nr;
  // The left NR / 2 columns of a panel: the packed GEMM's last panel when it holds no more (a layer of 16 output
  // channels, or 40 = 32 + 8, would otherwise spend half or more of its multiplies on padding).
  Fn half_full;  // MR x NR / 2
  Fn half_row;   // 1 x NR / 2
  // Tiles of 1 .. MR - 1 rows (index = rows), for a block's last rows: run one row at a time, they re-read the whole
  // B panel per row, and a stem convolution's 14-pixel rows (8 + 6) or a 10-token GEMM spent most of their time
  // there. Filled for the packed GEMM's kernels (micro_epilogue_kernels); elsewhere empty.
  std::array<Fn, kMaxMr> tail{}, half_tail{};
  /// Tiles of a quarter and three quarters of NR (Note [narrow tiles]), full, one row and tails; null where a level
  /// has none.
  struct Narrow {
    Fn full = nullptr, row = nullptr;
    std::array<Fn, kMaxMr> tail{};
  };
  Narrow quarter{}, three_quarters{};
  /// Half-width tiles of up to kMaxMr rows (index = rows; Note [tall half tiles]), where a level's half tile leaves
  /// registers for more rows than MR; empty elsewhere.
  std::array<Fn, kMaxMr + 1> tall_half{};

  /// The columns the kernel for a panel with `cols` real ones computes: the narrowest tile that holds them.
  int64_t width(int64_t cols) const {
    if (quarter.full && cols <= nr / 4) return nr / 4;
    if (cols <= nr / 2) return nr / 2;
    if (three_quarters.full && cols <= nr / 4 * 3) return nr / 4 * 3;
    return nr;
  }
  /// The kernel for a block of 1 <= rows <= mr rows of a panel with `cols` real columns (tails filled).
  Fn kernel(int64_t rows, int64_t cols) const {
    const int64_t w = width(cols);
    const auto r = static_cast<size_t>(rows);
    if (w == nr / 4 && quarter.full) return rows == mr ? quarter.full : quarter.tail[r];
    if (w == nr / 4 * 3 && three_quarters.full) return rows == mr ? three_quarters.full : three_quarters.tail[r];
    const bool half = w == nr / 2;
    return rows == mr ? (half ? half_full : full) : (half ? half_tail : tail)[r];
  }
  /// Whether a block of a single panel with `cols` real columns takes the tall half tiles, kMaxMr rows a block
  /// (Note [tall half tiles]).
  bool tall_for(int64_t cols) const { return tall_half[kMaxMr] && width(cols) == nr / 2; }
  /// kernel(rows, cols), or the tall half tile of `rows` rows where `tall` (tall_for held).
  Fn kernel(int64_t rows, int64_t cols, bool tall) const {
    return tall ? tall_half[static_cast<size_t>(rows)] : kernel(rows, cols);
  }
};

/// tails[r] = make.template operator()<r>() for 1 <= r < MR: the row-count-specific tiles of Micro::tail.
template <int MR, class Fn, class Make>
inline std::array<Fn, kMaxMr> tile_tails(Make make) {
  std::array<Fn, kMaxMr> t{};
  [&]<int... R>(std::integer_sequence<int, R...>) {
    ((t[R + 1] = make.template operator()<R + 1>()), ...);
  }(std::make_integer_sequence<int, MR - 1>{});
  return t;
}

/// The tile of a level (isa::level): MR rows x NR columns of accumulators fill most of its vector registers (NR
/// halves for double).
template <class T>
inline Micro<T> micro_kernels(int level) {
  constexpr int kWide = std::is_same_v<T, float> ? 1 : 0;
#ifdef ETRT_ISA_X86
  if (level >= isa::kAvx512) {
    constexpr int nr = 16 << kWide;
    return {&micro_avx512<T, 8, nr>, &micro_avx512<T, 1, nr>, 8, nr, &micro_avx512<T, 8, nr / 2, nr>,
            &micro_avx512<T, 1, nr / 2, nr>};
  }
  if (level == 1) {
    constexpr int nr = 8 << kWide;
    return {&micro_avx2<T, 6, nr>, &micro_avx2<T, 1, nr>, 6, nr, &micro_avx2<T, 6, nr / 2, nr>,
            &micro_avx2<T, 1, nr / 2, nr>};
  }
#endif
#ifdef ETRT_ISA_ARM64
  if constexpr (std::is_same_v<T, float>)
    return {&micro_f32_neon<6, 16>, &micro_f32_neon<1, 16>, 6, 16, &micro_f32_neon<6, 8, 16>,
            &micro_f32_neon<1, 8, 16>};
#endif
  (void)level;
  constexpr int nr = 4 << kWide;
  return {&micro_base<T, 4, nr>, &micro_base<T, 1, nr>, 4, nr, &micro_base<T, 4, nr / 2, nr>,
          &micro_base<T, 1, nr / 2, nr>};
}

/// One level's kernel set for the packed GEMM: `tile.template operator()<R, W, BS>()` is its R x W tile reading
/// panels BS wide.
template <int MR, int NR, class Tile>
inline Micro<float> epilogue_set(Tile tile) {
  using Fn = Micro<float>::Fn;
  return {tile.template operator()<MR, NR, NR>(), tile.template operator()<1, NR, NR>(), MR, NR,
          tile.template operator()<MR, NR / 2, NR>(), tile.template operator()<1, NR / 2, NR>(),
          tile_tails<MR, Fn>([tile]<int R>() { return tile.template operator()<R, NR, NR>(); }),
          tile_tails<MR, Fn>([tile]<int R>() { return tile.template operator()<R, NR / 2, NR>(); })};
}

/// A level's W-column tiles reading panels BS wide (Micro::Narrow).
template <int MR, int W, int BS, class Tile>
inline Micro<float>::Narrow narrow_set(Tile tile) {
  using Fn = Micro<float>::Fn;
  return {tile.template operator()<MR, W, BS>(), tile.template operator()<1, W, BS>(),
          tile_tails<MR, Fn>([tile]<int R>() { return tile.template operator()<R, W, BS>(); })};
}

// Note [tall half tiles]: AVX2's tile is 6 rows of two registers; its half tile (8 columns) has 6 accumulators,
// fewer than a core keeps in flight (two FMA pipes of 4 cycles' latency: 8), and uses 8 of the 16 registers. Tiles
// of 8 rows of 8 columns fill the pipes. A convolution of at most 8 output channels (AVX2's panels, also on an
// AVX-512 CPU: packing_level) takes them on the path of Note [conv rows in place], where a tile's K is short and
// latency-bound: xnn_cnn's 16 x 16 x 3 -> 8 stem, 16 pixels a row as 8 + 8 rather than 6 + 5 + 5.
/// The float tiles with the bias and clamp epilogue, for the packed GEMM (Note [float micro-kernels in
/// intrinsics]); the same shapes as micro_kernels<float>, whose panels they read, plus the tails. With Seg, the same
/// tiles summing a tile's K runs (Tile::segments, Note [conv rows in place]): a separate set, because the loop over
/// runs, even unused, cost the packed GEMM's tiles up to a fifth at K = 16 (mobilenet_v2's first expansion).
template <bool Seg = false>
inline const Micro<float>& micro_tiles(int level) {
#ifdef ETRT_ISA_X86
  if (level >= isa::kAvx512) {
    static const Micro<float> k = [] {
      const auto tile = []<int R, int W, int BS>() { return &micro_f32_avx512<R, W, BS, Seg>; };
      Micro<float> m = epilogue_set<8, 32>(tile);
      m.quarter = narrow_set<8, 8, 32>(tile);
      m.three_quarters = narrow_set<8, 24, 32>(tile);
      return m;
    }();
    return k;
  }
  if (level == 1) {
    static const Micro<float> k = [] {
      const auto tile = []<int R, int W, int BS>() { return &micro_f32_avx2<R, W, BS, Seg>; };
      Micro<float> m = epilogue_set<6, 16>(tile);
      [&]<int... R>(std::integer_sequence<int, R...>) {
        ((m.tall_half[R + 1] = tile.template operator()<R + 1, 8, 16>()), ...);
      }(std::make_integer_sequence<int, kMaxMr>{});
      return m;
    }();
    return k;
  }
#endif
#ifdef ETRT_ISA_ARM64
  (void)level;
  static const Micro<float> neon =
      epilogue_set<6, 16>([]<int R, int W, int BS>() { return &micro_f32_neon<R, W, BS, Seg>; });
  return neon;
#else
  (void)level;
  static const Micro<float> base =
      epilogue_set<4, 8>([]<int R, int W, int BS>() { return &micro_base<float, R, W, BS, Seg>; });
  return base;
#endif
}
inline const Micro<float>& micro_epilogue_kernels(int level) { return micro_tiles<false>(level); }

/// Packs rows [0, mc) x cols [0, kc) of A into MR-row panels: panel r holds a[p * MR + i] = A(r*MR + i, p).
template <class T>
inline void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int mr, T* dst) {
  for (int64_t r0 = 0; r0 < mc; r0 += mr) {
    const int64_t rows = std::min<int64_t>(mr, mc - r0);
    if (cs == 1 && rows == mr) {
      for (int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < mr; ++i) dst[p * mr + i] = a[(r0 + i) * rs + p];
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        int64_t i = 0;
        for (; i < rows; ++i) dst[p * mr + i] = a[(r0 + i) * rs + p * cs];
        for (; i < mr; ++i) dst[p * mr + i] = T(0);
      }
    }
    dst += kc * mr;
  }
}

/// Packs rows [0, kc) x cols [0, nc) of B into NR-column panels: panel c holds b[p * NR + j] = B(p, c*NR + j).
template <class T>
inline void pack_b(const T* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, int nr, T* dst) {
  for (int64_t c0 = 0; c0 < nc; c0 += nr) {
    const int64_t cols = std::min<int64_t>(nr, nc - c0);
    if (cs == 1 && cols == nr) {
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = b + p * rs + c0;
        T* d = dst + p * nr;
        for (int j = 0; j < nr; ++j) d[j] = src[j];
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        int64_t j = 0;
        for (; j < cols; ++j) dst[p * nr + j] = b[p * rs + (c0 + j) * cs];
        for (; j < nr; ++j) dst[p * nr + j] = T(0);
      }
    }
    dst += kc * nr;
  }
}

template <class T>
inline void scale_c(int64_t m, int64_t n, T beta, T* c, int64_t rsc, int64_t csc) {
  if (beta == T(1)) return;
  for (int64_t i = 0; i < m; ++i) {
    T* row = c + i * rsc;
    if (beta == T(0)) {
      for (int64_t j = 0; j < n; ++j) row[j * csc] = T(0);
    } else {
      for (int64_t j = 0; j < n; ++j) row[j * csc] *= beta;
    }
  }
}

/// Scratch buffers reused across calls on one thread (no allocation per call after the first).
template <class T>
struct Scratch {
  AlignedArray<T> a, b;
  size_t a_cap = 0, b_cap = 0;
  // Throws std::bad_alloc as new[] did: the parallel region or the method's boundary turns it into an error value.
  T* get_a(size_t n) { return grow(a, a_cap, n); }
  T* get_b(size_t n) { return grow(b, b_cap, n); }
  static T* grow(AlignedArray<T>& p, size_t& cap, size_t n) {
    if (n > cap) {
      p = make_aligned_array<T>(n);
      cap = p ? n : 0;
      if (!p) throw std::bad_alloc();
    }
    return p.get();
  }
};

template <class T>
inline void blocked(int64_t m, int64_t n, int64_t k, T alpha, MatRef<T> A, MatRef<T> B, T* c, int64_t rsc,
                    int64_t csc) {
  const Micro<T> mk = micro_kernels<T>(isa::level());
  // Note [gemm k block]: each K block is a pass that reads and writes every C tile, and from 1024^3 on C (4 MB,
  // rows 4 KB apart) comes from memory: with KC = 256 those passes cost a tenth of the product on a Zen 4 core
  // (78% of its FMA peak at 1024^3; 86-87% with the tiles' C redirected into cache). KC = 1024 makes most
  // products one pass. Its B panel (1024 x 32 floats, 128 KB) then lives in L2 rather than L1, which the
  // micro-kernel does not notice (two B loads feed sixteen FMAs; measured at 98-99% of peak with kc 512 and 1024),
  // and the 144-row A block (576 KB) shares the 1 MB L2 with it. One thread, best of 20 runs: 1024^3 and 2048^3
  // went from 77-80% to 84-88%, 256^3 and 512^3 stayed (the earlier 256 came from a 48 KB-L1d Xeon, where 384
  // had measured ~10% slower at 1024^3; not re-measured there).
  constexpr int64_t KC = 1024;
  const int64_t MC = std::max<int64_t>(mk.mr, (std::is_same_v<T, float> ? 144 : 96) / mk.mr * mk.mr);
  // 1024 columns keep the packed B block (KC x NC) at 4 MB, the scratch it had at KC = 256 with 4096; from 512 to
  // 4096 measured alike at 1024 x 4096 x 1024.
  const int64_t NC = 1024 / mk.nr * mk.nr;
  thread_local Scratch<T> scratch;
  const int64_t nc_max = std::min(NC, (n + mk.nr - 1) / mk.nr * mk.nr);
  const int64_t mc_max = std::min(MC, (m + mk.mr - 1) / mk.mr * mk.mr);
  const int64_t kc_max = std::min(KC, k);
  T* bpack = scratch.get_b(static_cast<size_t>(kc_max * nc_max));
  T* apack = scratch.get_a(static_cast<size_t>(kc_max * mc_max));
  alignas(64) T tile[kMaxMr * 32];
  const Tile<T> to_tile{tile, mk.nr, nullptr, false, false, T(0), T(0)};
  // C was scaled by beta already: a whole tile adds A * B into C from registers; edges and alpha != 1 go through
  // the tile buffer.
  const bool in_place = alpha == T(1) && csc == 1;
  const bool direct_a = A.cs == 1;
  for (int64_t jc = 0; jc < n; jc += NC) {
    const int64_t nc = std::min(NC, n - jc);
    for (int64_t pc = 0; pc < k; pc += KC) {
      const int64_t kc = std::min(KC, k - pc);
      pack_b(B.data + pc * B.rs + jc * B.cs, B.rs, B.cs, kc, nc, mk.nr, bpack);
      for (int64_t ic = 0; ic < m; ic += MC) {
        const int64_t mc = std::min(MC, m - ic);
        // Note [gemm direct a]: the micro-kernel reads whole MR-row groups of a row-major A in place (a_is = the row
        // stride) rather than from packed panels: packing all of A cost about 2% at 1024^3 and 5% at 256^3, where
        // its MR broadcasts a step, from MR rows, stream through L1 as well as from one panel. Only the last,
        // partial group is packed (zero rows below A's end).
        const int64_t whole = direct_a ? mc / mk.mr * mk.mr : 0;
        pack_a(A.data + (ic + whole) * A.rs + pc * A.cs, A.rs, A.cs, mc - whole, kc, mk.mr, apack + whole * kc);
        for (int64_t jr = 0; jr < nc; jr += mk.nr) {
          const int64_t cols = std::min<int64_t>(mk.nr, nc - jr);
          const T* bp = bpack + (jr / mk.nr) * kc * mk.nr;
          for (int64_t ir = 0; ir < mc; ir += mk.mr) {
            const int64_t rows = std::min<int64_t>(mk.mr, mc - ir);
            const bool in_a = ir < whole;
            const T* ap = in_a ? A.data + (ic + ir) * A.rs + pc : apack + (ir / mk.mr) * kc * mk.mr;
            const int64_t a_ps = in_a ? 1 : mk.mr, a_is = in_a ? A.rs : 1;
            T* cblk = c + (ic + ir) * rsc + (jc + jr) * csc;
            if (in_place && rows == mk.mr && cols == mk.nr) {
              mk.full(kc, ap, a_ps, a_is, bp, Tile<T>{cblk, rsc, nullptr, true, false, T(0), T(0)});
              continue;
            }
            mk.full(kc, ap, a_ps, a_is, bp, to_tile);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < cols; ++j) cblk[i * rsc + j * csc] += alpha * tile[i * mk.nr + j];
          }
        }
      }
    }
  }
}

}  // namespace detail

/// The generic fallback: accumulates in Acc (e.g. float for Half, int64 for integers), i-p-j order so the inner
/// loop runs along a row of B and C.
template <class T, class Acc>
inline void gemm_generic(int64_t m, int64_t n, int64_t k, Acc alpha, MatRef<T> A, MatRef<T> B, Acc beta, T* c,
                         int64_t rsc, int64_t csc) {
  std::vector<Acc> row(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), Acc(0));
    for (int64_t p = 0; p < k; ++p) {
      const Acc av = static_cast<Acc>(A.data[i * A.rs + p * A.cs]);
      const T* brow = B.data + p * B.rs;
      for (int64_t j = 0; j < n; ++j) row[j] += av * static_cast<Acc>(brow[j * B.cs]);
    }
    T* crow = c + i * rsc;
    for (int64_t j = 0; j < n; ++j) {
      Acc v = alpha * row[j];
      if (beta != Acc(0)) v += beta * static_cast<Acc>(crow[j * csc]);
      crow[j * csc] = static_cast<T>(v);
    }
  }
}

namespace detail {

/// C += alpha * A * B for a float A of at most kGemvRows rows with contiguous rows: an LLM's decode step, where
/// packing B (a weight read once per call) would cost more than the product. B with contiguous columns (torch's
/// [N, K] linear weight) takes one dot product per output; B with contiguous rows (x @ W) adds scaled rows of B.
/// False when the operands' layouts fit neither.
inline constexpr int64_t kGemvRows = 4;
inline bool gemv_few_rows(int64_t m, int64_t n, int64_t k, float alpha, MatRef<float> A, MatRef<float> B, float* c,
                          int64_t rsc, int64_t csc) {
  if (m > kGemvRows || A.cs != 1 || (B.rs != 1 && (B.cs != 1 || csc != 1))) return false;
  auto run = [&](int64_t j0, int64_t j1) {
    isa::dispatch([&]() ETRT_ISA_INLINE {
      if (B.rs == 1) {
        for (int64_t j = j0; j < j1; ++j)
          for (int64_t i = 0; i < m; ++i)
            c[i * rsc + j * csc] += alpha * dot_lanes(A.data + i * A.rs, B.data + j * B.cs, k);
        return;
      }
      for (int64_t i = 0; i < m; ++i) {
        float* ci = c + i * rsc;
        for (int64_t p = 0; p < k; ++p) {
          const float a = alpha * A.data[i * A.rs + p];
          const float* bp = B.data + p * B.rs;
          for (int64_t j = j0; j < j1; ++j) ci[j] += a * bp[j];
        }
      }
    });
  };
  if (m * n * k >= min_parallel_work() && n >= 128) parallel_for(n, 64, run);
  else run(0, n);
  return true;
}

}  // namespace detail

/// The multiply-adds from which gemm splits one product across threads.
inline constexpr int64_t kParallelWork = int64_t{1} << 22;

/// C(m x n) = alpha * A(m x k) * B(k x n) + beta * C, any strides (a transpose is swapped strides). C must not
/// alias A or B. Single- and double-precision use the blocked kernel; other types the generic loop below.
template <class T>
inline void gemm(int64_t m, int64_t n, int64_t k, T alpha, MatRef<T> A, MatRef<T> B, T beta, T* c, int64_t rsc,
                 int64_t csc) {
  if (m <= 0 || n <= 0) return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    detail::scale_c(m, n, beta, c, rsc, csc);
    if (k <= 0 || alpha == T(0)) return;
    // Tiny products are not worth packing.
    if (m * n * k <= 4096) {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          T s = T(0);
          for (int64_t p = 0; p < k; ++p) s += A.data[i * A.rs + p * A.cs] * B.data[p * B.rs + j * B.cs];
          c[i * rsc + j * csc] += alpha * s;
        }
      return;
    }
    if constexpr (std::is_same_v<T, float>)
      if (detail::gemv_few_rows(m, n, k, alpha, A, B, c, rsc, csc)) return;
    // Large products split the columns of C across threads; each thread packs into its own scratch.
    if (m * n * k >= kParallelWork && n >= 64) {
      parallel_for(n, 32, [&](int64_t j0, int64_t j1) {
        detail::blocked(m, j1 - j0, k, alpha, A, MatRef<T>{B.data + j0 * B.cs, B.rs, B.cs}, c + j0 * csc, rsc, csc);
      });
      return;
    }
    detail::blocked(m, n, k, alpha, A, B, c, rsc, csc);
  } else {
    gemm_generic<T, T>(m, n, k, alpha, A, B, beta, c, rsc, csc);
  }
}

/// BLAS-style convenience: row-major A (m x k, or k x m when trans_a) with leading dimension lda, likewise B.
template <class T>
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                 const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const MatRef<T> A = trans_a ? MatRef<T>{a, 1, lda} : MatRef<T>{a, lda, 1};
  const MatRef<T> B = trans_b ? MatRef<T>{b, 1, ldb} : MatRef<T>{b, ldb, 1};
  gemm<T>(m, n, k, alpha, A, B, beta, c, ldc, 1);
}

}  // namespace etrt::kernels::gemm
