// Indexing kernels: index_select, gather, scatter (src / value / add), index.Tensor, index_put (out and in place),
// select_scatter, slice_scatter, nonzero. Pure movement goes through mv::copy_views (Note [strided views]); index
// tensors are Long or Int and every index is bounds-checked before it is used.
#pragma once

#include <vector>

#include "etrt/kernels/ops/shape.h"
#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace index_detail {
inline Status check_index(std::string_view op, int64_t idx, int64_t size, int d) {
  if (idx < -size || idx >= size)
    return fail(Error::InvalidArgument, op, ": index ", idx, " is out of bounds for dim ", d, " with size ", size);
  return {};
}
}  // namespace index_detail

template <class Dtypes>
Status index_select_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  constexpr std::string_view op = "index_select.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_CHECK_OK(mv::check_index_dtype(op, index, "index"));
  if (index.dim() > 1) return fail(Error::InvalidArgument, op, ": index must be 0-D or 1-D, got ", index.describe());
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  const int64_t n = index.numel(), size = self.dim() ? self.size(d) : 1;
  const int64_t ist = index.dim() ? index.stride(0) : 1;
  for (int64_t i = 0; i < n; ++i) ETRT_CHECK_OK(index_detail::check_index(op, mv::read_index(index, i * ist), size, d));
  Shape s = shape_of(self.sizes());
  if (self.dim()) s.sizes[d] = n;
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  const size_t es = element_size(out.dtype());
  for (int64_t i = 0; i < n; ++i) {
    int64_t idx = mv::read_index(index, i * ist);
    if (idx < 0) idx += size;
    mv::copy_views(es, shape_detail::drop_dim(out, d, i), shape_detail::drop_dim(self, d, idx));
  }
  return {};
}

namespace index_detail {
/// Validates gather/scatter shapes: index rank == self rank; index.size(k) <= self.size(k) for k != d, and
/// index.size(k) <= src.size(k) for all k (scatter).
inline Status check_gs(std::string_view op, const Tensor& self, int d, const Tensor& index, const Tensor* src) {
  ETRT_CHECK_OK(mv::check_index_dtype(op, index, "index"));
  if (index.numel() == 0) return {};
  if (std::max(index.dim(), 1) != std::max(self.dim(), 1))
    return fail(Error::InvalidArgument, op, ": index ", index.describe(), " must have the same rank as self ",
                self.describe());
  for (int k = 0; k < index.dim(); ++k) {
    if (k != d && index.size(k) > (self.dim() ? self.size(k) : 1))
      return fail(Error::InvalidArgument, op, ": index ", index.describe(), " is larger than self ", self.describe(),
                  " in dim ", k);
    if (src && index.size(k) > (src->dim() ? src->size(k) : 1))
      return fail(Error::InvalidArgument, op, ": index ", index.describe(), " is larger than src ", src->describe(),
                  " in dim ", k);
  }
  return {};
}

/// Calls f(index_off, elem_off_in_other, target_off) for every index element, where target_off addresses the
/// indexed tensor `t` (stride along d replaced by the index value) and other_off addresses a tensor `o` laid over the
/// index's positions. Fails on an out-of-range index before calling f for it.
template <class F>
inline Status walk_gs(std::string_view op, const Tensor& index, const Tensor& t, int d, const Tensor* o, F&& f) {
  const Shape sh = shape_of(index.sizes());
  std::array<std::array<int64_t, kMaxDims>, 3> st{};
  for (int k = 0; k < index.dim(); ++k) {
    st[0][k] = index.stride(k);
    st[1][k] = o ? (o->dim() ? o->stride(k) : 0) : 0;
    st[2][k] = k == d ? 0 : (t.dim() ? t.stride(k) : 0);
  }
  const int64_t size = t.dim() ? t.size(d) : 1, tstride = t.dim() ? t.stride(d) : 0;
  Status err;
  bool ok = true;
  for_each_offset<3>(sh, st, [&](const std::array<int64_t, 3>& off) {
    if (!ok) return;
    int64_t idx = mv::read_index(index, off[0]);
    if (idx < -size || idx >= size) {
      ok = false;
      err = fail(Error::InvalidArgument, op, ": index ", idx, " is out of bounds for dim ", d, " with size ", size);
      return;
    }
    if (idx < 0) idx += size;
    f(off[1], off[2] + idx * tstride);
  });
  return err;
}

template <class F>
inline void by_size(size_t es, F&& f) {
  switch (es) {
    case 1: f.template operator()<uint8_t>(); break;
    case 2: f.template operator()<uint16_t>(); break;
    case 4: f.template operator()<uint32_t>(); break;
    default: f.template operator()<uint64_t>(); break;
  }
}

/// gather (to[i] = from[index[i]]) or scatter (to[index[i]] = from[i]), moving elements as raw words of to's size.
template <bool Scatter>
inline Status move_gs(std::string_view op, const Tensor& index, const Tensor& from, int d, Tensor& to) {
  Status st;
  by_size(element_size(to.dtype()), [&]<class U>() {
    U* o = to.data_as<U>();
    const U* s = from.data_as<U>();
    st = walk_gs(op, index, Scatter ? to : from, d, Scatter ? &from : &to, [&](int64_t other, int64_t indexed) {
      if constexpr (Scatter) o[indexed] = s[other];
      else o[other] = s[indexed];
    });
  });
  return st;
}

/// What every scatter does first: the checks, then out resized and holding self; returns the wrapped dim.
template <class Dtypes>
inline Result<int> start_scatter(std::string_view op, KernelContext& ctx, const Tensor& self, int64_t dim,
                                 const Tensor& index, const Tensor* src, Tensor& out) {
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (src) ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, *src, out));
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  ETRT_CHECK_OK(check_gs(op, self, d, index, src));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  mv::copy_views(element_size(out.dtype()), mv::view_of(out), mv::view_of(self));
  return d;
}
}  // namespace index_detail

template <class Dtypes>
Status gather_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, bool sparse_grad,
                  Tensor& out) {
  (void)sparse_grad;
  constexpr std::string_view op = "gather.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  ETRT_CHECK_OK(index_detail::check_gs(op, self, d, index, nullptr));
  ETRT_CHECK_OK(ctx.resize(op, out, index.sizes()));
  if (index.numel() == 0) return {};
  return index_detail::move_gs<false>(op, index, self, d, out);
}

template <class Dtypes>
Status scatter_src_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                       Tensor& out) {
  constexpr std::string_view op = "scatter.src_out";
  ETRT_TRY(int d, index_detail::start_scatter<Dtypes>(op, ctx, self, dim, index, &src, out));
  if (index.numel() == 0) return {};
  return index_detail::move_gs<true>(op, index, src, d, out);
}

template <class Dtypes>
Status scatter_value_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index,
                         const Scalar& value, Tensor& out) {
  constexpr std::string_view op = "scatter.value_out";
  ETRT_TRY(int d, index_detail::start_scatter<Dtypes>(op, ctx, self, dim, index, nullptr, out));
  if (index.numel() == 0) return {};
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T v = convert<T>(scalar_as<compute_t<T>>(value));
    T* o = out.data_as<T>();
    return index_detail::walk_gs(op, index, out, d, nullptr, [&](int64_t, int64_t oo) { o[oo] = v; });
  });
}

template <class Dtypes>
Status scatter_add_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                       Tensor& out) {
  constexpr std::string_view op = "scatter_add.out";
  ETRT_TRY(int d, index_detail::start_scatter<Dtypes>(op, ctx, self, dim, index, &src, out));
  if (index.numel() == 0) return {};
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    T* o = out.data_as<T>();
    const T* s = src.data_as<T>();
    return index_detail::walk_gs(op, index, out, d, &src, [&](int64_t so, int64_t oo) {
      if constexpr (std::is_same_v<T, bool>) o[oo] = o[oo] || s[so];
      else o[oo] = static_cast<T>(static_cast<C>(o[oo]) + static_cast<C>(s[so]));
    });
  });
}

namespace index_detail {

/// The plan for advanced indexing: which dims are indexed, the broadcast index shape and each index as int64.
struct Plan {
  std::vector<int> dims;                  // indexed dims of self, in order
  std::vector<std::vector<int64_t>> idx;  // per indexed dim, broadcast to `bshape`, row-major, wrapped
  Shape bshape;
  bool adjacent = true;
  int first = 0;             // position of the first indexed dim
  Shape out_shape;
  int bpos = 0;              // where the broadcast dims start in out
};

inline Result<Plan> make_plan(std::string_view op, const Tensor& self, std::span<Tensor* const> indices) {
  Plan p;
  if (static_cast<int>(indices.size()) > std::max(self.dim(), 0))
    return fail(Error::InvalidArgument, op, ": too many indices (", indices.size(), ") for a tensor of rank ", self.dim());
  // Expand masks into Long index lists, collect (dim, values, shape).
  struct Ix { int dim; std::vector<int64_t> v; Shape shape; std::array<int64_t, kMaxDims> strides; };
  std::vector<Ix> ixs;
  int d = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    const Tensor* t = indices[i];
    if (!t) { ++d; continue; }
    if (t->dtype() == ScalarType::Bool || t->dtype() == ScalarType::Byte) {
      if (d + t->dim() > self.dim())
        return fail(Error::InvalidArgument, op, ": mask ", t->describe(), " does not fit self ", self.describe());
      for (int k = 0; k < t->dim(); ++k)
        if (t->size(k) != self.size(d + k))
          return fail(Error::InvalidArgument, op, ": mask ", t->describe(), " does not match self ", self.describe(),
                      " at dim ", d + k);
      std::vector<std::vector<int64_t>> coords(static_cast<size_t>(t->dim()));
      const uint8_t* m = t->data_as<uint8_t>();
      mv::View mvw = mv::view_of(*t);
      std::array<int64_t, kMaxDims> ctr{};
      if (t->numel() > 0) {
        mv::for_each_view_offset(mvw, [&](int64_t off) {
          if (m[off]) for (int k = 0; k < t->dim(); ++k) coords[k].push_back(ctr[k]);
          for (int k = t->dim() - 1; k >= 0; --k) {
            if (++ctr[k] < t->size(k)) break;
            ctr[k] = 0;
          }
        });
      }
      for (int k = 0; k < t->dim(); ++k) {
        Ix x;
        x.dim = d + k;
        x.v = std::move(coords[k]);
        x.shape.rank = 1;
        x.shape.sizes[0] = static_cast<int64_t>(x.v.size());
        x.strides = {};
        x.strides[0] = 1;
        ixs.push_back(std::move(x));
      }
      d += t->dim();
      continue;
    }
    ETRT_CHECK_OK(mv::check_index_dtype(op, *t, "index tensor"));
    Ix x;
    x.dim = d;
    x.shape = shape_of(t->sizes());
    x.v.resize(static_cast<size_t>(t->numel()));
    size_t k = 0;
    if (t->numel() > 0)
      mv::for_each_view_offset(mv::view_of(*t), [&](int64_t off) { x.v[k++] = mv::read_index(*t, off); });
    // row-major strides of the materialised values
    int64_t s = 1;
    for (int j = x.shape.rank - 1; j >= 0; --j) { x.strides[j] = s; s *= x.shape.sizes[j]; }
    ixs.push_back(std::move(x));
    ++d;
  }
  if (ixs.empty()) {  // no index tensors: a plain copy
    p.out_shape = shape_of(self.sizes());
    p.bshape.rank = 0;
    return p;
  }
  // Broadcast shapes.
  Shape b = ixs[0].shape;
  for (size_t i = 1; i < ixs.size(); ++i) {
    auto r = broadcast_shapes(op, b.span(), ixs[i].shape.span());
    if (!r) return std::move(r).error();
    b = *r;
  }
  p.bshape = b;
  const int64_t bn = checked_numel(b.span());
  for (auto& x : ixs) {
    const int64_t size = self.size(x.dim);
    std::array<int64_t, kMaxDims> bs{};
    const int off = b.rank - x.shape.rank;
    for (int j = 0; j < x.shape.rank; ++j) bs[off + j] = x.shape.sizes[j] == 1 ? 0 : x.strides[j];
    std::vector<int64_t> v(static_cast<size_t>(bn));
    std::array<std::array<int64_t, kMaxDims>, 1> st{bs};
    size_t k = 0;
    Status err;
    for_each_offset<1>(b, st, [&](const std::array<int64_t, 1>& o) {
      int64_t iv = x.v[static_cast<size_t>(o[0])];
      if (err.has_value() && (iv < -size || iv >= size))
        err = fail(Error::InvalidArgument, op, ": index ", iv, " is out of bounds for dim ", x.dim, " with size ", size);
      v[k++] = iv < 0 ? iv + size : iv;
    });
    if (!err) return std::move(err).error();
    p.dims.push_back(x.dim);
    p.idx.push_back(std::move(v));
  }
  for (size_t i = 1; i < p.dims.size(); ++i)
    if (p.dims[i] != p.dims[i - 1] + 1) p.adjacent = false;
  p.first = p.dims[0];
  // Output shape.
  Shape o;
  auto push = [&](int64_t v) { o.sizes[o.rank++] = v; };
  std::vector<bool> indexed(static_cast<size_t>(self.dim()), false);
  for (int x : p.dims) indexed[x] = true;
  if (self.dim() - static_cast<int>(p.dims.size()) + b.rank > kMaxDims)
    return fail(Error::InvalidArgument, op, ": result rank too large");
  if (p.adjacent) {
    for (int k = 0; k < p.first; ++k) push(self.size(k));
    p.bpos = o.rank;
    for (int k = 0; k < b.rank; ++k) push(b.sizes[k]);
    for (int k = p.first; k < self.dim(); ++k) if (!indexed[k]) push(self.size(k));
  } else {
    p.bpos = 0;
    for (int k = 0; k < b.rank; ++k) push(b.sizes[k]);
    for (int k = 0; k < self.dim(); ++k) if (!indexed[k]) push(self.size(k));
  }
  p.out_shape = o;
  return p;
}

/// Calls f(result_view, self_view) for every broadcast index position: result_view is the block of the indexing
/// result (a tensor shaped like out_shape, given by `r`) and self_view the matching block of `t`.
template <class F>
inline void for_each_block(const Plan& p, const Tensor& t, const mv::View& r, F&& f) {
  const int brank = p.bshape.rank;
  const int64_t bn = checked_numel(p.bshape.span());
  // Non-broadcast dims of r: everything outside [bpos, bpos + brank).
  mv::View rrest, trest;
  std::vector<bool> indexed(static_cast<size_t>(t.dim()), false);
  for (int x : p.dims) indexed[x] = true;
  for (int k = 0; k < r.rank; ++k)
    if (k < p.bpos || k >= p.bpos + brank) rrest.push(r.sizes[k], r.strides[k]);
  for (int k = 0; k < t.dim(); ++k)
    if (!indexed[k]) trest.push(t.size(k), t.stride(k));
  const int64_t es = static_cast<int64_t>(element_size(t.dtype()));
  std::array<int64_t, kMaxDims> bidx{};
  for (int64_t i = 0; i < bn; ++i) {
    int64_t roff = 0;
    for (int k = 0; k < brank; ++k) roff += bidx[k] * r.strides[p.bpos + k];
    int64_t toff = 0;
    for (size_t j = 0; j < p.dims.size(); ++j) toff += p.idx[j][static_cast<size_t>(i)] * t.stride(p.dims[j]);
    mv::View rv = rrest, tv = trest;
    rv.data = r.data + roff * es;
    tv.data = static_cast<char*>(t.data()) + toff * es;
    f(rv, tv);
    for (int k = brank - 1; k >= 0; --k) {
      if (++bidx[k] < p.bshape.sizes[k]) break;
      bidx[k] = 0;
    }
  }
}
}  // namespace index_detail

template <class Dtypes>
Status index_tensor_out(KernelContext& ctx, const Tensor& self, std::span<Tensor* const> indices, Tensor& out) {
  constexpr std::string_view op = "index.Tensor_out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_TRY(auto plan, index_detail::make_plan(op, self, indices));
  ETRT_CHECK_OK(ctx.resize(op, out, plan.out_shape.span()));
  if (out.numel() == 0) return {};
  const size_t es = element_size(out.dtype());
  if (plan.dims.empty()) {
    mv::copy_views(es, mv::view_of(out), mv::view_of(self));
    return {};
  }
  index_detail::for_each_block(plan, self, mv::view_of(out),
                               [&](const mv::View& o, const mv::View& s) { mv::copy_views(es, o, s); });
  return {};
}

namespace index_detail {
/// `values` viewed with the shape of the indexing result (the block index_put writes), or a failure when it does
/// not broadcast to it.
inline Result<mv::View> put_values_view(std::string_view op, const Plan& plan, const Tensor& values) {
  const Shape& rs = plan.out_shape;
  bool fits = values.dim() <= rs.rank;
  for (int i = 0; fits && i < values.dim(); ++i) {
    const int64_t v = values.size(i), r = rs.sizes[rs.rank - values.dim() + i];
    fits = v == r || v == 1;
  }
  if (!fits)
    return fail(Error::InvalidArgument, op, ": values ", values.describe(), " cannot be broadcast to ",
                shape_str(rs.span()));
  mv::View vv;
  vv.data = static_cast<char*>(values.data());
  const auto bs = broadcast_strides(values, rs);
  for (int i = 0; i < rs.rank; ++i) vv.push(rs.sizes[i], bs[i]);
  return vv;
}

/// Writes (or with `accumulate` adds) the values view into `dst` at the positions the plan selects. Repeated
/// positions accumulate every value; without accumulate the last one wins.
template <class Dtypes>
Status put_values(std::string_view op, const Plan& plan, Tensor& dst, const mv::View& vv, bool accumulate) {
  if (checked_numel(plan.out_shape.span()) == 0) return {};
  const size_t es = element_size(dst.dtype());
  if (!accumulate) {
    if (plan.dims.empty()) mv::copy_views(es, mv::view_of(dst), vv);
    else for_each_block(plan, dst, vv, [&](const mv::View& v, const mv::View& o) { mv::copy_views(es, o, v); });
    return {};
  }
  return visit(dst.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    auto add_block = [&](const mv::View& v, const mv::View& o) {
      std::vector<int64_t> vo;
      mv::for_each_view_offset(v, [&](int64_t x) { vo.push_back(x); });
      size_t k = 0;
      const T* vp = reinterpret_cast<const T*>(v.data);
      T* op_ = reinterpret_cast<T*>(o.data);
      mv::for_each_view_offset(o, [&](int64_t x) {
        if constexpr (std::is_same_v<T, bool>) op_[x] = op_[x] || vp[vo[k++]];
        else op_[x] = static_cast<T>(static_cast<C>(op_[x]) + static_cast<C>(vp[vo[k++]]));
      });
    };
    if (plan.dims.empty()) add_block(vv, mv::view_of(dst));
    else for_each_block(plan, dst, vv, add_block);
    return Status{};
  });
}
}  // namespace index_detail

template <class Dtypes>
Status index_put_out(KernelContext& ctx, const Tensor& self, std::span<Tensor* const> indices, const Tensor& values,
                     bool accumulate, Tensor& out) {
  constexpr std::string_view op = "index_put.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, values, out));
  ETRT_TRY(auto plan, index_detail::make_plan(op, self, indices));
  ETRT_TRY(mv::View vv, index_detail::put_values_view(op, plan, values));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  mv::copy_views(element_size(out.dtype()), mv::view_of(out), mv::view_of(self));
  return index_detail::put_values<Dtypes>(op, plan, out, vv, accumulate);
}

/// index_put_(self, indices, values, accumulate): index_put.out writing into self; every argument is checked before
/// self is touched.
template <class Dtypes>
Status index_put_inplace(KernelContext&, Tensor& self, std::span<Tensor* const> indices, const Tensor& values,
                         bool accumulate) {
  constexpr std::string_view op = "index_put_";
  if (!contains(Dtypes{}, self.dtype()))
    return fail(Error::InvalidArgument, op, ": unsupported dtype ", name(self.dtype()));
  if (values.dtype() != self.dtype())
    return fail(Error::InvalidArgument, op, ": values dtype ", name(values.dtype()), " != self dtype ",
                name(self.dtype()));
  ETRT_TRY(auto plan, index_detail::make_plan(op, self, indices));
  ETRT_TRY(mv::View vv, index_detail::put_values_view(op, plan, values));
  return index_detail::put_values<Dtypes>(op, plan, self, vv, accumulate);
}

template <class Dtypes>
Status select_scatter_out(KernelContext& ctx, const Tensor& self, const Tensor& src, int64_t dim, int64_t index,
                          Tensor& out) {
  constexpr std::string_view op = "select_scatter.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, src, out));
  if (self.dim() == 0) return fail(Error::InvalidArgument, op, ": cannot select from a rank-0 tensor");
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  ETRT_CHECK_OK(index_detail::check_index(op, index, self.size(d), d));
  if (index < 0) index += self.size(d);
  if (src.dim() != self.dim() - 1)
    return fail(Error::InvalidArgument, op, ": src ", src.describe(), " does not match the selected slice of ",
                self.describe());
  for (int k = 0, j = 0; k < self.dim(); ++k) {
    if (k == d) continue;
    if (src.size(j++) != self.size(k))
      return fail(Error::InvalidArgument, op, ": src ", src.describe(), " does not match the selected slice of ",
                  self.describe());
  }
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  const size_t es = element_size(out.dtype());
  mv::copy_views(es, mv::view_of(out), mv::view_of(self));
  mv::copy_views(es, shape_detail::drop_dim(out, d, index), mv::view_of(src));
  return {};
}

template <class Dtypes>
Status slice_scatter_out(KernelContext& ctx, const Tensor& self, const Tensor& src, int64_t dim,
                         std::optional<int64_t> start, std::optional<int64_t> end, int64_t step, Tensor& out) {
  constexpr std::string_view op = "slice_scatter.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, src, out));
  if (self.dim() == 0) return fail(Error::InvalidArgument, op, ": cannot slice a rank-0 tensor");
  if (step <= 0) return fail(Error::InvalidArgument, op, ": step must be positive, got ", step);
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  auto [s, len] = shape_detail::slice_bounds(self.size(d), start, end, step);
  Shape want = shape_of(self.sizes());
  want.sizes[d] = len;
  if (!std::ranges::equal(src.sizes(), want.span()))
    return fail(Error::InvalidArgument, op, ": src ", src.describe(), " must have shape ", shape_str(want.span()));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  const size_t es = element_size(out.dtype());
  mv::copy_views(es, mv::view_of(out), mv::view_of(self));
  mv::copy_views(es, shape_detail::narrowed(out, d, s, len, step), mv::view_of(src));
  return {};
}

template <class Dtypes>
Status nonzero_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  constexpr std::string_view op = "nonzero.out";
  if (out.dtype() != ScalarType::Long) return fail(Error::InvalidArgument, op, ": out must be Long, got ", name(out.dtype()));
  if (out.dim() != 2) return fail(Error::InvalidArgument, op, ": out must be 2-D, got ", out.describe());
  return visit(self.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T* p = self.data_as<T>();
    const mv::View v = mv::view_of(self);
    int64_t count = 0;
    if (self.numel() > 0)
      mv::for_each_view_offset(v, [&](int64_t o) { count += convert<bool>(p[o]) ? 1 : 0; });
    const std::array<int64_t, 2> s{count, self.dim()};
    ETRT_CHECK_OK(ctx.resize(op, out, s));
    if (count == 0 || self.dim() == 0) return Status{};
    int64_t* o = out.data_as<int64_t>();
    const int64_t r0 = out.stride(0), r1 = out.stride(1);
    std::array<int64_t, kMaxDims> ctr{};
    int64_t row = 0;
    mv::for_each_view_offset(v, [&](int64_t off) {
      if (convert<bool>(p[off])) {
        for (int k = 0; k < self.dim(); ++k) o[row * r0 + k * r1] = ctr[k];
        ++row;
      }
      for (int k = self.dim() - 1; k >= 0; --k) {
        if (++ctr[k] < self.size(k)) break;
        ctr[k] = 0;
      }
    });
    return Status{};
  });
}

}  // namespace etrt::kernels
