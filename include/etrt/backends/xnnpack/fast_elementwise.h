// Contiguous float loops for the elementwise node kinds in the shapes XNNPACK graphs use them: equal shapes, a
// scalar, or a vector repeated over the rows (a channel scale or bias in NHWC, as squeeze-and-excitation and
// swish produce). The loops are plain enough for the compiler to vectorize, and split across threads when long;
// any other broadcast goes to the portable kernels' general engine (node_run.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "etrt/backends/xnnpack/shape_inference.h"
#include "etrt/kernels/util/fast_math.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/sigmoid.h"
#include "etrt/kernels/util/vec.h"

#ifdef ETRT_ISA_X86
#include <immintrin.h>
#endif

namespace etrt::xnnpack::fast {

// The binary operations, with torch's NaN rule for minimum / maximum (a NaN on either side is the result), on a
// float or a Vec.
struct Add {
  template <class T>
  T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <class T>
  T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <class T>
  T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <class T>
  T operator()(T a, T b) const { return a / b; }
};
struct Min {
  template <class T>
  T operator()(T a, T b) const { return (a < b) | (a != a) ? a : b; }
};
struct Max {
  template <class T>
  T operator()(T a, T b) const { return (a > b) | (a != a) ? a : b; }
};

/// A per-tensor quantized output rounded as the loop writes it: clamped to [lo, hi] (the node's output_min_max,
/// infinite for none), then onto its grid, the executor's requantize pass (Note [xnnpack quantized values]) done
/// on the registers. Stored values equal the pass's.
struct OutGrid {
  float lo, hi, inv, qlo, qhi, scale;
  template <class T>
  [[gnu::always_inline]] T operator()(T v) const {
    return kernels::vec::grid_point(kernels::vec::clamped(v, lo, hi), inv, qlo, qhi, scale);
  }
};
/// A float output: stored as computed.
struct AsIs {
  template <class T>
  [[gnu::always_inline]] T operator()(T v) const { return v; }
};

/// o[i] = out(op(a[i], b[i])) for i < n, where a or b may be a single value repeated (a_step / b_step 0), L lanes
/// at a time (Note [vector lanes per level]). Spelled in vectors: the module's -O2 leaves a loop of unknown trip
/// count scalar.
template <int L, class Op, class Out>
[[gnu::always_inline]] inline void map2(const float* a, int a_step, const float* b, int b_step, float* o, int64_t n,
                                        Op op, Out out) {
  using V = kernels::vec::Vec<L>;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V va, vb;
    if (a_step) kernels::vec::load(va, a + i);
    else va = V{} + a[0];
    if (b_step) kernels::vec::load(vb, b + i);
    else vb = V{} + b[0];
    kernels::vec::store(o + i, out(op(va, vb)));
  }
  for (; i < n; ++i) o[i] = out(op(a[a_step ? i : 0], b[b_step ? i : 0]));
}

/// The number of trailing elements of `full` that `part` covers when `part`, with its leading 1s dropped, equals the
/// trailing dims of `full` (a scalar covers 1); -1 otherwise.
inline int64_t repeated_suffix(const ValueShape& part, const ValueShape& full) {
  uint32_t lead = 0;
  while (lead < part.rank && part.d[lead] == 1) ++lead;
  const uint32_t len = part.rank - lead;
  if (len > full.rank) return -1;
  int64_t inner = 1;
  for (uint32_t k = 0; k < len; ++k) {
    if (part.d[lead + k] != full.d[full.rank - len + k]) return -1;
    inner *= part.d[lead + k];
  }
  return inner;
}

/// x = grid(x) over n values: a node's quantized output rounded while the block just written is in cache.
inline void round_onto(const OutGrid& grid_ref, float* x, int64_t n) {
  kernels::isa::dispatch_lanes([&]<int L>() ETRT_ISA_INLINE {
    using V = kernels::vec::Vec<L>;
    const OutGrid grid = grid_ref;  // a copy the stores through x cannot alias (Note [captured scalars])
    int64_t i = 0;
    for (; i + L <= n; i += L) {
      V v;
      kernels::vec::load(v, x + i);
      kernels::vec::store(x + i, grid(v));
    }
    for (; i < n; ++i) x[i] = grid(x[i]);
  });
}

/// o = op(a, b), then rounded onto `grid` when given, when the shapes are one of the fast patterns; false (nothing
/// written) otherwise. The rounding follows each block of about kBlock values while it is in cache: one loop for
/// every op rather than a fused copy of each, which doubled the delegate's compile of these loops. AVX-512 where
/// there is one: efficientnet_b0's activations sit in L2, where the wider loops ran its forward 10% faster.
template <class Op>
inline bool binary(const ValueShape& as, const float* a, const ValueShape& bs, const float* b, const ValueShape& os,
                   float* o, Op op, const OutGrid* grid = nullptr) {
  constexpr int64_t kBlock = 4096;
  const int64_t n = os.numel();
  const bool a_full = as == os, b_full = bs == os;
  if (!a_full && !b_full) return false;
  const int64_t inner = a_full && b_full ? n : a_full ? repeated_suffix(bs, os) : repeated_suffix(as, os);
  if (inner <= 0) return false;
  if (inner == n || inner == 1) {  // equal shapes, or a scalar on one side
    const int a_step = a_full ? 1 : 0, b_step = b_full ? 1 : 0;
    kernels::parallel_elements(n, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t b0 = i0; b0 < i1; b0 += kBlock) {
        const int64_t len = std::min(kBlock, i1 - b0);
        kernels::isa::dispatch_lanes([&]<int L>() ETRT_ISA_INLINE {
          map2<L>(a + b0 * a_step, a_step, b + b0 * b_step, b_step, o + b0, len, op, AsIs{});
        });
        if (grid) round_onto(*grid, o + b0, len);
      }
    });
    return true;
  }
  // A row repeated: split by whole rows of `inner` elements, rounded a group of rows at a time.
  const int64_t group = std::max<int64_t>(1, kBlock / inner);
  kernels::parallel_elements(n / inner, inner, [&](int64_t r0, int64_t r1) {
    for (int64_t g0 = r0; g0 < r1; g0 += group) {
      const int64_t g1 = std::min(r1, g0 + group);
      kernels::isa::dispatch_lanes([&]<int L>() ETRT_ISA_INLINE {
        for (int64_t r = g0 * inner; r < g1 * inner; r += inner) {
          if (a_full) map2<L>(a + r, 1, b, 1, o + r, inner, op, AsIs{});
          else map2<L>(a, 1, b + r, 1, o + r, inner, op, AsIs{});
        }
      });
      if (grid) round_onto(*grid, o + g0 * inner, (g1 - g0) * inner);
    }
  });
  return true;
}

/// y = 1 / (1 + e^-x) (kernels/util/sigmoid.h: the lane-wise exp, within 2 ulp of libm's expf): large negative x
/// gives 0, NaN stays NaN. Bound by arithmetic, so split across threads when long.
template <class Out = AsIs>
inline void sigmoid(const float* x, float* y, int64_t n, Out out = {}) {
  kernels::parallel_elements(n, 16, [&](int64_t i0, int64_t i1) {
    kernels::sigmoid_all(x + i0, y + i0, i1 - i0, out);
  });
}

/// o[i] = the byte of grid(v[i]) (clamped, then rounded onto the grid; byte zero `o_zero`), for i < n (one thread).
inline void reals_to_bytes(const float* v, int64_t n, const OutGrid& grid, float o_zero, uint8_t* o) {
  const auto byte = [grid, o_zero](auto x) ETRT_ISA_INLINE {
    return kernels::vec::round_small(kernels::vec::clamped(kernels::vec::clamped(x, grid.lo, grid.hi) * grid.inv,
                                                           grid.qlo, grid.qhi)) + o_zero;
  };
  kernels::isa::dispatch_lanes([&, v, n, o]<int L>() ETRT_ISA_INLINE {
    // A local copy: the byte stores through o may alias any object whose address is known, the closure's too
    // (Note [captured scalars]).
    const auto to_byte = byte;
    int64_t i = 0;
    for (; i + L <= n; i += L) {
      kernels::vec::Vec<L> x;
      kernels::vec::load(x, v + i);
      kernels::vec::store_bytes<L>(o + i, to_byte(x));
    }
    for (; i < n; ++i) {
      const float b = to_byte(v[i]);
      o[i] = b == b ? static_cast<uint8_t>(b) : uint8_t{255};  // NaN: no byte stands for it
    }
  });
}

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593: the AVX-512 intrinsics' self-initialised "undefined" vectors
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// lookup_bytes 64 bytes at a time: two two-register byte permutes index the table's halves by each byte's low
/// seven bits, its top bit picks between them.
[[gnu::target("avx512f,avx512bw,avx512vbmi")]] inline int64_t lookup_bytes_vbmi(const uint8_t* in, uint8_t* out,
                                                                                int64_t n, const uint8_t* table) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64),
                t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i x = _mm512_loadu_si512(in + i);
    const __m512i lo = _mm512_permutex2var_epi8(t0, x, t1), hi = _mm512_permutex2var_epi8(t2, x, t3);
    _mm512_storeu_si512(out + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi));
  }
  return i;
}
#pragma GCC diagnostic pop
#endif

/// out[i] = table[in[i]] for i < n: a function of one byte, tabulated (Note [xnnpack activation chain]).
inline void lookup_bytes(const uint8_t* in, uint8_t* out, int64_t n, const uint8_t* table) {
  int64_t i = 0;
#ifdef ETRT_ISA_X86
  if (kernels::isa::avx512_vbmi()) i = lookup_bytes_vbmi(in, out, n, table);
#endif
  for (; i < n; ++i) out[i] = table[in[i]];
}

/// How binary_mixed walks two operands of these shapes into `out`: rows x inner elements, an operand with `row`
/// set repeating one row of `inner`; nullopt unless the shapes are equal or one repeats the other's trailing dims.
struct MixedLayout {
  int64_t rows, inner;
  bool a_row, b_row;
};
inline std::optional<MixedLayout> mixed_layout(const ValueShape& as, const ValueShape& bs, const ValueShape& os) {
  const int64_t n = os.numel();
  const bool a_full = as == os, b_full = bs == os;
  if (a_full && b_full) return MixedLayout{1, n, false, false};
  if (!a_full && !b_full) return std::nullopt;
  const int64_t inner = repeated_suffix(a_full ? bs : as, os);
  if (inner <= 0 || n % inner != 0) return std::nullopt;
  return MixedLayout{n / inner, inner, !a_full, !b_full};
}

/// One operand of binary_mixed (Note [byte activations]): floats, or bytes standing for (byte - zero) x scale (the
/// float the float path holds for them: the grid point's one product); `row`: one row repeated over the output's
/// rows (a channel vector in NHWC), else as long as the output.
struct MixedOperand {
  const float* f = nullptr;
  const uint8_t* b = nullptr;
  float zero = 0.f, scale = 1.f;
  bool row = false;

  template <int L>
  [[gnu::always_inline]] kernels::vec::Vec<L> load(int64_t i) const {
    if (b) return (kernels::vec::load_bytes<L>(b + i) - zero) * scale;
    kernels::vec::Vec<L> v;
    kernels::vec::load(v, f + i);
    return v;
  }
  [[gnu::always_inline]] float load1(int64_t i) const {
    return b ? (static_cast<float>(b[i]) - zero) * scale : f[i];
  }
};

/// out[i] = the real number of byte a.b[i0 + i], for i < n (one thread; `a` holds bytes).
inline void bytes_to_reals(MixedOperand a, int64_t i0, int64_t n, float* out) {
  kernels::isa::dispatch_lanes([&, a, i0, n, out]<int L>() ETRT_ISA_INLINE {
    int64_t i = 0;
    for (; i + L <= n; i += L) kernels::vec::store(out + i, a.template load<L>(i0 + i));
    for (; i < n; ++i) out[i] = a.load1(i0 + i);
  });
}

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593, as above
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// binary_mixed's elements [e0, e1) where both operands and the output are bytes, on AVX-512: one zero-extension
/// a load, the parameters in registers (the generic loop reloaded them after every byte store and widened bytes in
/// four steps; a residual Add of mobilenet_v2_q8 took 0.5 ns an element). The same float operations in the same
/// order; the rounding is the conversion's half to even (round_small's), and a NaN, converted to 0x80000000, stays
/// negative past the zero's add and saturates to 255, as the scalar store writes.
struct BytesAvx512 {
  __m512 za, sa, zb, sb, lo, hi, inv, qlo, qhi;
  __m512i zo;
};
/// Up to 16 elements (the lanes of m) of binary_bytes_avx512.
template <class Op>
[[ETRT_TARGET_AVX512]] [[gnu::always_inline]] inline void binary_bytes16(const BytesAvx512& c, Op op,
                                                                          const uint8_t* pa, const uint8_t* pb,
                                                                          uint8_t* po, __mmask16 m) {
  __m512 x =
      _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, pa))), c.za), c.sa);
  __m512 y =
      _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, pb))), c.zb), c.sb);
  // Each product rounded on its own, as the generic loop's: GCC contracts a multiply and an add written with
  // intrinsics into one fused step (-ffp-contract=fast is its default even under -std=c++20), which moved results
  // that land near a half step by one.
  asm("" : "+v"(x), "+v"(y));
  // clamped(v, lo, hi), then clamped(v x inv, qlo, qhi): max / min with the value second keep a NaN.
  __m512 v = _mm512_min_ps(c.hi, _mm512_max_ps(c.lo, op(x, y)));
  v = _mm512_min_ps(c.qhi, _mm512_max_ps(c.qlo, _mm512_mul_ps(v, c.inv)));
  _mm_mask_storeu_epi8(po, m, _mm512_cvtusepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), c.zo)));
}
template <class Op>
[[ETRT_TARGET_AVX512]] inline void binary_bytes_avx512(MixedOperand a, MixedOperand b, int64_t inner, Op op,
                                                        OutGrid out, uint8_t* ob, float o_zero, int64_t e0,
                                                        int64_t e1) {
  const BytesAvx512 c{_mm512_set1_ps(a.zero),  _mm512_set1_ps(a.scale), _mm512_set1_ps(b.zero),
                      _mm512_set1_ps(b.scale), _mm512_set1_ps(out.lo),  _mm512_set1_ps(out.hi),
                      _mm512_set1_ps(out.inv), _mm512_set1_ps(out.qlo), _mm512_set1_ps(out.qhi),
                      _mm512_set1_epi32(static_cast<int32_t>(o_zero))};
  for (int64_t e = e0; e < e1;) {
    const int64_t j0 = e % inner, end = std::min(e1, e - j0 + inner);  // this row's part of [e0, e1)
    const uint8_t* pa = a.b + (a.row ? j0 - e : 0);  // operand index = element + offset
    const uint8_t* pb = b.b + (b.row ? j0 - e : 0);
    int64_t i = e;
    for (; i + 16 <= end; i += 16) binary_bytes16(c, op, pa + i, pb + i, ob + i, 0xFFFF);
    if (i < end) binary_bytes16(c, op, pa + i, pb + i, ob + i, static_cast<__mmask16>((1u << (end - i)) - 1));
    e = end;
  }
}
#pragma GCC diagnostic pop
#endif

/// o = op(a, b) over `rows` rows of `inner` elements, clamped and rounded onto the output's grid (`out`): stored as
/// the grid's bytes (byte zero o_zero) at ob, or as the grid's floats at of. The results are the float path's
/// (fast::binary with its OutGrid) on the values the bytes stand for.
template <class Op>
inline void binary_mixed(MixedOperand a, MixedOperand b, int64_t rows, int64_t inner, Op op, const OutGrid& out,
                         float* of, uint8_t* ob, float o_zero) {
  // By value: a byte store may alias anything, so what a reference reaches would be reloaded after every one.
  const auto finish = [out, o_zero](auto v) ETRT_ISA_INLINE {
    return kernels::vec::round_small(kernels::vec::clamped(kernels::vec::clamped(v, out.lo, out.hi) * out.inv,
                                                           out.qlo, out.qhi));
  };
  const int64_t n = rows * inner;
  kernels::parallel_elements(n, 1, [&, a, b, of, ob](int64_t e0, int64_t e1) {
#ifdef ETRT_ISA_X86
    if (a.b && b.b && ob && kernels::isa::level() >= kernels::isa::kAvx512)
      return binary_bytes_avx512(a, b, inner, op, out, ob, o_zero, e0, e1);
#endif
    const float scale = out.scale;
    kernels::isa::dispatch_lanes([&, a, b, of, ob, op, finish, inner, o_zero, scale]<int L>() ETRT_ISA_INLINE {
      using V = kernels::vec::Vec<L>;
      for (int64_t e = e0; e < e1;) {
        const int64_t j0 = e % inner, end = std::min(e1, e - j0 + inner);  // this row's part of [e0, e1)
        const int64_t ia = a.row ? j0 - e : 0, ib = b.row ? j0 - e : 0;    // operand index = element + offset
        int64_t i = e;
        for (; i + L <= end; i += L) {
          const V q = finish(op(a.template load<L>(i + ia), b.template load<L>(i + ib)));
          if (ob) kernels::vec::store_bytes<L>(ob + i, q + o_zero);
          else kernels::vec::store(of + i, q * scale);
        }
        for (; i < end; ++i) {
          const float q = finish(op(a.load1(i + ia), b.load1(i + ib)));
          if (ob) ob[i] = q == q ? static_cast<uint8_t>(q + o_zero) : uint8_t{255};  // NaN: no byte stands for it
          else of[i] = q * scale;
        }
        e = end;
      }
    });
  });
}

}  // namespace etrt::xnnpack::fast
