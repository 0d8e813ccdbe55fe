// Data-movement helpers shared by the shape, index and embedding kernels.
//
// Note [strided views]: every copy-style op is phrased as "copy view S into view D", where a view is a base pointer
// plus sizes and element strides (possibly 0 for broadcast, negative for flip, or more dims than a tensor has, as in
// repeat and pixel_shuffle). copy_views drops size-1 dims, orders dims by the destination's strides, merges dims that
// are contiguous in both views and runs the innermost dim as a memcpy or a tight loop over 1/2/4/8-byte words, so
// the element type never matters for pure movement.
#pragma once

#include <cstring>
#include <optional>

#include "etrt/core/tensor_copy.h"
#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/broadcast.h"
#include "etrt/kernels/util/dtype_util.h"

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
