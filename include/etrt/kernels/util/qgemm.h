// An int8 GEMM for statically quantized layers: C (float) = requantize(A (uint8) x B (int8, packed once)).
//
// Note [int8 gemm]: a layer whose input is quantized per tensor (scale sx, zero point zx) and whose weight is int8
// with one scale per output column (sw[j], zero point 0) computes, in exact integers,
//   acc(i, j) = sum_p A(i, p) x B(p, j),   with A(i, p) = q(i, p) + offset   (0..255)
// where `offset` makes a signed activation unsigned (128 for int8, 0 for uint8), because the one byte dot product
// x86 has (AVX-512 VNNI vpdpbusd) multiplies unsigned by signed bytes, four pairs into each int32 lane. The real
// product is sx x sw[j] x sum_p (q - zx) x B, so the caller passes per column
//   zero_sum[j] = (zx + offset) x sum_p B(p, j)   and   scale[j] = sx x sw[j],
// and C(i, j) = clamp(float(acc - zero_sum[j]) x scale[j] + bias[j], lo, hi): exact up to that one float multiply
// and add, where the float GEMM rounded at every step. The rows of A come from a packer (a quantized copy of a
// linear layer's input rows, a convolution's input windows), MC rows at a time into a per-thread buffer; no
// column of A is ever widened to float. B is stored per panel of kNr columns as ceil(k / 4) groups of kNr x 4
// bytes, zero beyond k and beyond n, so the bytes a packer leaves past k in a row meet zero weights. A micro-kernel
// call computes 8 rows by the panel's 32 columns (16 when no more are left): per group of four k, two 64-byte
// loads of B and eight 4-byte broadcasts of A feed sixteen dot-product instructions.
// The finished block goes through the float epilogue's finish step (gemm::Epilogue) like the float GEMM's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "etrt/core/aligned_buffer.h"
#include "etrt/core/result.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/packed_gemm.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/qgemm_amx.h"
#include "etrt/kernels/util/vec.h"

#ifdef ETRT_ISA_X86
#include <immintrin.h>
#endif

namespace etrt::kernels::qgemm {

inline constexpr int kNr = 32;        // columns per panel: two vectors of 16 int32 accumulators
inline constexpr int kMr = 8;         // rows per micro-kernel call
inline constexpr int64_t kMc = 96;    // rows of A packed at a time (a multiple of kMr)

/// B (k x n int8) packed for the dot-product kernels (Note [int8 gemm]), with its column sums.
struct PackedQB {
  AlignedArray<int8_t> data;
  std::vector<int32_t> col_sums;  // sum over p of B(p, j), n entries
  int64_t k = 0, k4 = 0, n = 0;
  int64_t k4_stored = 0;  // groups of four k stored per panel: k4 up to whole tile blocks (Note [amx tiles]), zeros

  int64_t panels() const { return (n + kNr - 1) / kNr; }
  /// Bytes of a row of A as the VNNI kernels read it: k rounded up to whole groups of four.
  int64_t row_bytes() const { return k4 * 4; }
  /// Bytes of a row of A as the tile kernel reads it: k rounded up to whole blocks of 64.
  int64_t tile_row_bytes() const { return k4_stored * 4; }
  const int8_t* panel(int64_t p) const { return data.get() + p * k4_stored * kNr * 4; }
};

inline int64_t stored_groups(int64_t k) { return (k + kAmxK - 1) / kAmxK * (kAmxK / 4); }

/// Bytes pack_qb allocates for a k x n matrix: for memory budgets, before packing.
inline uint64_t packed_qb_bytes(int64_t k, int64_t n) {
  const uint64_t panels = static_cast<uint64_t>((n + kNr - 1) / kNr), k4 = static_cast<uint64_t>(stored_groups(k));
  return panels * k4 * kNr * 4 + static_cast<uint64_t>(n) * sizeof(int32_t);
}

/// Packs B(p, j) = b[p * rs + j * cs] for p < k, j < n.
inline Result<PackedQB> pack_qb(const int8_t* b, int64_t rs, int64_t cs, int64_t k, int64_t n) {
  PackedQB out;
  out.k = k;
  out.n = n;
  out.k4 = (k + 3) / 4;
  out.k4_stored = stored_groups(k);
  const uint64_t bytes = static_cast<uint64_t>(out.panels()) * static_cast<uint64_t>(out.k4_stored) * kNr * 4;
  out.data = make_aligned_array<int8_t>(static_cast<size_t>(bytes));
  if (!out.data) return fail(Error::MemoryAllocationFailed, "cannot allocate ", bytes, " bytes of packed int8 weights");
  std::memset(out.data.get(), 0, bytes);
  out.col_sums.assign(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j) {
    int8_t* panel = out.data.get() + (j / kNr) * out.k4_stored * kNr * 4;
    const int64_t lane = j % kNr;
    int32_t sum = 0;
    for (int64_t p = 0; p < k; ++p) {
      const int8_t v = b[p * rs + j * cs];
      panel[(p / 4) * kNr * 4 + lane * 4 + p % 4] = v;
      sum += v;
    }
    out.col_sums[static_cast<size_t>(j)] = sum;
  }
  return out;
}

/// A quantization grid: v -> vec::grid_point(v, inv, qlo, qhi, scale).
struct GridStep {
  float inv = 1.f, qlo = 0.f, qhi = 0.f, scale = 1.f;
};

/// Note [int8 gemm output grid]: what a quantized output needs after the epilogue, done on the registers before
/// the one store instead of in a pass over each finished block: rounding onto the output's grid (`round`), then,
/// for a Clamp or Convert node that alone reads the output (`next`), its clamp to [lo, hi] and its rounding onto
/// its own grid, the result stored at the same position of that node's output (`next_out`, where C is at `out`):
/// the GEMM's own output, read by nothing else, is then never written. The same operations, in the same order, as
/// the XNNPACK delegate's block finish (its fake_quantize / fake_requantize).
struct OutputGrid {
  bool round = false;
  GridStep grid;
  bool next = false;
  float lo = 0.f, hi = 0.f;
  GridStep next_grid;
  const float* out = nullptr;
  float* next_out = nullptr;
  // Note [byte activations]: where set, the value is stored as the byte its last grid's step count plus byte_zero
  // makes, at bytes + (c - out), instead of as a float; `round` or `next` is then set.
  uint8_t* bytes = nullptr;
  float byte_zero = 0.f;

  bool any() const { return round || next; }
  /// Where the value of C's element at c is stored.
  float* target(float* c) const { return next ? next_out + (c - out) : c; }
  template <class T>
  [[gnu::always_inline]] T apply(T v) const {
    if (round) v = vec::grid_point(v, grid.inv, grid.qlo, grid.qhi, grid.scale);
    if (next) v = vec::grid_point(vec::clamped(v, lo, hi), next_grid.inv, next_grid.qlo, next_grid.qhi, next_grid.scale);
    return v;
  }
  /// apply's result as its last grid's byte: the step count (an integer within the grid's range) plus byte_zero.
  template <class T>
  [[gnu::always_inline]] T byte_of(T v) const {
    if (next) {
      if (round) v = vec::grid_point(v, grid.inv, grid.qlo, grid.qhi, grid.scale);
      return vec::round_small(vec::clamped(vec::clamped(v, lo, hi) * next_grid.inv, next_grid.qlo, next_grid.qhi)) +
             byte_zero;
    }
    return vec::round_small(vec::clamped(v * grid.inv, grid.qlo, grid.qhi)) + byte_zero;
  }
  /// Stores C's element at c, v being its value after the epilogue's clamp.
  void store(float* c, float v) const {
    if (bytes) {
      const float b = byte_of(v);
      bytes[c - out] = b == b ? static_cast<uint8_t>(b) : uint8_t{255};  // NaN: no byte stands for it; as the vector store
      return;
    }
    *target(c) = apply(v);
  }
};

/// The per-column requantization of the accumulators (Note [int8 gemm]); each array holds n entries. `out`: the
/// output's grid (Note [int8 gemm output grid]); none by default.
struct Requant {
  const int32_t* zero_sum = nullptr;
  const float* scale = nullptr;
  OutputGrid out{};
};

namespace detail {

/// One micro-kernel call: rows [0, MR) of A (row stride lda bytes) times one panel (cols <= kNr valid columns),
/// written to C at c (row stride ldc) through the requantization and the epilogue's bias and clamp.
struct Call {
  int64_t k4;
  const uint8_t* a;
  int64_t lda;
  const int8_t* b;
  const int32_t* zero_sum;
  const float* scale;
  const float* bias;
  float lo, hi;
  float* c;
  int64_t ldc;
  int cols;
  const OutputGrid* grid;  // null: none
  bool pack_bytes = false;  // Note [int8 gemm packed bytes]: the rows' bytes narrowed by saturating packs
};
using MicroFn = void (*)(const Call&);

inline int32_t load_group(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// The definition, one accumulator at a time: any CPU, and the reference the tests hold the vector kernel to.
template <int MR>
inline void micro_base(const Call& k) {
  for (int r = 0; r < MR; ++r) {
    const uint8_t* a = k.a + r * k.lda;
    for (int j = 0; j < k.cols; ++j) {
      int32_t acc = 0;
      for (int64_t q = 0; q < k.k4; ++q)
        for (int t = 0; t < 4; ++t)
          acc += int32_t{a[q * 4 + t]} * int32_t{k.b[q * kNr * 4 + j * 4 + t]};
      float v = static_cast<float>(acc - k.zero_sum[j]) * k.scale[j] + (k.bias ? k.bias[j] : 0.f);
      v = std::min(std::max(v, k.lo), k.hi);
      float* at = k.c + r * k.ldc + j;
      if (k.grid) k.grid->store(at, v);
      else *at = v;
    }
  }
}

#ifdef ETRT_ISA_X86
// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" vector, which its -Wuninitialized reports
// at every inlined use (GCC bug 105593); nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// The epilogue of a panel's columns [16 v, 16 v + 16): the requantization, bias and clamp of Note [int8 gemm],
/// the output grid of Note [int8 gemm output grid], the store. Shared by the VNNI kernels (sums in registers) and
/// the tile kernel (sums in memory, store_sums).
struct ColumnEpilogue {
  __mmask16 m;
  __m512i zero_sum;
  __m512 scale, bias, lo, hi;
  int v;
  // The output grid's constants in registers (OutputGrid::apply): read through k.grid per row, they were reloaded
  // and broadcast for every row, since the stores to C might have changed them.
  bool round, next;
  __m512 g_inv, g_qlo, g_qhi, g_scale, n_lo, n_hi, n_inv, n_qlo, n_qhi, n_scale;
  uint8_t* bytes;  // Note [byte activations]: null for a float output
  const float* out;
  // A byte output without a second grid: the clamp to [lo, hi] folded into the grid's step range (a positive
  // multiply keeps order, so clamping before or after it gives the same steps), each bound itself within the range:
  // a clamp wholly outside the grid gives the grid's nearer end, as the scalar definition does.
  __m512 b_qlo, b_qhi;
  // The byte zero as an integer, added to the converted steps (cvtps2dq rounds half to even, as round_small does);
  // and whether the grid's multiplier is 1 (Note [xnnpack requantization]: the sums arrive in steps), skipped then.
  __m512i b_zero;
  bool unit_inv;
};
/// The epilogue's clamp [lo, hi] in the grid's steps, each bound within the grid's range; a NaN bound clamps nothing,
/// as std::max / std::min in the scalar definition (lo then gives the range's low end, hi its high end).
inline std::pair<float, float> clamp_steps(const Call& k, const OutputGrid& g) {
  return {std::min(g.grid.qhi, std::max(g.grid.qlo, k.lo * g.grid.inv)),
          std::max(g.grid.qlo, std::min(g.grid.qhi, k.hi * g.grid.inv))};
}
/// The lanes of a panel's columns [16 v, 16 v + 16) that hold one of its `cols` valid columns.
inline __mmask16 column_mask(int cols, int v) {
  const int n = std::clamp(cols - 16 * v, 0, 16);
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}
[[ETRT_TARGET_AVX512VNNI]] [[gnu::always_inline]] inline ColumnEpilogue column_epilogue(const Call& k, int v) {
  const __mmask16 m = column_mask(k.cols, v);
  const OutputGrid g = k.grid ? *k.grid : OutputGrid{};
  return {m,
          _mm512_maskz_loadu_epi32(m, k.zero_sum + 16 * v),
          _mm512_maskz_loadu_ps(m, k.scale + 16 * v),
          k.bias ? _mm512_maskz_loadu_ps(m, k.bias + 16 * v) : _mm512_setzero_ps(),
          _mm512_set1_ps(k.lo),
          _mm512_set1_ps(k.hi),
          v,
          g.round,
          g.next,
          _mm512_set1_ps(g.grid.inv),
          _mm512_set1_ps(g.grid.qlo),
          _mm512_set1_ps(g.grid.qhi),
          _mm512_set1_ps(g.grid.scale),
          _mm512_set1_ps(g.lo),
          _mm512_set1_ps(g.hi),
          _mm512_set1_ps(g.next_grid.inv),
          _mm512_set1_ps(g.next_grid.qlo),
          _mm512_set1_ps(g.next_grid.qhi),
          _mm512_set1_ps(g.next_grid.scale),
          g.bytes,
          g.out,
          _mm512_set1_ps(clamp_steps(k, g).first),
          _mm512_set1_ps(clamp_steps(k, g).second),
          _mm512_set1_epi32(static_cast<int32_t>(g.byte_zero)),
          g.grid.inv == 1.f};
}
/// vec::grid_point in intrinsics: round(clamp(v x inv, qlo, qhi)) x scale, the clamp as vec::clamped (max, then min,
/// the value second, so NaN stays NaN) and the rounding as vec::round_small (add and subtract 1.5 x 2^23).
[[ETRT_TARGET_AVX512VNNI]] [[gnu::always_inline]] inline __m512 grid_point(__m512 v, __m512 inv, __m512 qlo,
                                                                          __m512 qhi, __m512 scale) {
  const __m512 shift = _mm512_set1_ps(12582912.0f);
  v = _mm512_min_ps(qhi, _mm512_max_ps(qlo, _mm512_mul_ps(v, inv)));
  return _mm512_mul_ps(_mm512_sub_ps(_mm512_add_ps(v, shift), shift), scale);
}
/// Row r's sums of those columns, less their zero_sum (acc - zero_sum[j] of Note [int8 gemm]), into C.
[[ETRT_TARGET_AVX512VNNI]] [[gnu::always_inline]] inline void store_columns(const Call& k, const ColumnEpilogue& e,
                                                                           int r, __m512i offset_sums) {
  // A multiply and an add, not one fused step: the scalar definition's result, bit for bit, on every CPU. GCC
  // contracts an intrinsic multiply and add into one (-ffp-contract=fast is its default, -std=c++20 included): in
  // the -O3 build a quarter of the floats of a layer with a bias were one unit off; the empty asm keeps the rounded
  // product.
  __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(offset_sums), e.scale);
  asm("" : "+v"(x));
  float* at = k.c + r * k.ldc + 16 * e.v;
  if (e.bytes) {  // Note [byte activations]: the last grid's step count plus the byte zero, as bytes
    if (k.bias) x = _mm512_add_ps(x, e.bias);  // none where it is in the sums (Note [xnnpack requantization])
    if (e.next) {
      x = _mm512_min_ps(e.hi, _mm512_max_ps(e.lo, x));
      if (e.round) x = grid_point(x, e.g_inv, e.g_qlo, e.g_qhi, e.g_scale);
      x = _mm512_min_ps(e.n_qhi, _mm512_max_ps(e.n_qlo, _mm512_mul_ps(_mm512_min_ps(e.n_hi, _mm512_max_ps(e.n_lo, x)), e.n_inv)));
    } else {
      x = _mm512_min_ps(e.b_qhi, _mm512_max_ps(e.b_qlo, e.unit_inv ? x : _mm512_mul_ps(x, e.g_inv)));
    }
    // Steps within the grid's range, rounded half to even by the conversion, plus the byte zero: within [0, 255].
    // A NaN (which no int8 sum makes) converts to 0x80000000, which stays negative past the add and the unsigned
    // saturation makes 255, as the scalar definition stores. Narrowed in a register, then stored under the mask
    // (the same bytes as vpmovusdb's masked memory form; no speed difference measured between the two on Zen 4).
    const __m512i steps = _mm512_add_epi32(_mm512_cvtps_epi32(x), e.b_zero);
    _mm_mask_storeu_epi8(e.bytes + (at - e.out), e.m, _mm512_cvtusepi32_epi8(steps));
    return;
  }
  x = _mm512_add_ps(x, e.bias);
  x = _mm512_min_ps(e.hi, _mm512_max_ps(e.lo, x));  // a NaN x stays NaN, as std::min / std::max
  if (e.round) x = grid_point(x, e.g_inv, e.g_qlo, e.g_qhi, e.g_scale);
  if (e.next) x = grid_point(_mm512_min_ps(e.n_hi, _mm512_max_ps(e.n_lo, x)), e.n_inv, e.n_qlo, e.n_qhi, e.n_scale);
  _mm512_mask_storeu_ps(k.grid ? k.grid->target(at) : at, e.m, x);
}

/// acc += the byte dot products of a (unsigned) and b (signed), four pairs a lane: vpdpbusd. GCC 12 copies the
/// accumulator through another register around the intrinsic (two moves a product, a third of the loop's
/// instructions); the asm names the accumulator as the instruction's own operand.
[[ETRT_TARGET_AVX512VNNI]] [[gnu::always_inline]] inline __m512i dot_accumulate(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/// Note [int8 gemm packed bytes]: a byte output without a second grid (the common case: a layer whose output is
/// read as bytes) stores a row's 32 columns through saturating packs: both vectors converted to int32 steps, packed
/// to int16 (vpackssdw), the byte zero added (saturating), packed to bytes (vpackuswb), the lanes put in order
/// (vpermd), then clamped as bytes: about two thirds of store_columns' operations, which bound the small-k layers
/// (mobilenet's 16- to 24-channel 1x1 expansions). The bytes are store_columns' (and the scalar definition's):
/// rounding is monotone, so round(clamp(y, L, H)) = clamp(round(y), round(L), round(H)) with L and H the clamp
/// bounds in steps, themselves clamped to the grid's range, whose steps plus the zero are bytes. The conversion must
/// not overflow, so this path is taken only where every int32 sum the layer can make (|a| <= 255, |b| <= 128)
/// gives a step below 2^30 in magnitude (packed_bytes_fit), which also excludes non-finite scales and biases.
struct PackedByteStore {
  __m512i zero16;     // the byte zero in every int16 lane
  __m512i order;      // dword order after the packs: row columns 0..31 in the low 256 bits
  __m512i lo, hi;     // the clamp, as bytes
  bool clamp;         // [lo, hi] is narrower than [0, 255]
  __mmask32 mask;     // the panel's valid columns
};
[[ETRT_TARGET_AVX512VNNI]] [[gnu::always_inline]] inline PackedByteStore packed_byte_store(const Call& k) {
  const OutputGrid& g = *k.grid;
  const auto [lo_steps, hi_steps] = clamp_steps(k, g);
  // Within [0, 255]: the grid's range plus the zero is (packed_bytes_fit); rounded half to even, as cvtps2dq.
  const int lo = static_cast<int>(std::nearbyint(lo_steps) + g.byte_zero);
  const int hi = static_cast<int>(std::nearbyint(hi_steps) + g.byte_zero);
  return {_mm512_set1_epi16(static_cast<int16_t>(g.byte_zero)),
          _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
          _mm512_set1_epi8(static_cast<char>(lo)),
          _mm512_set1_epi8(static_cast<char>(hi)),
          lo > 0 || hi < 255,
          k.cols >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1ull << k.cols) - 1)};
}
/// One row's two column vectors of sums (less zero_sum) as int16 steps plus the byte zero (Note [int8 gemm packed
/// bytes]): the same float operations as store_columns, in its order, so the bytes do not depend on the path.
[[ETRT_TARGET_AVX512VNNI]] [[gnu::always_inline]] inline __m512i packed_steps(const Call& k,
                                                                             const ColumnEpilogue (&e)[2],
                                                                             const PackedByteStore& s,
                                                                             __m512i sums0, __m512i sums1) {
  __m512 x0 = _mm512_mul_ps(_mm512_cvtepi32_ps(sums0), e[0].scale);
  __m512 x1 = _mm512_mul_ps(_mm512_cvtepi32_ps(sums1), e[1].scale);
  asm("" : "+v"(x0), "+v"(x1));  // rounded products, as store_columns
  if (k.bias) {
    x0 = _mm512_add_ps(x0, e[0].bias);
    x1 = _mm512_add_ps(x1, e[1].bias);
  }
  if (!e[0].unit_inv) {
    x0 = _mm512_mul_ps(x0, e[0].g_inv);
    x1 = _mm512_mul_ps(x1, e[1].g_inv);
  }
  return _mm512_adds_epi16(_mm512_packs_epi32(_mm512_cvtps_epi32(x0), _mm512_cvtps_epi32(x1)), s.zero16);
}
/// Rows r and r + 1 (or r alone: `two` false) as bytes. Each 128-bit lane l of the packs holds columns 4l..4l+3 of
/// the first vector, then of the second, for row r and then row r + 1; `order` gathers those dwords into column
/// order, row r in the low 256 bits.
[[ETRT_TARGET_AVX512VNNI]] [[gnu::always_inline]] inline void store_packed_rows(const Call& k, const PackedByteStore& s,
                                                                               uint8_t* row, __m512i w0, __m512i w1,
                                                                               bool two) {
  __m512i bytes = _mm512_permutexvar_epi32(s.order, _mm512_packus_epi16(w0, w1));
  if (s.clamp) bytes = _mm512_min_epu8(_mm512_max_epu8(bytes, s.lo), s.hi);
  _mm256_mask_storeu_epi8(row, s.mask, _mm512_castsi512_si256(bytes));
  if (two) _mm256_mask_storeu_epi8(row + k.ldc, s.mask, _mm512_extracti64x4_epi64(bytes, 1));
}

/// MR rows by NV vectors of 16 columns (NV = 2: the whole panel; 1: its first 16 columns, the others being zero).
template <int MR, int NV>
[[ETRT_TARGET_AVX512VNNI]] inline void micro_vnni(const Call& call) {
  // A local copy: the byte stores of the epilogue may alias any memory, so fields read through the caller's
  // reference were reloaded after every store.
  const Call k = call;
  // Every loop over rows and vectors unrolled: a loop left rolled indexes acc at run time, so GCC keeps it on the
  // stack, and each dot product became a load, the product and a store (three times slower where no AMX tile
  // kernel hides it: on AMD Zen 4, resnet18_q8 ran at the float model's speed).
  // The sums start at -zero_sum (the same int32 result, modulo 2^32, as subtracting it after): one subtraction a
  // vector less in the epilogue, which small-k layers (mobilenet's 16- to 32-channel inputs) are mostly made of.
  __m512i start[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v)
    start[v] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                _mm512_maskz_loadu_epi32(column_mask(k.cols, v), k.zero_sum + 16 * v));
  __m512i acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = start[v];
  const uint8_t* a = k.a;
  const int8_t* b = k.b;
  for (int64_t q = 0; q < k.k4; ++q, a += 4, b += kNr * 4) {
    __m512i bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_si512(b + 64 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512i av = _mm512_set1_epi32(load_group(a + r * k.lda));
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = dot_accumulate(acc[r][v], av, bv[v]);
    }
  }
  if constexpr (NV == 2) {
    if (k.pack_bytes) {  // Note [int8 gemm packed bytes]
      const ColumnEpilogue e[2] = {column_epilogue(k, 0), column_epilogue(k, 1)};
      const PackedByteStore s = packed_byte_store(k);
      uint8_t* row = e[0].bytes + (k.c - e[0].out);
#pragma GCC unroll 4
      for (int r = 0; r < MR; r += 2) {
        const __m512i w0 = packed_steps(k, e, s, acc[r][0], acc[r][1]);
        if (r + 1 < MR)
          store_packed_rows(k, s, row + r * k.ldc, w0, packed_steps(k, e, s, acc[r + 1][0], acc[r + 1][1]), true);
        else
          store_packed_rows(k, s, row + r * k.ldc, w0, w0, false);
      }
      return;
    }
  }
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) {
    const ColumnEpilogue e = column_epilogue(k, v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) store_columns(k, e, r, acc[r][v]);
  }
}

/// The VNNI kernels' epilogue over sums already in memory: rows of acc (32 int32 each, the panel's columns) into
/// C, for the tile kernel.
[[ETRT_TARGET_AVX512VNNI]] inline void store_sums(const int32_t (*acc)[32], int rows, const Call& k) {
  for (int v = 0; v < 2 && k.cols > 16 * v; ++v) {
    const ColumnEpilogue e = column_epilogue(k, v);
    for (int r = 0; r < rows; ++r)
      store_columns(k, e, r, _mm512_sub_epi32(_mm512_loadu_si512(&acc[r][16 * v]), e.zero_sum));
  }
}
#pragma GCC diagnostic pop
#endif

/// The micro-kernels for 1..kMr rows, indexed by rows - 1; `wide`: the panel has more than 16 columns left.
inline const MicroFn* micro_table(bool vnni, bool wide) {
  static constexpr MicroFn base[kMr] = {&micro_base<1>, &micro_base<2>, &micro_base<3>, &micro_base<4>,
                                        &micro_base<5>, &micro_base<6>, &micro_base<7>, &micro_base<8>};
#ifdef ETRT_ISA_X86
  static constexpr MicroFn vnni1[kMr] = {&micro_vnni<1, 1>, &micro_vnni<2, 1>, &micro_vnni<3, 1>, &micro_vnni<4, 1>,
                                         &micro_vnni<5, 1>, &micro_vnni<6, 1>, &micro_vnni<7, 1>, &micro_vnni<8, 1>};
  static constexpr MicroFn vnni2[kMr] = {&micro_vnni<1, 2>, &micro_vnni<2, 2>, &micro_vnni<3, 2>, &micro_vnni<4, 2>,
                                         &micro_vnni<5, 2>, &micro_vnni<6, 2>, &micro_vnni<7, 2>, &micro_vnni<8, 2>};
  if (vnni) return wide ? vnni2 : vnni1;
#else
  (void)vnni;
  (void)wide;
#endif
  return base;
}

/// Which kernels compute the sums: the scalar definition, the VNNI micro-kernels, or the tile kernel.
enum class Kernel { Scalar, Vnni, Amx };

#ifdef ETRT_AMX
/// Rows [0, mc) of A (row stride lda, at least kAmxRows rows readable unless `tail` is given) by one panel, 32 rows
/// a call; a last group of fewer rows read in place is first copied into `tail` (kAmxRows x B.tile_row_bytes()).
inline void amx_rows(const uint8_t* a, int64_t lda, int64_t mc, bool in_place, const PackedQB& B, Call call,
                     float* c, int64_t ldc, uint8_t* tail) {
  alignas(64) int32_t acc[kAmxRows][32];
  const int64_t kblocks = B.k4_stored * 4 / kAmxK, tl = B.tile_row_bytes();
  for (int64_t ir = 0; ir < mc; ir += kAmxRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kAmxRows, mc - ir));
    const uint8_t* ar = a + ir * lda;
    int64_t stride = lda;
    if (in_place && rows < kAmxRows) {  // the rows past the matrix's end are not readable
      for (int r = 0; r < rows; ++r) {
        std::memcpy(tail + r * tl, ar + r * lda, static_cast<size_t>(B.k));
        std::memset(tail + r * tl + B.k, 0, static_cast<size_t>(tl - B.k));
      }
      ar = tail;
      stride = tl;
    }
    amx_tiles(ar, stride, call.b, kblocks, acc);
    call.c = c + ir * ldc;
    store_sums(acc, rows, call);
  }
}
#endif

/// Whether every column's steps stay below 2^30 in magnitude for any sum the layer can make, and the grid's range
/// plus the byte zero lies within [0, 255] (Note [int8 gemm packed bytes]). False for a non-finite parameter.
inline bool packed_bytes_fit(const PackedQB& B, const Requant& q, const gemm::Epilogue& ep) {
  const OutputGrid& g = q.out;
  if (!g.bytes || g.next || !g.round) return false;
  if (!(g.grid.qlo + g.byte_zero >= 0.f && g.grid.qhi + g.byte_zero <= 255.f && g.grid.inv > 0.f)) return false;
  if (std::isnan(ep.lo) || std::isnan(ep.hi)) return false;
  const double most_sum = 255.0 * 128.0 * static_cast<double>(B.k4 * 4);
  for (int64_t j = 0; j < B.n; ++j) {
    const double bias = ep.bias ? std::fabs(static_cast<double>(ep.bias[j])) : 0.0;
    const double steps = ((most_sum + std::fabs(static_cast<double>(q.zero_sum[j]))) *
                              std::fabs(static_cast<double>(q.scale[j])) + bias) * static_cast<double>(g.grid.inv);
    if (!(steps < 1073741824.0)) return false;  // also false for a NaN or an infinity
  }
  return true;
}

struct PackedRowsScratch;  // the tag of the calling thread's packed A rows (core/aligned_buffer.h's thread_scratch)

/// Rows [i0, i1) and panels [p0, p1) of C. pack_a(i, rows, dst, lda) writes rows [i, i + rows) of A, k bytes
/// each, at dst with row stride lda (the bytes from k to lda are free: they meet zero weights; it may write 16 bytes
/// past a row's k, rows in order, as nhwc::gather_short_windows does: the buffer has 64 past its last row);
/// pack_a.direct(i, lda) returns row i of A when A can be read in place (lda: its row stride; the kernels read
/// B.row_bytes() bytes of each row, so up to 3 bytes past the last row's k must be readable), else null.
template <class PackA>
inline void block(int64_t i0, int64_t i1, int64_t p0, int64_t p1, const PackedQB& B, const Requant& q,
                  const gemm::Epilogue& ep, float* c, int64_t ldc, Kernel kernel, PackA& pack_a) {
  const bool tiles = kernel == Kernel::Amx;
  const int64_t lda = tiles ? B.tile_row_bytes() : B.row_bytes();
  // kMc rows, and a tile kernel's copy of a last group read in place (amx_rows).
  uint8_t* apack = thread_scratch<uint8_t, PackedRowsScratch>(static_cast<size_t>((kMc + kAmxRows) * lda + 64));
  if (!apack) throw std::bad_alloc();  // as new[] did: the region or the method's boundary makes it an error value
#ifdef ETRT_AMX
  if (tiles) amx_configure();
#endif
  const bool pack_bytes = kernel == Kernel::Vnni && packed_bytes_fit(B, q, ep);
  for (int64_t ic = i0; ic < i1; ic += kMc) {
    const int64_t mc = std::min(kMc, i1 - ic);
    int64_t a_stride = lda;
    const uint8_t* a = pack_a.direct(ic, a_stride);
    [[maybe_unused]] const bool in_place = a != nullptr;  // read by the AMX tiles only
    if (!a) {
      pack_a(ic, mc, apack, lda);
      // The bytes past k meet zero weights; zeroed so that no uninitialised byte is read. Up to three for the VNNI
      // rows, stored one by one: a memset call per row took 4% of a 7 x 7 stem's convolution.
      const int64_t tail = lda - B.k;
      for (int64_t r = 0; r < mc && tail > 0; ++r) {
        uint8_t* t = apack + r * lda + B.k;
        switch (tail) {
          case 3: t[2] = 0; [[fallthrough]];
          case 2: t[1] = 0; [[fallthrough]];
          case 1: t[0] = 0; break;
          default: std::memset(t, 0, static_cast<size_t>(tail));
        }
      }
      a = apack;
      a_stride = lda;
    }
    for (int64_t panel = p0; panel < p1; ++panel) {
      const int64_t j = panel * kNr;
      Call call{B.k4, nullptr, a_stride, B.panel(panel), q.zero_sum + j, q.scale + j, ep.bias ? ep.bias + j : nullptr,
                ep.lo, ep.hi, nullptr, ldc, static_cast<int>(std::min<int64_t>(kNr, B.n - j)),
                q.out.any() ? &q.out : nullptr, pack_bytes};
#ifdef ETRT_AMX
      if (tiles) {
        amx_rows(a, a_stride, mc, in_place, B, call, c + ic * ldc + j, ldc, apack + kMc * lda);
        continue;
      }
#endif
      const MicroFn* micro = micro_table(kernel == Kernel::Vnni, call.cols > 16);
      for (int64_t ir = 0; ir < mc; ir += kMr) {
        const int rows = static_cast<int>(std::min<int64_t>(kMr, mc - ir));
        call.a = a + ir * a_stride;
        call.c = c + (ic + ir) * ldc + j;
        micro[rows - 1](call);
      }
    }
    ep.finish_block(c + ic * ldc + p0 * kNr, mc, std::min<int64_t>(p1 * kNr, B.n) - p0 * kNr, ldc);
  }
#ifdef ETRT_AMX
  if (tiles) amx_release();
#endif
}

}  // namespace detail

/// Whether this process runs the int8 GEMM on the CPU's byte dot products (isa level avx512vnni or above).
inline bool has_vnni() { return isa::level() >= isa::kAvx512Vnni; }

/// The kernels this process runs the int8 GEMM on.
inline detail::Kernel best_kernel() {
  return has_amx() ? detail::Kernel::Amx : has_vnni() ? detail::Kernel::Vnni : detail::Kernel::Scalar;
}

/// C (m x B.n, row stride ldc) per Note [int8 gemm], then ep.finish on each finished block; A read through pack_a
/// (see detail::block), its sums computed by `kernel` (tests pick each). Large products are split across threads
/// by rows of C when there are enough of them, else by column panels.
template <class PackA>
inline void qgemm(int64_t m, const PackedQB& B, const Requant& q, const gemm::Epilogue& ep, float* c, int64_t ldc,
                  PackA&& pack_a, detail::Kernel kernel = best_kernel()) {
  if (m <= 0 || B.n <= 0) return;
  const int64_t panels = B.panels();
  if (m * B.n * B.k < 4 * min_parallel_work() || thread_count().load() <= 1) {
    detail::block(0, m, 0, panels, B, q, ep, c, ldc, kernel, pack_a);
  } else if (m >= 2 * kMc || panels < 2 * thread_count().load()) {
    // Split in whole micro-tiles (each range is still packed kMc rows at a time): with kMc blocks as the grain,
    // resnet18_q8's 196-row layers went 192 rows to one thread and 4 to the other.
    parallel_for(m, kMr,
                 [&](int64_t i0, int64_t i1) { detail::block(i0, i1, 0, panels, B, q, ep, c, ldc, kernel, pack_a); });
  } else {
    parallel_for(panels, 1,
                 [&](int64_t p0, int64_t p1) { detail::block(0, m, p0, p1, B, q, ep, c, ldc, kernel, pack_a); });
  }
}

namespace detail {

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593, as for micro_vnni
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// quantize_row's vector body; returns how many elements it did.
[[ETRT_TARGET_AVX512VNNI]] inline int64_t quantize_row_avx512(const float* src, int64_t n, float inv_scale,
                                                              int32_t zero, uint8_t* dst) {
  int64_t j = 0;
  const __m512 inv = _mm512_set1_ps(inv_scale), flo = _mm512_set1_ps(-512.f), fhi = _mm512_set1_ps(512.f);
  const __m512i z = _mm512_set1_epi32(zero), lo = _mm512_setzero_si512(), hi = _mm512_set1_epi32(255);
  for (; j + 16 <= n; j += 16) {
    // Bounded first, so the conversion never overflows; max_ps returns its second operand for a NaN.
    const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(src + j), inv), flo), fhi);
    __m512i qv = _mm512_add_epi32(_mm512_cvtps_epi32(v), z);  // half to even under the default MXCSR
    qv = _mm512_min_epi32(_mm512_max_epi32(qv, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), _mm512_cvtepi32_epi8(qv));
  }
  return j;
}
#pragma GCC diagnostic pop
#endif

}  // namespace detail

/// dst[i] = clamp(round(src[i] x inv_scale) + zero, 0, 255): float values on a quantization grid (each the real
/// number (q - zero_point) x scale) back to their stored bytes raised by an offset, zero = zero_point + offset.
/// Rounding is half to even, as XNNPACK's; a NaN becomes 0.
inline void quantize_row(const float* src, int64_t n, float inv_scale, int32_t zero, uint8_t* dst) {
  int64_t i = 0;
#ifdef ETRT_ISA_X86
  if (has_vnni()) i = detail::quantize_row_avx512(src, n, inv_scale, zero, dst);
#endif
  for (; i < n; ++i) {
    const float v = std::min(std::max(src[i] * inv_scale, -512.f), 512.f);  // a NaN stays NaN
    const float r = v == v ? std::min(std::max(std::nearbyint(v) + static_cast<float>(zero), 0.f), 255.f) : 0.f;
    dst[i] = static_cast<uint8_t>(r);
  }
}

/// quantize_row over n values, split across threads when there are many.
inline void quantize(const float* src, int64_t n, float inv_scale, int32_t zero, uint8_t* dst) {
  constexpr int64_t kChunk = 16384;
  if (n < 4 * kChunk || thread_count().load() <= 1) return quantize_row(src, n, inv_scale, zero, dst);
  parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    const int64_t b = c0 * kChunk, e = std::min(n, c1 * kChunk);
    quantize_row(src + b, e - b, inv_scale, zero, dst + b);
  });
}

}  // namespace etrt::kernels::qgemm
