// Data-movement helpers shared by the shape, index and embedding kernels.
//
// Note [strided views]: every copy-style op is phrased as "copy view S into view D", where a view is a base pointer
// plus sizes and element strides (possibly 0 for broadcast, negative for flip, or more dims than a tensor has, as in
// repeat and pixel_shuffle). copy_views drops size-1 dims, orders dims by the destination's strides, merges dims that
// are contiguous in both views and runs the innermost dim as a memcpy or a tight loop over 1/2/4/8-byte words, so
// the element type never matters for pure movement.
//
// Note [blocked transpose]: when the destination's innermost dim is strided in the source and another dim is the
// source's contiguous one (NCHW <-> NHWC, which every XNNPACK-lowered CNN runs on its input and outputs), the
// element loop would read one element per source cache line and, on a tensor larger than the cache, fetch each
// line once per element in it. copy_views then copies 8 x 8 blocks instead: eight source rows of eight elements
// read contiguously, transposed in registers (4-byte elements: three rounds of shuffles), written as eight
// contiguous destination rows; edges and other element sizes go element by element within 16 x 16 blocks. Large
// copies split their blocks across threads.
#pragma once

#include <algorithm>
#include <cstring>
#include <optional>

#include "etrt/core/tensor_copy.h"
#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/broadcast.h"
#include "etrt/kernels/util/dtype_util.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/parallel.h"

#ifdef ETRT_ISA_X86
#include <immintrin.h>
#endif

namespace etrt::kernels::mv {

inline constexpr int kMaxViewDims = 2 * kMaxDims + 2;

struct View {
  char* data = nullptr;
  int rank = 0;
  std::array<int64_t, kMaxViewDims> sizes{};
  std::array<int64_t, kMaxViewDims> strides{};  // elements
  void push(int64_t size, int64_t stride) {
    sizes[rank] = size;
    strides[rank] = stride;
    ++rank;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= sizes[i];
    return n;
  }
};

inline View view_of(const Tensor& t) {
  View v;
  v.data = static_cast<char*>(t.data());
  for (int i = 0; i < t.dim(); ++i) v.push(t.size(i), t.stride(i));
  return v;
}

/// A view of the storage at `data` with `sizes` and row-major contiguous strides.
inline View contiguous_view(void* data, std::span<const int64_t> sizes) {
  View v;
  v.data = static_cast<char*>(data);
  int64_t s = 1;
  v.rank = static_cast<int>(sizes.size());
  for (int i = v.rank - 1; i >= 0; --i) {
    v.sizes[i] = sizes[i];
    v.strides[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  return v;
}
/// The same over `t`'s storage (t must be densely laid out).
inline View contiguous_view(const Tensor& t, std::span<const int64_t> sizes) { return contiguous_view(t.data(), sizes); }

namespace detail {
template <class U>
inline void copy_loop(char* dbase, const char* sbase, int rank, const int64_t* sizes, const int64_t* ds,
                      const int64_t* ss) {
  U* d0 = reinterpret_cast<U*>(dbase);
  const U* s0 = reinterpret_cast<const U*>(sbase);
  if (rank == 0) {
    *d0 = *s0;
    return;
  }
  const int last = rank - 1;
  const int64_t n = sizes[last], dsl = ds[last], ssl = ss[last];
  std::array<int64_t, kMaxViewDims> idx{};
  int64_t doff = 0, soff = 0;
  while (true) {
    U* d = d0 + doff;
    const U* s = s0 + soff;
    if (dsl == 1 && ssl == 1) {
      std::memmove(d, s, static_cast<size_t>(n) * sizeof(U));
    } else if (ssl == 0) {
      const U v = *s;
      for (int64_t i = 0; i < n; ++i) d[i * dsl] = v;
    } else if (dsl == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = s[i * ssl];
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * dsl] = s[i * ssl];
    }
    if (!advance_offsets(last, sizes, idx.data(), ds, doff, ss, soff)) return;
  }
}

/// d[i][j] = s[j][i] for an 8 x 8 block of 4-byte words: s row j at s + j * ss, d row i at d + i * ds.
[[gnu::always_inline]] inline void transpose_8x8(uint32_t* d, int64_t ds, const uint32_t* s, int64_t ss) {
  typedef uint32_t V __attribute__((vector_size(32)));
  V r[8], t[8], u[8];
  for (int j = 0; j < 8; ++j) std::memcpy(&r[j], s + j * ss, sizeof(V));
  for (int j = 0; j < 8; j += 2) {  // pairs of rows interleaved: (r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] ...)
    t[j] = __builtin_shufflevector(r[j], r[j + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[j + 1] = __builtin_shufflevector(r[j], r[j + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int j = 0; j < 8; j += 4)  // pairs of pairs: four rows' elements 0, 4 / 1, 5 / 2, 6 / 3, 7
    for (int h = 0; h < 2; ++h) {
      u[j + 2 * h] = __builtin_shufflevector(t[j + h], t[j + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[j + 2 * h + 1] = __builtin_shufflevector(t[j + h], t[j + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int i = 0; i < 4; ++i) {  // rows 0-3 and 4-7 of the block joined: columns i and i + 4
    const V lo = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    const V hi = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    std::memcpy(d + i * ds, &lo, sizeof(V));
    std::memcpy(d + (i + 4) * ds, &hi, sizeof(V));
  }
}

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593: the AVX-512 intrinsics' self-initialised "undefined" vectors
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// The permute indices of a 3-plane interleave, Lanes rows a block: output element e (0 .. 3 Lanes - 1) is plane
/// e % 3's row e / 3, and vector v holds e = Lanes v .. Lanes v + Lanes - 1. pick[v] selects plane 0 (index row) or
/// plane 1 (Lanes + row) of a two-register permute for the lanes that take them; third[v] and bit l of
/// from_third[v] put plane 2's row in the rest.
template <int Lanes, class T>
inline void interleave3_indices(T (&pick)[3][Lanes], T (&third)[3][Lanes], uint64_t (&from_third)[3]) {
  for (int v = 0; v < 3; ++v) {
    from_third[v] = 0;
    for (int l = 0; l < Lanes; ++l) {
      const int e = Lanes * v + l, plane = e % 3, row = e / 3;
      pick[v][l] = static_cast<T>(plane == 1 ? Lanes + row : row);
      third[v][l] = static_cast<T>(row);
      if (plane == 2) from_third[v] |= uint64_t{1} << l;
    }
  }
}

/// d[3 r + c] = s[r + c * scs] for c < 3, rows [r0, r1) 16 at a time: an RGB image's planes interleaved into NHWC,
/// which every XNNPACK-lowered vision model runs on its input. Three loads, two permutes per output vector (one
/// picking each lane's R or G, one putting B in its lanes), three stores: the element loop took 0.2 ns an element,
/// as long as mobilenet_v2_q8's 3-channel stem layer. Returns the first row not done.
[[ETRT_TARGET_AVX512]] inline int64_t interleave3_avx512(uint32_t* d, const uint32_t* s, int64_t r0, int64_t r1,
                                                         int64_t scs) {
  alignas(64) int32_t rg[3][16], b[3][16];
  uint64_t from_b_bits[3];
  interleave3_indices(rg, b, from_b_bits);
  const __mmask16 from_b[3] = {static_cast<__mmask16>(from_b_bits[0]), static_cast<__mmask16>(from_b_bits[1]),
                               static_cast<__mmask16>(from_b_bits[2])};
  const __m512i rg0 = _mm512_load_si512(rg[0]), rg1 = _mm512_load_si512(rg[1]), rg2 = _mm512_load_si512(rg[2]);
  const __m512i b0 = _mm512_load_si512(b[0]), b1 = _mm512_load_si512(b[1]), b2 = _mm512_load_si512(b[2]);
  int64_t r = r0;
  for (; r + 16 <= r1; r += 16) {
    const __m512i x = _mm512_loadu_si512(s + r), y = _mm512_loadu_si512(s + r + scs),
                  z = _mm512_loadu_si512(s + r + 2 * scs);
    uint32_t* o = d + 3 * r;
    _mm512_storeu_si512(o, _mm512_mask_permutexvar_epi32(_mm512_permutex2var_epi32(x, rg0, y), from_b[0], b0, z));
    _mm512_storeu_si512(o + 16,
                        _mm512_mask_permutexvar_epi32(_mm512_permutex2var_epi32(x, rg1, y), from_b[1], b1, z));
    _mm512_storeu_si512(o + 32,
                        _mm512_mask_permutexvar_epi32(_mm512_permutex2var_epi32(x, rg2, y), from_b[2], b2, z));
  }
  return r;
}
/// interleave3_avx512 for bytes, 64 rows at a time, on AVX-512 VBMI's byte permutes (a quantized model's input
/// turned into bytes before its NCHW -> NHWC transpose).
[[gnu::target("avx512f,avx512bw,avx512vbmi")]] inline int64_t interleave3_vbmi(uint8_t* d, const uint8_t* s, int64_t r0,
                                                                             int64_t r1, int64_t scs) {
  alignas(64) uint8_t xy[3][64], z[3][64];
  uint64_t from_z[3];
  interleave3_indices(xy, z, from_z);
  const __m512i xy0 = _mm512_load_si512(xy[0]), xy1 = _mm512_load_si512(xy[1]), xy2 = _mm512_load_si512(xy[2]);
  const __m512i z0 = _mm512_load_si512(z[0]), z1 = _mm512_load_si512(z[1]), z2 = _mm512_load_si512(z[2]);
  int64_t r = r0;
  for (; r + 64 <= r1; r += 64) {
    const __m512i a = _mm512_loadu_si512(s + r), b = _mm512_loadu_si512(s + r + scs),
                  c = _mm512_loadu_si512(s + r + 2 * scs);
    uint8_t* o = d + 3 * r;
    _mm512_storeu_si512(o, _mm512_mask_permutexvar_epi8(_mm512_permutex2var_epi8(a, xy0, b), from_z[0], z0, c));
    _mm512_storeu_si512(o + 64, _mm512_mask_permutexvar_epi8(_mm512_permutex2var_epi8(a, xy1, b), from_z[1], z1, c));
    _mm512_storeu_si512(o + 128, _mm512_mask_permutexvar_epi8(_mm512_permutex2var_epi8(a, xy2, b), from_z[2], z2, c));
  }
  return r;
}
#pragma GCC diagnostic pop
#endif

/// d[r * drs + c] = s[r + c * scs] for r < rows, c < cols (Note [blocked transpose]), rows [r0, r1) of them. Columns
/// outermost, 16 at a time: the source's elements of 16 columns are read once, and each destination row gets whole
/// 64-byte lines.
template <class U>
[[gnu::always_inline]] inline void transpose_rows(U* d, const U* s, int64_t r0, int64_t r1, int64_t cols, int64_t drs,
                                                  int64_t scs) {
  constexpr int64_t B = 16;
  if (cols < 8 && drs == cols) {  // a few interleaved columns (an RGB image's NCHW -> NHWC): each a fixed-size loop
    const auto interleave = [&]<int Cols>() ETRT_ISA_INLINE {
      int64_t start = r0;
#ifdef ETRT_ISA_X86
      if constexpr (Cols == 3 && sizeof(U) == 4)
        if (isa::level() >= isa::kAvx512)
          start = interleave3_avx512(reinterpret_cast<uint32_t*>(d), reinterpret_cast<const uint32_t*>(s), r0, r1,
                                     scs);
      if constexpr (Cols == 3 && sizeof(U) == 1)
        if (isa::avx512_vbmi())
          start = interleave3_vbmi(reinterpret_cast<uint8_t*>(d), reinterpret_cast<const uint8_t*>(s), r0, r1, scs);
#endif
      for (int64_t r = start; r < r1; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < Cols; ++c) d[r * Cols + c] = s[r + c * scs];
    };
    switch (cols) {
      case 2: return interleave.template operator()<2>();
      case 3: return interleave.template operator()<3>();
      case 4: return interleave.template operator()<4>();
      default: break;
    }
  }
  int64_t rv = r0;  // rows [r0, rv) go in 8 x 8 blocks
  if constexpr (sizeof(U) == 4) {
    rv = r0 + (r1 - r0) / 8 * 8;
    const int64_t cv = cols / 8 * 8;
    for (int64_t c0 = 0; c0 < cv; c0 += B)
      for (int64_t r = r0; r < rv; r += 8)
        for (int64_t c = c0; c < std::min(c0 + B, cv); c += 8)
          transpose_8x8(reinterpret_cast<uint32_t*>(d + r * drs + c), drs,
                        reinterpret_cast<const uint32_t*>(s + r + c * scs), scs);
    for (int64_t r = r0; r < rv; ++r)
      for (int64_t c = cv; c < cols; ++c) d[r * drs + c] = s[r + c * scs];
  }
  for (int64_t cb = 0; cb < cols; cb += B)
    for (int64_t r = rv; r < r1; ++r)
      for (int64_t c = cb; c < std::min(cb + B, cols); ++c) d[r * drs + c] = s[r + c * scs];
}

template <class U>
inline void transpose_2d(U* d, const U* s, int64_t rows, int64_t cols, int64_t drs, int64_t scs) {
  const auto run = [&](int64_t r0, int64_t r1) {
    isa::dispatch_avx2([&]() ETRT_ISA_INLINE { transpose_rows(d, s, r0, r1, cols, drs, scs); });
  };
  // Split across threads on a pool (the XNNPACK delegate's), or where starting a thread costs little against the
  // copy (4 MB and up).
  const int64_t n = rows * cols;
  const bool split = rows >= 16 && (n >= (int64_t{1} << 20) || (n >= (int64_t{1} << 16) && kernels::detail::current_pool()));
  if (split) parallel_for(rows, 8, run);
  else run(0, rows);
}

/// copy_loop for a copy whose innermost destination dim (w - 1) is strided in the source while dim t is the
/// source's contiguous one: a 2-D transpose per index of the other dims (Note [blocked transpose]).
template <class U>
inline void transpose_loop(char* dbase, const char* sbase, int w, int t, const int64_t* sizes, const int64_t* ds,
                           const int64_t* ss) {
  std::array<int64_t, kMaxViewDims> osz{}, ods{}, oss{}, idx{};
  int o = 0;
  for (int i = 0; i < w - 1; ++i)
    if (i != t) osz[o] = sizes[i], ods[o] = ds[i], oss[o] = ss[i], ++o;
  int64_t doff = 0, soff = 0;
  while (true) {
    transpose_2d(reinterpret_cast<U*>(dbase) + doff, reinterpret_cast<const U*>(sbase) + soff, sizes[t], sizes[w - 1],
                 ds[t], ss[w - 1]);
    if (!advance_offsets(o, osz.data(), idx.data(), ods.data(), doff, oss.data(), soff)) return;
  }
}

}  // namespace detail

/// Copies src into dst (same sizes, rank <= kMaxViewDims); `esize` is the element size in bytes.
inline void copy_views(size_t esize, const View& dst, const View& src) {
  std::array<int64_t, kMaxViewDims> sz{}, ds{}, ss{};
  int r = 0;
  for (int i = 0; i < dst.rank; ++i) {
    if (dst.sizes[i] == 0) return;
    if (dst.sizes[i] == 1) continue;
    sz[r] = dst.sizes[i];
    ds[r] = dst.strides[i];
    ss[r] = src.strides[i];
    ++r;
  }
  // Order dims by |dst stride| descending (stable), so writes go forward through memory.
  for (int i = 1; i < r; ++i) {
    for (int j = i; j > 0 && std::abs(ds[j - 1]) < std::abs(ds[j]); --j) {
      std::swap(sz[j - 1], sz[j]);
      std::swap(ds[j - 1], ds[j]);
      std::swap(ss[j - 1], ss[j]);
    }
  }
  // Merge an outer dim into the next inner one when both views are contiguous across them.
  int w = 0;
  for (int i = 0; i < r; ++i) {
    if (w > 0 && ds[w - 1] == ds[i] * sz[i] && ss[w - 1] == ss[i] * sz[i]) {
      sz[w - 1] *= sz[i];
      ds[w - 1] = ds[i];
      ss[w - 1] = ss[i];
    } else {
      sz[w] = sz[i];
      ds[w] = ds[i];
      ss[w] = ss[i];
      ++w;
    }
  }
  // A transpose (Note [blocked transpose]): the destination's inner dim strided in the source, and another dim of at
  // least 8 the source's contiguous one.
  if (w >= 2 && ds[w - 1] == 1 && ss[w - 1] > 1 && (esize == 4 || esize == 8 || esize == 2 || esize == 1)) {
    int t = -1;
    for (int i = 0; i < w - 1; ++i)
      if (ss[i] == 1 && ds[i] > 0 && sz[i] >= 8) t = i;
    if (t >= 0) {
      switch (esize) {
        case 1: return detail::transpose_loop<uint8_t>(dst.data, src.data, w, t, sz.data(), ds.data(), ss.data());
        case 2: return detail::transpose_loop<uint16_t>(dst.data, src.data, w, t, sz.data(), ds.data(), ss.data());
        case 4: return detail::transpose_loop<uint32_t>(dst.data, src.data, w, t, sz.data(), ds.data(), ss.data());
        default: return detail::transpose_loop<uint64_t>(dst.data, src.data, w, t, sz.data(), ds.data(), ss.data());
      }
    }
  }
  switch (esize) {
    case 1: detail::copy_loop<uint8_t>(dst.data, src.data, w, sz.data(), ds.data(), ss.data()); break;
    case 2: detail::copy_loop<uint16_t>(dst.data, src.data, w, sz.data(), ds.data(), ss.data()); break;
    case 4: detail::copy_loop<uint32_t>(dst.data, src.data, w, sz.data(), ds.data(), ss.data()); break;
    case 8: detail::copy_loop<uint64_t>(dst.data, src.data, w, sz.data(), ds.data(), ss.data()); break;
    default:  // 16-byte complex: copy two 8-byte halves
    {
      std::array<int64_t, kMaxViewDims> ds2{}, ss2{}, sz2{};
      for (int i = 0; i < w; ++i) {
        sz2[i] = sz[i];
        ds2[i] = ds[i] * 2;
        ss2[i] = ss[i] * 2;
      }
      sz2[w] = 2;
      ds2[w] = 1;
      ss2[w] = 1;
      detail::copy_loop<uint64_t>(dst.data, src.data, w + 1, sz2.data(), ds2.data(), ss2.data());
    }
  }
}

/// Calls f(offset) for every element of a view in row-major order (offsets in elements).
template <class F>
inline void for_each_view_offset(const View& v, F&& f) {
  for (int i = 0; i < v.rank; ++i)
    if (v.sizes[i] == 0) return;
  std::array<int64_t, kMaxViewDims> idx{};
  int64_t off = 0;
  while (true) {
    f(off);
    int k = v.rank - 1;
    for (; k >= 0; --k) {
      ++idx[k];
      off += v.strides[k];
      if (idx[k] < v.sizes[k]) break;
      off -= v.strides[k] * v.sizes[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

/// Copies `in` into `out` element by element in logical (row-major) order; the shapes may differ but the counts
/// must match (view_copy, flattening roll).
inline void copy_logical(const Tensor& out, const Tensor& in) {
  const size_t es = element_size(out.dtype());
  if (in.is_contiguous_order()) return copy_views(es, view_of(out), contiguous_view(in, out.sizes()));
  if (out.is_contiguous_order()) return copy_views(es, contiguous_view(out, in.sizes()), view_of(in));
  // Both permuted: walk both in logical order.
  const View vo = view_of(out), vi = view_of(in);
  std::vector<int64_t> offs;
  offs.reserve(static_cast<size_t>(in.numel()));
  for_each_view_offset(vi, [&](int64_t o) { offs.push_back(o); });
  size_t k = 0;
  char* od = vo.data;
  const char* id = vi.data;
  for_each_view_offset(vo, [&](int64_t o) {
    std::memmove(od + o * static_cast<int64_t>(es), id + offs[k++] * static_cast<int64_t>(es), es);
  });
}

/// Copies with dtype conversion: dst (dtype dt) <- src (dtype st), same sizes.
template <class Dtypes>
inline Status convert_views(std::string_view op, const View& dst, ScalarType dt, const View& src, ScalarType st) {
  if (dt == st) {
    copy_views(element_size(dt), dst, src);
    return {};
  }
  return visit(dt, Dtypes{}, op, [&]<class T>() -> Status {
    const LoadFn<T> load = loader_for<T>(st);
    if (!load) return fail(Error::InvalidArgument, op, ": unsupported input dtype ", name(st));
    std::vector<int64_t> soffs;
    soffs.reserve(static_cast<size_t>(src.numel()));
    for_each_view_offset(src, [&](int64_t o) { soffs.push_back(o); });
    size_t k = 0;
    T* d = reinterpret_cast<T*>(dst.data);
    for_each_view_offset(dst, [&](int64_t o) { d[o] = load(src.data, soffs[k++]); });
    return Status{};
  });
}

/// Wraps a possibly negative dim into [0, rank); rank 0 accepts -1 and 0 (like torch).
inline Result<int> wrap_dim(std::string_view op, int64_t dim, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    return fail(Error::InvalidArgument, op, ": dim ", dim, " is out of range, expected [", -r, ", ", r - 1, "]");
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

/// Checks that `t` has out's dtype and that the dtype is in the op's list.
template <class Dtypes>
inline Status check_dtype(std::string_view op, const Tensor& in, const Tensor& out) {
  if (!contains(Dtypes{}, out.dtype())) return fail(Error::InvalidArgument, op, ": unsupported dtype ", name(out.dtype()));
  if (in.dtype() != out.dtype())
    return fail(Error::InvalidArgument, op, ": input dtype ", name(in.dtype()), " != output dtype ",
                name(out.dtype()));
  return {};
}

/// pixel_shuffle's and pixel_unshuffle's first checks; `what` names the factor `r`.
template <class Dtypes>
inline Status check_pixel_args(std::string_view op, const Tensor& self, const Tensor& out, int64_t r,
                               std::string_view what) {
  ETRT_CHECK_OK(check_dtype<Dtypes>(op, self, out));
  if (self.dim() < 3) return fail(Error::InvalidArgument, op, ": expected a tensor of rank >= 3, got ", self.describe());
  if (r <= 0) return fail(Error::InvalidArgument, op, ": ", what, " must be positive, got ", r);
  return {};
}

/// pixel_shuffle's element correspondence (pixel_unshuffle's reversed) as two views over the same positions:
/// packed[..., c*r*r + i*r + j, h, w] is spread[..., c, h*r + i, w*r + j].
inline std::pair<View, View> pixel_views(const Tensor& packed, const Tensor& spread, int64_t r) {
  const int rk = packed.dim();
  View p, s;
  p.data = static_cast<char*>(packed.data());
  s.data = static_cast<char*>(spread.data());
  for (int i = 0; i < rk - 3; ++i) {
    p.push(packed.size(i), packed.stride(i));
    s.push(spread.size(i), spread.stride(i));
  }
  const int64_t C = spread.size(rk - 3), H = packed.size(rk - 2), W = packed.size(rk - 1);
  const int64_t pc = packed.stride(rk - 3), ph = packed.stride(rk - 2), pw = packed.stride(rk - 1);
  const int64_t sc = spread.stride(rk - 3), sh = spread.stride(rk - 2), sw = spread.stride(rk - 1);
  p.push(C, pc * r * r); s.push(C, sc);
  p.push(H, ph);         s.push(H, sh * r);
  p.push(r, pc * r);     s.push(r, sh);
  p.push(W, pw);         s.push(W, sw * r);
  p.push(r, pc);         s.push(r, sw);
  return {p, s};
}

/// Reads an integer index tensor (Long or Int) element at flat offset `off`.
inline int64_t read_index(const Tensor& t, int64_t off) {
  return t.dtype() == ScalarType::Long ? t.data_as<int64_t>()[off] : t.data_as<int32_t>()[off];
}

inline Status check_index_dtype(std::string_view op, const Tensor& t, std::string_view what) {
  if (t.dtype() != ScalarType::Long && t.dtype() != ScalarType::Int)
    return fail(Error::InvalidArgument, op, ": ", what, " must be Long or Int, got ", name(t.dtype()));
  return {};
}

/// Fills a dense tensor with a Scalar converted to its dtype.
template <class Dtypes>
inline Status fill_scalar(std::string_view op, Tensor& t, const Scalar& value) {
  return visit(t.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T v = convert<T>(scalar_as<compute_t<T>>(value));
    T* p = t.data_as<T>();
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) p[i] = v;
    return Status{};
  });
}

}  // namespace etrt::kernels::mv
