// Winograd convolution for 3x3, stride-1, undilated, ungrouped convolutions on NHWC float activations: the same
// output as the direct GEMM of the windows (nhwc_conv.h) with 2.25x (F(2x2, 3x3)) or 4x (F(4x4, 3x3)) fewer
// multiplies.
//
// Note [winograd]: the output is cut into m x m tiles, each computed from the (m + 2) x (m + 2) input patch around
// it (a = m + 2). Per tile and channel, the patch d becomes V = B^T d B, the filter g (prepared once, at load)
// U = G g G^T, and the tile Y = A^T (sum over channels of U . V) A, the product elementwise. The sum over channels
// is, for each of the a * a positions of V, a GEMM of (tiles x C) by (C x O), run on the packed GEMM's kernels
// (packed_gemm.h) with the a * a filter matrices packed at load. A call runs in chunks of tiles, each in three
// parallel phases over scratch planned at load (chunk_floats): the input transform, tile by tile, into a * a
// matrices V (tile rows, channels contiguous); the a * a GEMMs into matrices M of the same shape; the output
// transform, tile by tile, adding the bias, clamping and running the epilogue's finish as it writes each row of a
// tile. Channels are contiguous in NHWC, so every transform runs on whole vector registers of channels; the
// transforms' constant matrices are applied term by term (matrix_row), so zero entries cost nothing and +-1 no
// multiply (a compiler may not drop x * 0 or 0 + x of floats by itself: NaN and signed zeros).
//
// Rounding: F(2x2, 3x3)'s matrices hold 0, +-1 and 1/2, and its results stay within a few ulp of the direct
// product's. F(4x4, 3x3) interpolates at 0, +-1, +-2 (its matrices hold 4, 5, 8 and 1/6, 1/24) and loses about a
// decimal digit: on random data of 16-1024 channels its largest error was 1.4e-5 of the output's largest magnitude
// (F(2x2): 7e-7; tests: kernel_tests "[winograd]" bound them by 4e-5 and 4e-6). plan() picks it only where a layer is large enough for the saving to matter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "etrt/core/aligned_buffer.h"
#include "etrt/core/result.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/nhwc_conv.h"
#include "etrt/kernels/util/packed_gemm.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/vec.h"

namespace etrt::kernels::winograd {

/// F(2x2, 3x3): points 0, 1, -1 and infinity.
struct F2 {
  static constexpr int m = 2, a = 4;
  static constexpr float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static constexpr float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};

/// F(4x4, 3x3): points 0, 1, -1, 2, -2 and infinity.
struct F4 {
  static constexpr int m = 4, a = 6;
  static constexpr float BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                     {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  static constexpr float AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

/// Which transform a convolution runs (m: its output tile; 0 = none: the direct GEMM) and how many tiles a pass
/// takes (the scratch it needs: chunk_floats).
struct Plan {
  int m = 0;
  int64_t chunk = 0;
  bool active() const { return m != 0; }
  int a() const { return m + 2; }
};

/// Bytes of V and M one pass may hold: about the L2 of the cores that share them, so the GEMMs read V and the
/// output transform reads M from cache.
inline constexpr int64_t kChunkBytes = int64_t{3} << 20;

/// The shape the transform needs: a 3x3 window, stride 1, no dilation (groups are the caller's to exclude).
inline bool fits(const nhwc::Geometry& g) {
  return g.KH == 3 && g.KW == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
}

inline int64_t tiles(const nhwc::Geometry& g, int m) { return g.N * ((g.OH + m - 1) / m) * ((g.OW + m - 1) / m); }

/// Note [winograd plan]: where each transform pays, measured against this project's direct GEMM on 2 threads with
/// AVX-512 (F(4x4) / F(2x2) speed-ups; resnet18's 56x56x64 layer 2.5 / 1.6, its 7x7x512 one 0.8 / 1.5):
///   - a pass runs three parallel regions, so a small layer (under 4M multiply-adds direct: 8x8 pixels of 64
///     channels) stays direct;
///   - the transforms cost per tile and channel, which the GEMM's saving covers from 16 channels for F(4x4)
///     (2x2 tiles save too little: 56x56x16 gained nothing) and from 32 for F(2x2);
///   - the a * a filter matrices are (a / 3)^2 the filter's bytes and are read once per pass, so a transform needs
///     16 tiles or more per pass: F(4x4) for 13x13 outputs and up, F(2x2) down to 7x7, and for very wide layers
///     (1024 channels, whose passes hold fewer tiles) F(2x2).
/// max_m caps the output tile (4, 2, or 0: none).
inline Plan plan(const nhwc::Geometry& g, int max_m = 4) {
  if (max_m < 2 || !fits(g) || !g.valid() || g.N < 1 || g.C < 16 || g.O < 16) return {};
  // In double: a payload's sizes are each below 2^31, their product is not (and no such layer fits in memory).
  const double macs = static_cast<double>(g.N) * g.OH * g.OW * 9.0 * g.C * g.O;
  if (macs < double(int64_t{4} << 20) || macs > 1e18 || static_cast<double>(g.N) * g.OH * g.OW > 1e12) return {};
  // The most tiles a pass may hold, then passes of equal size: 196 tiles in passes of at most 170 run as two of
  // 98, not 170 and a 26-tile rest.
  const auto most = [&](int m) { return std::min(tiles(g, m), kChunkBytes / ((m + 2) * (m + 2) * (g.C + g.O) * 4)); };
  const auto pass = [&](int m) {
    const int64_t n = tiles(g, m), passes = (n + most(m) - 1) / most(m);
    return Plan{m, (n + passes - 1) / passes};
  };
  if (max_m >= 4 && most(4) >= 16) return pass(4);
  if (most(2) >= 16 && g.C >= 32 && g.O >= 32) return pass(2);
  return {};
}

/// Floats of scratch a call takes: the V and M matrices of one pass.
inline uint64_t chunk_floats(const Plan& p, int64_t C, int64_t O) {
  const auto a = static_cast<uint64_t>(p.a());
  return a * a * static_cast<uint64_t>(p.chunk) * static_cast<uint64_t>(C + O);
}

/// Floats the a * a packed filter matrices take.
inline uint64_t filter_floats(const Plan& p, int64_t C, int64_t O) {
  const auto a = static_cast<uint64_t>(p.a());
  return a * a * gemm::packed_b_floats(C, O);
}

/// A filter prepared for a plan: the a * a matrices U (C x O) packed for the GEMM.
struct Filter {
  Plan plan;
  int64_t C = 0, O = 0;
  std::vector<gemm::PackedB> u;
  bool active() const { return plan.active(); }
};

namespace detail {

template <size_t N, class F>
[[gnu::always_inline]] inline void static_for(F&& f) {
  [&]<size_t... I>(std::index_sequence<I...>) ETRT_ISA_INLINE { (f(std::integral_constant<size_t, I>{}), ...); }(
      std::make_index_sequence<N>{});
}

/// out = sum over k of M[R][k] x[k], one term per nonzero entry, without a multiply for +-1 (Note [winograd]).
template <const auto& M, size_t R, class V, size_t K>
[[gnu::always_inline]] inline void matrix_row(const V (&x)[K], V& out) {
  constexpr size_t first = [] {
    size_t k = 0;
    while (M[R][k] == 0) ++k;
    return k;
  }();
  constexpr float c0 = M[R][first];
  if constexpr (c0 == 1) out = x[first];
  else if constexpr (c0 == -1) out = -x[first];
  else out = x[first] * c0;
  static_for<K>([&](auto k) ETRT_ISA_INLINE {
    constexpr float c = k > first ? M[R][k] : 0.f;
    if constexpr (c == 1) out += x[k];
    else if constexpr (c == -1) out -= x[k];
    else if constexpr (c != 0) out += x[k] * c;
  });
}

/// The channels [c, c + lanes of V) of one tile's patch (px: a * a pixels, null for padding) into V's a * a
/// matrices (element e at dst + e * es).
template <class T, class V>
[[gnu::always_inline]] inline void input_tile(const float* const* px, int64_t c, float* dst, int64_t es) {
  constexpr int a = T::a;
  V d[a][a], t[a][a];
  for (int i = 0; i < a; ++i)
    for (int j = 0; j < a; ++j) {
      if (px[i * a + j]) vec::load(d[i][j], px[i * a + j] + c);
      else d[i][j] = V{};
    }
  static_for<a>([&](auto j) ETRT_ISA_INLINE {  // t = B^T d, a column at a time
    V col[a];
    for (int i = 0; i < a; ++i) col[i] = d[i][j];
    static_for<a>([&](auto i) ETRT_ISA_INLINE { matrix_row<T::BT, i>(col, t[i][j]); });
  });
  static_for<a>([&](auto i) ETRT_ISA_INLINE {  // V = t B: row i of t by row j of B^T
    static_for<a>([&](auto j) ETRT_ISA_INLINE {
      V v;
      matrix_row<T::BT, j>(t[i], v);
      vec::store(dst + (i * a + j) * es + c, v);
    });
  });
}

/// The channels [o, o + lanes of V) of one tile's output from M's a * a matrices (element e at src + e * es):
/// Y = A^T M A + bias, clamped, stored at py's pixels (m * m, null outside the output).
template <class T, class V>
[[gnu::always_inline]] inline void output_tile(const float* src, int64_t es, int64_t o, float* const* py,
                                               const gemm::Epilogue& ep, bool clamp) {
  constexpr int a = T::a, m = T::m;
  V t[m][a];
  static_for<a>([&](auto j) ETRT_ISA_INLINE {  // t = A^T M, a column at a time
    V col[a];
    for (int i = 0; i < a; ++i) vec::load(col[i], src + (i * a + j) * es + o);
    static_for<m>([&](auto i) ETRT_ISA_INLINE { matrix_row<T::AT, i>(col, t[i][j]); });
  });
  V bias{};
  if (ep.bias) vec::load(bias, ep.bias + o);
  static_for<m>([&](auto i) ETRT_ISA_INLINE {
    static_for<m>([&](auto j) ETRT_ISA_INLINE {
      if (float* p = py[i * m + j]) {
        V y;
        matrix_row<T::AT, j>(t[i], y);
        y += bias;
        if (clamp) y = vec::clamped(y, ep.lo, ep.hi);
        vec::store(p + o, y);
      }
    });
  });
}

/// The tile of number t: batch n, tile row ty, tile column tx.
struct TileAt {
  int64_t n, ty, tx;
};
inline TileAt tile_at(const nhwc::Geometry& g, int m, int64_t t) {
  const int64_t tw = (g.OW + m - 1) / m, th = (g.OH + m - 1) / m;
  return {t / (th * tw), t / tw % th, t % tw};
}

/// Input transform of tiles [t0 + b, t0 + e) into V (rows tiles, element stride rows * C).
template <class T, int Lanes>
[[gnu::always_inline]] inline void input_tiles(const nhwc::Geometry& g, const float* in, int64_t t0, int64_t b,
                                               int64_t e, int64_t rows, float* v) {
  constexpr int a = T::a, m = T::m;
  const int64_t C = g.C, es = rows * C;
  for (int64_t r = b; r < e; ++r) {
    const TileAt at = tile_at(g, m, t0 + r);
    const float* px[a * a];
    for (int i = 0; i < a; ++i)
      for (int j = 0; j < a; ++j) {
        const int64_t ih = at.ty * m - g.pt + i, iw = at.tx * m - g.pl + j;
        px[i * a + j] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? in + ((at.n * g.H + ih) * g.W + iw) * C : nullptr;
      }
    float* dst = v + r * C;
    int64_t c = 0;
    for (; c + Lanes <= C; c += Lanes) input_tile<T, vec::Vec<Lanes>>(px, c, dst, es);
    if constexpr (Lanes > 8)  // the rest in narrower registers: a 24-channel layer is not a third scalar
      for (; c + 8 <= C; c += 8) input_tile<T, vec::Vec<8>>(px, c, dst, es);
    if constexpr (Lanes > 4)
      for (; c + 4 <= C; c += 4) input_tile<T, vec::Vec<4>>(px, c, dst, es);
    for (; c < C; ++c) input_tile<T, float>(px, c, dst, es);
  }
}

/// Output transform of tiles [t0 + b, t0 + e) from M (rows tiles, element stride rows * O), then ep.finish on each
/// tile row written.
template <class T, int Lanes>
[[gnu::always_inline]] inline void output_tiles(const nhwc::Geometry& g, const float* mb, int64_t t0, int64_t b,
                                                int64_t e, int64_t rows, const gemm::Epilogue& ep, float* out) {
  constexpr int m = T::m;
  const int64_t O = g.O, es = rows * O;
  const bool clamp = ep.clamps();
  for (int64_t r = b; r < e; ++r) {
    const TileAt at = tile_at(g, m, t0 + r);
    const int64_t w = std::min<int64_t>(m, g.OW - at.tx * m);
    float* py[m * m];
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) {
        const int64_t oh = at.ty * m + i, ow = at.tx * m + j;
        py[i * m + j] = oh < g.OH && j < w ? out + ((at.n * g.OH + oh) * g.OW + ow) * O : nullptr;
      }
    const float* src = mb + r * O;
    int64_t o = 0;
    for (; o + Lanes <= O; o += Lanes) output_tile<T, vec::Vec<Lanes>>(src, es, o, py, ep, clamp);
    if constexpr (Lanes > 8)
      for (; o + 8 <= O; o += 8) output_tile<T, vec::Vec<8>>(src, es, o, py, ep, clamp);
    if constexpr (Lanes > 4)
      for (; o + 4 <= O; o += 4) output_tile<T, vec::Vec<4>>(src, es, o, py, ep, clamp);
    for (; o < O; ++o) output_tile<T, float>(src, es, o, py, ep, clamp);
    for (int i = 0; i < m && py[i * m]; ++i) ep.finish_block(py[i * m], 1, w * O, w * O);
  }
}

template <class T>
using InputFn = void (*)(const nhwc::Geometry&, const float*, int64_t, int64_t, int64_t, int64_t, float*);
template <class T>
using OutputFn = void (*)(const nhwc::Geometry&, const float*, int64_t, int64_t, int64_t, int64_t,
                          const gemm::Epilogue&, float*);

#ifdef ETRT_ISA_X86
template <class T>
[[ETRT_TARGET_AVX512]] inline void input_avx512(const nhwc::Geometry& g, const float* in, int64_t t0, int64_t b,
                                                int64_t e, int64_t rows, float* v) {
  input_tiles<T, 16>(g, in, t0, b, e, rows, v);
}
template <class T>
[[ETRT_TARGET_AVX2]] inline void input_avx2(const nhwc::Geometry& g, const float* in, int64_t t0, int64_t b,
                                            int64_t e, int64_t rows, float* v) {
  input_tiles<T, 8>(g, in, t0, b, e, rows, v);
}
template <class T>
[[ETRT_TARGET_AVX512]] inline void output_avx512(const nhwc::Geometry& g, const float* mb, int64_t t0, int64_t b,
                                                 int64_t e, int64_t rows, const gemm::Epilogue& ep, float* out) {
  output_tiles<T, 16>(g, mb, t0, b, e, rows, ep, out);
}
template <class T>
[[ETRT_TARGET_AVX2]] inline void output_avx2(const nhwc::Geometry& g, const float* mb, int64_t t0, int64_t b,
                                             int64_t e, int64_t rows, const gemm::Epilogue& ep, float* out) {
  output_tiles<T, 8>(g, mb, t0, b, e, rows, ep, out);
}
#endif
template <class T>
inline void input_base(const nhwc::Geometry& g, const float* in, int64_t t0, int64_t b, int64_t e, int64_t rows,
                       float* v) {
  input_tiles<T, 4>(g, in, t0, b, e, rows, v);
}
template <class T>
inline void output_base(const nhwc::Geometry& g, const float* mb, int64_t t0, int64_t b, int64_t e, int64_t rows,
                        const gemm::Epilogue& ep, float* out) {
  output_tiles<T, 4>(g, mb, t0, b, e, rows, ep, out);
}

template <class T>
inline std::pair<InputFn<T>, OutputFn<T>> pick() {
#ifdef ETRT_ISA_X86
  const int level = isa::level();
  if (level >= isa::kAvx512) return {&input_avx512<T>, &output_avx512<T>};
  if (level == isa::kAvx2) return {&input_avx2<T>, &output_avx2<T>};
#endif
  return {&input_base<T>, &output_base<T>};
}

/// U's matrices for transform T from an OHWI [O, 3, 3, C] filter: U_e (C x O) for each element e = (xi, nu) of the
/// a x a transformed filter, (G g G^T)[xi][nu] for each (input, output) channel, computed in double.
template <class T>
inline Result<std::vector<gemm::PackedB>> transform_filter(const float* w, int64_t C, int64_t O) {
  constexpr int a = T::a;
  AlignedArray<float> u = make_aligned_array<float>(static_cast<size_t>(C * O));
  if (!u) return fail(Error::MemoryAllocationFailed, "cannot allocate ", C * O * 4, " bytes for a Winograd filter");
  std::vector<gemm::PackedB> out;
  out.reserve(a * a);
  for (int xi = 0; xi < a; ++xi)
    for (int nu = 0; nu < a; ++nu) {
      double coef[3][3];  // G[xi][k] G[nu][l]: the weight of g[k][l] in this element
      for (int k = 0; k < 3; ++k)
        for (int l = 0; l < 3; ++l) coef[k][l] = T::G[xi][k] * T::G[nu][l];
      for (int64_t o = 0; o < O; ++o)
        for (int64_t c = 0; c < C; ++c) {
          double s = 0;
          for (int k = 0; k < 3; ++k)
            for (int l = 0; l < 3; ++l) s += coef[k][l] * w[((o * 3 + k) * 3 + l) * C + c];
          u[c * O + o] = static_cast<float>(s);
        }
      ETRT_TRY(gemm::PackedB b, gemm::pack_b(u.get(), O, 1, C, O));
      out.push_back(std::move(b));
    }
  return out;
}

template <class T>
inline void run(const nhwc::Geometry& g, const float* in, const Filter& f, const gemm::Epilogue& ep, float* out,
                float* scratch) {
  constexpr int a = T::a, m = T::m;
  const auto fns = pick<T>();  // not a structured binding: clang before 16 cannot capture one in a lambda
  const InputFn<T> input_fn = fns.first;
  const OutputFn<T> output_fn = fns.second;
  const int64_t total = tiles(g, m), C = g.C, O = g.O;
  for (int64_t t0 = 0; t0 < total; t0 += f.plan.chunk) {
    const int64_t rows = std::min(f.plan.chunk, total - t0);
    float* v = scratch;
    float* mb = scratch + a * a * rows * C;
    parallel_for(rows, 1, [&](int64_t b, int64_t e) { input_fn(g, in, t0, b, e, rows, v); });
    parallel_for(a * a, 1, [&](int64_t b, int64_t e) {
      for (int64_t el = b; el < e; ++el)
        gemm::packed_gemm_here(rows, f.u[static_cast<size_t>(el)], gemm::Epilogue{}, mb + el * rows * O, O,
                               gemm::MatrixRows{v + el * rows * C, C});
    });
    parallel_for(rows, 1, [&](int64_t b, int64_t e) { output_fn(g, mb, t0, b, e, rows, ep, out); });
  }
}

}  // namespace detail

/// The filter of a convolution that plan() gave `p` for, from its OHWI [O, 3, 3, C] weights.
inline Result<Filter> prepare(const Plan& p, const float* ohwi, int64_t C, int64_t O) {
  Filter f;
  f.plan = p;
  f.C = C;
  f.O = O;
  if (p.m == 4) {
    ETRT_TRY(f.u, detail::transform_filter<F4>(ohwi, C, O));
  } else if (p.m == 2) {
    ETRT_TRY(f.u, detail::transform_filter<F2>(ohwi, C, O));
  }
  return f;
}

/// out = clamp(conv(in, filter) + bias), then ep.finish, for a geometry that fits() with f's channels (the caller
/// checks); scratch holds chunk_floats(f.plan, C, O).
inline void conv(const nhwc::Geometry& g, const float* in, const Filter& f, const gemm::Epilogue& ep, float* out,
                 float* scratch) {
  if (f.plan.m == 4) detail::run<F4>(g, in, f, ep, out, scratch);
  else if (f.plan.m == 2) detail::run<F2>(g, in, f, ep, out, scratch);
}

}  // namespace etrt::kernels::winograd
