// A float GEMM whose B operand (a layer's weights) is packed once, when a method loads, with the bias and an output
// clamp applied as C is written.
//
// Note [packed gemm]: B (k x n) is stored in the panels of the micro-kernels of the CPU level picked at packing time
// (util/gemm.h, Note [gemm blocking]): for each block of kPackedKc rows of B, the ceil(n / NR) column panels of that
// block, each kc x NR row-major and zero-padded to NR columns. A call reads A through a caller-supplied packer: a
// row-major A (a linear layer's input, a pointwise convolution's NHWC input) is read in place, the micro-kernels
// taking its row stride; a convolution packs its input windows straight into MR-row panels, a block of MC rows at
// a time, so no im2col buffer exists. Full MR-row groups go through the MR x NR kernel, the rows left over one at
// a time through the 1 x NR kernel (as fast per row while the B panel sits in L1, so no work is spent on padding
// rows: a batch-1 linear layer is all row kernel). The epilogue runs on the accumulators before the one store:
// the bias on the first K block, C itself on later ones, the clamp on the last, so an activation fused by the
// exporter (ReLU, ReLU6 as output_min/max) costs no extra pass over the output. Only the last, narrower column
// panel goes through a tile buffer; when it holds at most NR / 2 columns, only those NR / 2 are computed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>

#include "etrt/core/aligned_buffer.h"
#include "etrt/core/result.h"
#include "etrt/kernels/util/gemm.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/vec.h"

#ifdef ETRT_ISA_X86
#include <immintrin.h>
#endif

namespace etrt::kernels::gemm {

inline constexpr int64_t kPackedKc = 256;
inline constexpr int64_t kPackedMc = 144;  // a multiple of every MR (8, 6, 4)
inline constexpr int64_t kStreamedWeightFloats = 16384;  // 64 KB: a matrix-vector product split (Note [streamed weights])

/// What is applied as C is written: C = clamp(A * B + bias, lo, hi). bias (n floats) may be null.
struct Epilogue {
  const float* bias = nullptr;
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  /// Optional: run on each finished block of C (rows x cols at c, row stride ldc), after the clamp, by the thread
  /// that wrote it, while the block is still in cache. The XNNPACK delegate rounds a quantized output onto its grid
  /// here, instead of in a pass of its own over the whole output from memory on one thread.
  void (*finish)(const void* state, float* c, int64_t rows, int64_t cols, int64_t ldc) = nullptr;
  const void* finish_state = nullptr;

  bool clamps() const {
    return lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity();
  }
  void finish_block(float* c, int64_t rows, int64_t cols, int64_t ldc) const {
    if (finish && rows > 0 && cols > 0) finish(finish_state, c, rows, cols, ldc);
  }
};

namespace detail {

using TileOut = Tile<float>;
using MicroC = void (*)(int64_t, const float*, int64_t, int64_t, const float*, const TileOut&);

/// The float kernels of a level (isa::level), shared with the unpacked GEMM (util/gemm.h).
inline const Micro<float>& micro_c_kernels(int level) { return micro_epilogue_kernels(level); }

}  // namespace detail

/// B packed for the micro-kernels of one level (Note [packed gemm]).
struct PackedB {
  AlignedArray<float> data;
  int64_t k = 0;
  int64_t n = 0;
  int level = 0;  // the isa::level the panels were laid out for
  int nr = 8;

  int64_t panels() const { return (n + nr - 1) / nr; }
  int64_t micro_rows() const { return detail::micro_c_kernels(level).mr; }
  /// The kc x NR panel `panel` of the K block starting at row pc (pc a multiple of kPackedKc).
  const float* block(int64_t pc, int64_t panel, int64_t kc) const {
    return data.get() + pc * panels() * nr + panel * kc * nr;
  }
};

/// The isa::level whose micro-kernels a k x n matrix is packed for: this CPU's, but AVX2's for at most 8 columns on
/// an AVX-512 CPU. The AVX-512 tiles are 32 columns wide, 16 at half width, so a layer of 8 output channels (a small
/// CNN's first convolution) computed twice the columns it has, and through the buffered store of a narrow panel;
/// AVX2's half tile is exactly 8 (xnn_cnn's forward, whose stem has 8 output channels: 11.5 -> 11.1 us).
inline int packing_level(int64_t n) {
  const int level = isa::level();
#ifdef ETRT_ISA_X86
  if (level >= isa::kAvx512 && n <= 8) return 1;
#endif
  (void)n;
  return level;
}

/// Floats a packed k x n matrix takes (packing_level's panels): for memory budgets, before packing.
inline uint64_t packed_b_floats(int64_t k, int64_t n) {
  const int64_t nr = detail::micro_c_kernels(packing_level(n)).nr;
  return static_cast<uint64_t>((n + nr - 1) / nr * nr) * static_cast<uint64_t>(k);
}

/// Packs B(p, j) = b[p * rs + j * cs] for p < k, j < n.
inline Result<PackedB> pack_b(const float* b, int64_t rs, int64_t cs, int64_t k, int64_t n) {
  PackedB out;
  out.k = k;
  out.n = n;
  out.level = packing_level(n);
  out.nr = detail::micro_c_kernels(out.level).nr;
  const uint64_t floats = packed_b_floats(k, n);
  out.data = make_aligned_array<float>(static_cast<size_t>(floats));
  if (!out.data) return fail(Error::MemoryAllocationFailed, "cannot allocate ", floats * sizeof(float), " bytes of packed weights");
  const int nr = out.nr;
  for (int64_t pc = 0; pc < k; pc += kPackedKc)
    detail::pack_b(b + pc * rs, rs, cs, std::min(kPackedKc, k - pc), n, nr, out.data.get() + pc * out.panels() * nr);
  return out;
}

/// dst (as many floats as src.data) = src with row p scaled by s[p]: diag(s) B, packed as src is. The input-channel
/// gate of Note [xnnpack gated filter], applied to the filter instead of the activation.
inline void scale_rows(const PackedB& src, const float* s, float* dst) {
  const int64_t panels = src.panels(), nr = src.nr;
  for (int64_t pc = 0; pc < src.k; pc += kPackedKc) {
    const int64_t kc = std::min(kPackedKc, src.k - pc);
    for (int64_t panel = 0; panel < panels; ++panel) {
      const float* from = src.block(pc, panel, kc);
      float* to = dst + (from - src.data.get());
      isa::dispatch_lanes([&]<int L>() ETRT_ISA_INLINE {
        for (int64_t p = 0; p < kc; ++p) {
          const float gate = s[pc + p];
          int64_t j = 0;
          for (; j + L <= nr; j += L) {
            vec::Vec<L> v;
            vec::load(v, from + p * nr + j);
            vec::store(to + p * nr + j, v * gate);
          }
          for (; j < nr; ++j) to[p * nr + j] = from[p * nr + j] * gate;
        }
      });
    }
  }
}

namespace detail {

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593: the AVX-512 intrinsics' self-initialised "undefined" vectors
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// store_tile in masked 16-lane steps: a narrow last panel (24 of 32 columns, say) is most of a layer whose
/// output has few channels, and the module's -O2 leaves the scalar loop scalar.
[[ETRT_TARGET_AVX512]] inline void store_tile_avx512(const float* tile, int nr, int64_t rows, int64_t cols, float* c,
                                                     int64_t ldc, int64_t j, const Epilogue& ep, bool first,
                                                     bool last) {
  const bool clamp = last && ep.clamps();
  const __m512 lo = _mm512_set1_ps(ep.lo), hi = _mm512_set1_ps(ep.hi);
  for (int64_t q = 0; q < cols; q += 16) {
    const int64_t w = std::min<int64_t>(16, cols - q);
    const __mmask16 m = w == 16 ? __mmask16(0xFFFF) : __mmask16((1u << w) - 1);
    const __m512 bias = first && ep.bias ? _mm512_maskz_loadu_ps(m, ep.bias + j + q) : _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      float* crow = c + r * ldc + j + q;
      __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, tile + r * nr + q), first ? bias : _mm512_maskz_loadu_ps(m, crow));
      if (clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));  // a NaN v is the second operand: it stays NaN
      _mm512_mask_storeu_ps(crow, m, v);
    }
  }
}
#pragma GCC diagnostic pop
#endif

/// Writes a rows x cols tile (row stride nr) into C at (i, j) per the epilogue (Note [packed gemm]).
inline void store_tile(const float* tile, int nr, int64_t rows, int64_t cols, float* c, int64_t ldc, int64_t j,
                       const Epilogue& ep, bool first, bool last) {
#ifdef ETRT_ISA_X86
  if (isa::level() >= isa::kAvx512) return store_tile_avx512(tile, nr, rows, cols, c, ldc, j, ep, first, last);
#endif
  const bool clamp = last && ep.clamps();
  for (int64_t r = 0; r < rows; ++r) {
    float* crow = c + r * ldc + j;
    const float* t = tile + r * nr;
    for (int64_t q = 0; q < cols; ++q) {
      float v = t[q] + (first ? (ep.bias ? ep.bias[j + q] : 0.f) : crow[q]);
      if (clamp) v = std::min(std::max(v, ep.lo), ep.hi);  // NaN stays NaN, as torch's clamp
      crow[q] = v;
    }
  }
}

// Note [next panel prefetch]: a network whose weights outnumber the cache (vit_b_32: 350 MB) reads every packed
// panel from memory, and its first row tile waits for it: 50 x 768 x 3072 on two Zen 4 cores took 1.07 ms with the
// weights in cache and 1.22 ms without. So the first tiles of a panel touch the next panel of the range, a line a
// step in bursts of kPrefetchBurst (AVX-512 tiles; a 768-step tile covers half of a 96 KB panel), into L2: vit_b_32
// forward 51.0-52.8 -> 49.7-52.2 ms (best of alternated builds, three pairs); from cache the touches cost nothing
// measurable (mobilenet_v2 3.63 / 3.64 ms).

/// Rows [i0, i1) and column panels [p0, p1) of C. pack_a(i, rows, pc, kc, mr, dst) writes rows [i, i + rows) x
/// columns [pc, pc + kc) of A into rows / mr panels of mr rows (rows is a multiple of mr), or, for a packer that
/// declares `kRowMajor`, as rows of kc contiguous values (row r at dst + r * kc: a gather by contiguous runs, where
/// interleaving the rows cost it a store per element); pack_a.direct(i, pc, lda) returns row i of A from column pc
/// when A can be read in place (lda: its row stride), else null.
template <class PackA>
inline void packed_block(int64_t i0, int64_t i1, int64_t p0, int64_t p1, const PackedB& B, const Epilogue& ep, float* c,
                         int64_t ldc, PackA& pack_a) {
  const Micro<float>& mk = micro_c_kernels(B.level);
  const int mr = mk.mr, nr = mk.nr;
  thread_local Scratch<float> scratch;
  float* apack = scratch.get_a(static_cast<size_t>(kPackedMc * kPackedKc));
  alignas(64) float tile[kMaxMr * 32];
  for (int64_t pc = 0; pc < B.k; pc += kPackedKc) {
    const int64_t kc = std::min(kPackedKc, B.k - pc);
    const bool first = pc == 0, last = pc + kc >= B.k;
    for (int64_t ic = i0; ic < i1; ic += kPackedMc) {
      const int64_t mc = std::min(kPackedMc, i1 - ic);
      const int64_t full = mc / mr * mr;
      int64_t lda = 0;
      const float* direct = pack_a.direct(ic, pc, lda);
      if (!direct) {
        if (full > 0) pack_a(ic, full, pc, kc, mr, apack);
        if (mc > full) pack_a(ic + full, mc - full, pc, kc, 1, apack + full * kc);
      }
      for (int64_t panel = p0; panel < p1; ++panel) {
        const float* bp = B.block(pc, panel, kc);
        const int64_t j = panel * nr, cols = std::min<int64_t>(nr, B.n - j);
        // A whole panel is written from registers; the last, narrower one goes through `tile`.
        const TileOut to{c + ic * ldc + j, ldc, first && ep.bias ? ep.bias + j : nullptr, !first, last && ep.clamps(),
                         ep.lo, ep.hi};
        const TileOut to_tile{tile, nr, nullptr, false, false, 0.f, 0.f};
        // A panel with fewer columns real runs the narrowest tile that holds them (Micro::width).
        const int64_t width = mk.width(cols);
        // Note [next panel prefetch]: the first tiles bring the next panel into L2, a line a step.
        const char* next = panel + 1 < p1 ? reinterpret_cast<const char*>(B.block(pc, panel + 1, kc)) : nullptr;
        const int64_t next_bytes = kc * nr * int64_t{sizeof(float)};
        for (int64_t ir = 0; ir < mc; ir += mr) {
          // The last rows (fewer than mr) were packed one after another, kc apart (pack_a with mr = 1).
          const int64_t rows = std::min<int64_t>(mr, mc - ir);
          const int64_t ahead = ir / mr * kc * 64;  // bytes of the next panel the earlier tiles touched
          const char* prefetch = next && ahead < next_bytes ? next + ahead : nullptr;
          const bool whole = rows == mr;
          const float* a = direct ? direct + ir * lda : apack + ir * kc;
          constexpr bool row_major = requires { PackA::kRowMajor; };
          const int64_t a_ps = direct || row_major || !whole ? 1 : mr,
                        a_is = direct ? lda : row_major || !whole ? kc : 1;
          const MicroC fn = mk.kernel(rows, cols);
          if (cols == width) {
            TileOut t = to;
            t.c += ir * ldc;
            t.prefetch = prefetch;
            fn(kc, a, a_ps, a_is, bp, t);
          } else {
            TileOut t = to_tile;
            t.prefetch = prefetch;
            fn(kc, a, a_ps, a_is, bp, t);
            store_tile(tile, nr, rows, cols, c + (ic + ir) * ldc, ldc, j, ep, first, last);
          }
        }
      }
      if (last) ep.finish_block(c + ic * ldc + p0 * nr, mc, std::min<int64_t>(p1 * nr, B.n) - p0 * nr, ldc);
    }
  }
}

}  // namespace detail

/// C (m x B.n, row stride ldc) = clamp(A * B + bias), then ep.finish, A read through pack_a (see
/// detail::packed_block). Large products are split across threads by rows of C when there are enough of them, else
/// by column panels.
template <class PackA>
inline void packed_gemm(int64_t m, const PackedB& B, const Epilogue& ep, float* c, int64_t ldc, PackA&& pack_a) {
  if (m <= 0 || B.n <= 0) return;
  if (B.k <= 0) {  // an empty sum: the bias, clamped
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < B.n; ++j) {
        const float v = ep.bias ? ep.bias[j] : 0.f;
        c[i * ldc + j] = ep.clamps() ? std::min(std::max(v, ep.lo), ep.hi) : v;
      }
    ep.finish_block(c, m, B.n, ldc);
    return;
  }
  const int64_t panels = B.panels();
  // Note [streamed weights]: a matrix-vector product is bound by its weight's bytes, which come from memory when
  // the network's weights outnumber the cache (a squeeze-and-excitation block's 1152 x 48 layer: 216 KB, 22 us on one
  // Zen 4 core at 10 GB/s, under the multiply-add count worth a region). Two cores stream it in about half the time
  // (6-7 us; efficientnet_b0's squeeze-and-excitation products 526 -> 407 us a forward on two cores), where a pool's
  // region costs a wake-up; threads started for a region would cost more than the product.
  const bool streamed = m <= B.micro_rows() && panels >= 2 && B.k * B.n >= kStreamedWeightFloats &&
                        kernels::detail::current_pool() != nullptr;
  if ((m * B.n * B.k < min_parallel_work() && !streamed) || thread_count().load() <= 1) {
    detail::packed_block(0, m, 0, panels, B, ep, c, ldc, pack_a);
  } else if (m >= 2 * kPackedMc || (m >= 2 * B.micro_rows() && panels < 2 * thread_count().load())) {
    // Split in whole micro-tiles, not whole kPackedMc blocks (each range is still packed kPackedMc rows at a
    // time): with blocks as the grain, an odd count of them left one thread a block more than the other.
    parallel_for(m, B.micro_rows(), [&](int64_t i0, int64_t i1) { detail::packed_block(i0, i1, 0, panels, B, ep, c, ldc, pack_a); });
  } else if (m <= B.micro_rows()) {
    // A matrix-vector product, bound by the weight's bytes: chunks of panels the threads claim one at a time (a
    // worker that wakes late takes fewer: parallel_chunks), each chunk at least a megabyte of weight or else a
    // thread's whole share. Claimed a panel or two at a time, the threads' reads interleaved and the prefetchers
    // lost the streams: an LLM decode step's 288 x 768 layer (24 panels) ran at 25-34 GB/s on two Zen 4 cores, no
    // faster than on one, and at 43-56 GB/s in halves; its 32000-row output layer was as fast either way.
    const int64_t threads = thread_count().load(), panel_bytes = B.k * B.nr * int64_t{sizeof(float)};
    const int64_t grain = std::min(std::max(panels / (8 * threads), (int64_t{1} << 20) / panel_bytes + 1),
                                   (panels + threads - 1) / threads);
    parallel_chunks(panels, grain, [&](int64_t p0, int64_t p1) { detail::packed_block(0, m, p0, p1, B, ep, c, ldc, pack_a); });
  } else {  // each chunk packs all m rows of A: one chunk per thread
    parallel_for(panels, 1, [&](int64_t p0, int64_t p1) { detail::packed_block(0, m, p0, p1, B, ep, c, ldc, pack_a); });
  }
}

/// packed_gemm on the calling thread alone, for callers that split their work across threads themselves (the
/// Winograd convolution's per-element GEMMs); B.k >= 1.
template <class PackA>
inline void packed_gemm_here(int64_t m, const PackedB& B, const Epilogue& ep, float* c, int64_t ldc, PackA pack_a) {
  if (m > 0 && B.n > 0 && B.k > 0) detail::packed_block(0, m, 0, B.panels(), B, ep, c, ldc, pack_a);
}

/// The packer for a row-major A (m x k, row stride lda).
struct MatrixRows {
  const float* a;
  int64_t lda;
  void operator()(int64_t i, int64_t rows, int64_t pc, int64_t kc, int mr, float* dst) const {
    detail::pack_a(a + i * lda + pc, lda, int64_t{1}, rows, kc, mr, dst);
  }
  /// Read in place: the micro-kernels take A's row stride, so a row-major A is never copied.
  const float* direct(int64_t i, int64_t pc, int64_t& row_stride) const {
    row_stride = lda;
    return a + i * lda + pc;
  }
};

}  // namespace etrt::kernels::gemm
