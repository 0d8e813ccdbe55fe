// Shape kernels: the *_copy views (view, permute, transpose, squeeze/unsqueeze, expand, slice, select, narrow,
// as_strided, diagonal, unfold). Kernels that split, join or rearrange whole tensors are in rearrange.h,
// constant_pad_nd with the other padding kernels in pad.h.
//
// Each kernel validates, resizes the output, then expresses the result as a strided view of the input and copies it
// with mv::copy_views (Note [strided views]); element types do not matter to any of them.
#pragma once

#include <vector>

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace shape_detail {
using mv::View;

/// Resizes `out` to the view's sizes and copies the view into it.
inline Status emit(KernelContext& ctx, std::string_view op, Tensor& out, const View& src) {
  ETRT_CHECK_OK(ctx.resize(op, out, std::span<const int64_t>(src.sizes.data(), static_cast<size_t>(src.rank))));
  mv::copy_views(element_size(out.dtype()), mv::view_of(out), src);
  return {};
}

/// A view of t's storage `offset` elements in, with no dims yet.
inline View with_data(const Tensor& t, int64_t offset = 0) {
  View v;
  v.data = static_cast<char*>(t.data()) + offset * static_cast<int64_t>(element_size(t.dtype()));
  return v;
}

/// t at index i along dim d, without that dim (a rank-0 t stays whole).
inline View drop_dim(const Tensor& t, int d, int64_t i) {
  View v = with_data(t, t.dim() ? i * t.stride(d) : 0);
  for (int k = 0; k < t.dim(); ++k)
    if (k != d) v.push(t.size(k), t.stride(k));
  return v;
}

/// torch's slice bounds: defaults, negative wrap, clamping; returns (start, length).
inline std::pair<int64_t, int64_t> slice_bounds(int64_t size, std::optional<int64_t> start, std::optional<int64_t> end,
                                                int64_t step) {
  int64_t s = start.value_or(0), e = end.value_or(size);
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = std::clamp<int64_t>(s, 0, size);
  e = std::clamp<int64_t>(e, 0, size);
  if (e < s) e = s;
  return {s, e == s ? 0 : 1 + (e - s - 1) / step};  // ceil((e - s) / step) without overflowing at a step near 2^63
}

inline Status check_out_list(std::string_view op, std::span<Tensor* const> outs, size_t n, const Tensor& self) {
  if (outs.size() != n)
    return fail(Error::InvalidArgument, op, ": expected ", n, " output tensors, got ", outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i]) return fail(Error::InvalidArgument, op, ": output ", i, " is None");
    if (outs[i]->dtype() != self.dtype())
      return fail(Error::InvalidArgument, op, ": output ", i, " dtype ", name(outs[i]->dtype()), " != input dtype ",
                  name(self.dtype()));
  }
  return {};
}

/// The view of self narrowed along dim to [start, start + len*step) with step.
inline View narrowed(const Tensor& self, int dim, int64_t start, int64_t len, int64_t step) {
  View v = mv::view_of(self);
  v.data += start * self.stride(dim) * static_cast<int64_t>(element_size(self.dtype()));
  v.sizes[dim] = len;
  // With at most one element the step never moves the pointer, and stride * step need not fit (a step of 2^62 is
  // a valid slice that takes one element: a fuzz finding); with more, start + (len - 1) * step < size bounds it.
  v.strides[dim] = len > 1 ? self.stride(dim) * step : self.stride(dim);
  return v;
}
}  // namespace shape_detail

template <class Dtypes>
Status view_copy_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> size, Tensor& out) {
  constexpr std::string_view op = "view_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  Shape s = shape_of(size);
  if (s.rank > kMaxDims) return fail(Error::InvalidArgument, op, ": too many dims ", s.rank);
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.rank; ++i) {
    if (s.sizes[i] == -1) {
      if (infer >= 0) return fail(Error::InvalidArgument, op, ": only one dimension can be inferred in ", shape_str(size));
      infer = i;
    } else if (s.sizes[i] < 0) {
      return fail(Error::InvalidArgument, op, ": invalid size ", s.sizes[i], " in ", shape_str(size));
    } else if (__builtin_mul_overflow(known, s.sizes[i], &known)) {  // no tensor has that many elements
      return fail(Error::InvalidArgument, op, ": shape ", shape_str(size), " is invalid for input of size ",
                  self.numel());
    }
  }
  const int64_t n = self.numel();
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      return fail(Error::InvalidArgument, op, ": shape ", shape_str(size), " is invalid for input of size ", n);
    s.sizes[infer] = n / known;
  } else if (known != n) {
    return fail(Error::InvalidArgument, op, ": shape ", shape_str(size), " is invalid for input of size ", n);
  }
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  if (n > 0) mv::copy_logical(out, self);
  return {};
}

template <class Dtypes>
Status permute_copy_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> dims, Tensor& out) {
  constexpr std::string_view op = "permute_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (static_cast<int>(dims.size()) != self.dim())
    return fail(Error::InvalidArgument, op, ": dims ", shape_str(dims), " do not match input rank ", self.dim());
  std::array<bool, kMaxDims> seen{};
  mv::View v = shape_detail::with_data(self);
  for (int64_t d : dims) {
    ETRT_TRY(int w, mv::wrap_dim(op, d, self.dim()));
    if (seen[w]) return fail(Error::InvalidArgument, op, ": dim ", d, " repeats in ", shape_str(dims));
    seen[w] = true;
    v.push(self.size(w), self.stride(w));
  }
  return shape_detail::emit(ctx, op, out, v);
}

template <class Dtypes>
Status transpose_copy_int_out(KernelContext& ctx, const Tensor& self, int64_t dim0, int64_t dim1, Tensor& out) {
  constexpr std::string_view op = "transpose_copy.int_out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_TRY(int a, mv::wrap_dim(op, dim0, self.dim()));
  ETRT_TRY(int b, mv::wrap_dim(op, dim1, self.dim()));
  mv::View v = mv::view_of(self);
  if (self.dim() > 0) {
    std::swap(v.sizes[a], v.sizes[b]);
    std::swap(v.strides[a], v.strides[b]);
  }
  return shape_detail::emit(ctx, op, out, v);
}

template <class Dtypes>
Status t_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  constexpr std::string_view op = "t_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (self.dim() > 2) return fail(Error::InvalidArgument, op, ": expected a tensor of rank <= 2, got ", self.describe());
  mv::View v = mv::view_of(self);
  if (self.dim() == 2) {
    std::swap(v.sizes[0], v.sizes[1]);
    std::swap(v.strides[0], v.strides[1]);
  }
  return shape_detail::emit(ctx, op, out, v);
}

template <class Dtypes>
Status unsqueeze_copy_out(KernelContext& ctx, const Tensor& self, int64_t dim, Tensor& out) {
  constexpr std::string_view op = "unsqueeze_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (self.dim() >= kMaxDims) return fail(Error::InvalidArgument, op, ": rank ", self.dim(), " is at the maximum");
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim() + 1));
  mv::View v = shape_detail::with_data(self);
  for (int i = 0; i <= self.dim(); ++i) {
    if (i == d) v.push(1, 0);
    if (i < self.dim()) v.push(self.size(i), self.stride(i));
  }
  return shape_detail::emit(ctx, op, out, v);
}

namespace shape_detail {
inline Status squeeze_mask(KernelContext& ctx, std::string_view op, const Tensor& self, const std::array<bool, kMaxDims>& drop,
                           Tensor& out) {
  View v = with_data(self);
  for (int i = 0; i < self.dim(); ++i)
    if (!(drop[i] && self.size(i) == 1)) v.push(self.size(i), self.stride(i));
  return emit(ctx, op, out, v);
}
}  // namespace shape_detail

template <class Dtypes>
Status squeeze_copy_dim_out(KernelContext& ctx, const Tensor& self, int64_t dim, Tensor& out) {
  constexpr std::string_view op = "squeeze_copy.dim_out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  std::array<bool, kMaxDims> drop{};
  drop[d] = self.dim() > 0;
  return shape_detail::squeeze_mask(ctx, op, self, drop, out);
}

template <class Dtypes>
Status squeeze_copy_dims_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> dims, Tensor& out) {
  constexpr std::string_view op = "squeeze_copy.dims_out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  std::array<bool, kMaxDims> drop{};
  for (int64_t d : dims) {
    ETRT_TRY(int w, mv::wrap_dim(op, d, self.dim()));
    drop[w] = self.dim() > 0;
  }
  return shape_detail::squeeze_mask(ctx, op, self, drop, out);
}

template <class Dtypes>
Status squeeze_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  constexpr std::string_view op = "squeeze_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  std::array<bool, kMaxDims> drop{};
  drop.fill(true);
  return shape_detail::squeeze_mask(ctx, op, self, drop, out);
}

template <class Dtypes>
Status expand_copy_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> size, bool implicit,
                       Tensor& out) {
  (void)implicit;
  constexpr std::string_view op = "expand_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  const int r = static_cast<int>(size.size());
  if (r < self.dim() || r > kMaxDims)
    return fail(Error::InvalidArgument, op, ": cannot expand ", self.describe(), " to ", shape_str(size));
  mv::View v = shape_detail::with_data(self);
  const int lead = r - self.dim();
  for (int i = 0; i < r; ++i) {
    if (i < lead) {
      if (size[i] < 0) return fail(Error::InvalidArgument, op, ": size -1 is not allowed in a new leading dim ", i);
      v.push(size[i], 0);
      continue;
    }
    const int64_t s = self.size(i - lead);
    const int64_t want = size[i] == -1 ? s : size[i];
    if (want < 0 || (s != want && s != 1))
      return fail(Error::InvalidArgument, op, ": cannot expand ", self.describe(), " to ", shape_str(size),
                  " (dim ", i, ": ", s, " vs ", size[i], ")");
    v.push(want, s == want ? self.stride(i - lead) : 0);
  }
  return shape_detail::emit(ctx, op, out, v);
}

template <class Dtypes>
Status slice_copy_tensor_out(KernelContext& ctx, const Tensor& self, int64_t dim, std::optional<int64_t> start,
                             std::optional<int64_t> end, int64_t step, Tensor& out) {
  constexpr std::string_view op = "slice_copy.Tensor_out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (self.dim() == 0) return fail(Error::InvalidArgument, op, ": cannot slice a rank-0 tensor");
  if (step <= 0) return fail(Error::InvalidArgument, op, ": step must be positive, got ", step);
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  auto [s, len] = shape_detail::slice_bounds(self.size(d), start, end, step);
  return shape_detail::emit(ctx, op, out, shape_detail::narrowed(self, d, s, len, step));
}

template <class Dtypes>
Status select_copy_int_out(KernelContext& ctx, const Tensor& self, int64_t dim, int64_t index, Tensor& out) {
  constexpr std::string_view op = "select_copy.int_out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (self.dim() == 0) return fail(Error::InvalidArgument, op, ": cannot select from a rank-0 tensor");
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  const int64_t n = self.size(d);
  if (index < -n || index >= n)
    return fail(Error::InvalidArgument, op, ": index ", index, " is out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  return shape_detail::emit(ctx, op, out, shape_detail::drop_dim(self, d, index));
}

template <class Dtypes>
Status narrow_copy_out(KernelContext& ctx, const Tensor& self, int64_t dim, int64_t start, int64_t length,
                       Tensor& out) {
  constexpr std::string_view op = "narrow_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (self.dim() == 0) return fail(Error::InvalidArgument, op, ": cannot narrow a rank-0 tensor");
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  const int64_t n = self.size(d);
  if (start < -n || start > n) return fail(Error::InvalidArgument, op, ": start ", start, " is out of range for size ", n);
  if (start < 0) start += n;
  if (length < 0 || length > n - start)
    return fail(Error::InvalidArgument, op, ": start (", start, ") + length (", length, ") exceeds dim size ", n);
  return shape_detail::emit(ctx, op, out, shape_detail::narrowed(self, d, start, length, 1));
}

template <class Dtypes>
Status as_strided_copy_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> size,
                           std::span<const int64_t> stride, std::optional<int64_t> storage_offset, Tensor& out) {
  constexpr std::string_view op = "as_strided_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (size.size() != stride.size() || static_cast<int>(size.size()) > kMaxDims)
    return fail(Error::InvalidArgument, op, ": size ", shape_str(size), " and stride ", shape_str(stride),
                " must have the same length");
  const int64_t off = storage_offset.value_or(0);
  if (off < 0) return fail(Error::InvalidArgument, op, ": negative storage offset ", off);
  // The last element reached, in 128 bits and saturated at int64's maximum: sizes and strides are the file's.
  __int128 last = off;
  bool empty = false;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] < 0 || stride[i] < 0)
      return fail(Error::InvalidArgument, op, ": negative size or stride in ", shape_str(size), " / ", shape_str(stride));
    if (size[i] == 0) empty = true;
    else last = std::min<__int128>(last + static_cast<__int128>(size[i] - 1) * stride[i], INT64_MAX);
  }
  if (!empty && last >= self.numel())
    return fail(Error::InvalidArgument, op, ": size ", shape_str(size), " stride ", shape_str(stride), " offset ", off,
                " reaches element ", static_cast<int64_t>(last), " but the input has ", self.numel(), " elements");
  // An empty result reads nothing, and its offset may lie anywhere (as in torch): only a used offset moves data.
  mv::View v = shape_detail::with_data(self, empty ? 0 : off);
  for (size_t i = 0; i < size.size(); ++i) v.push(size[i], stride[i]);
  return shape_detail::emit(ctx, op, out, v);
}

template <class Dtypes>
Status diagonal_copy_out(KernelContext& ctx, const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2,
                         Tensor& out) {
  constexpr std::string_view op = "diagonal_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (self.dim() < 2) return fail(Error::InvalidArgument, op, ": expected a tensor of rank >= 2, got ", self.describe());
  ETRT_TRY(int a, mv::wrap_dim(op, dim1, self.dim()));
  ETRT_TRY(int b, mv::wrap_dim(op, dim2, self.dim()));
  if (a == b) return fail(Error::InvalidArgument, op, ": diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  const int64_t na = self.size(a), nb = self.size(b);
  // Compared before any arithmetic on offset, so no offset (even INT64_MIN) overflows.
  int64_t len = 0, start = 0;
  if (offset >= 0 && offset < nb) {
    len = std::min(na, nb - offset);
    start = offset * self.stride(b);
  } else if (offset < 0 && offset > -na) {
    len = std::min(na + offset, nb);
    start = -offset * self.stride(a);
  }
  mv::View v = shape_detail::with_data(self, len > 0 ? start : 0);
  for (int i = 0; i < self.dim(); ++i)
    if (i != a && i != b) v.push(self.size(i), self.stride(i));
  v.push(std::max<int64_t>(len, 0), self.stride(a) + self.stride(b));
  return shape_detail::emit(ctx, op, out, v);
}

/// unfold_copy.out(self, dimension, size, step, *, out): every window of `size` elements along `dimension`, `step`
/// apart; that dim becomes the window count and a trailing dim of length `size` holds each window.
template <class Dtypes>
Status unfold_copy_out(KernelContext& ctx, const Tensor& self, int64_t dimension, int64_t size, int64_t step,
                       Tensor& out) {
  constexpr std::string_view op = "unfold_copy.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (self.dim() >= kMaxDims) return fail(Error::InvalidArgument, op, ": rank ", self.dim(), " is at the maximum");
  ETRT_TRY(int d, mv::wrap_dim(op, dimension, self.dim()));
  const int64_t n = self.dim() ? self.size(d) : 1, stride = self.dim() ? self.stride(d) : 1;
  if (size < 0) return fail(Error::InvalidArgument, op, ": size is ", size, " but must be >= 0");
  if (size > n)
    return fail(Error::InvalidArgument, op, ": maximum size for tensor at dimension ", d, " is ", n, " but size is ",
                size);
  if (step <= 0) return fail(Error::InvalidArgument, op, ": step is ", step, " but must be > 0");
  const int64_t windows = (n - size) / step + 1;
  mv::View v = shape_detail::with_data(self);
  for (int i = 0; i < self.dim(); ++i) {
    if (i != d) v.push(self.size(i), self.stride(i));
    else v.push(windows, windows > 1 ? stride * step : 0);  // a lone window never moves, whatever step is
  }
  v.push(size, stride);
  return shape_detail::emit(ctx, op, out, v);
}

/// repeat_interleave.Tensor_out(repeats, *, output_size, out): index i written repeats[i] times, in order. The
/// length is the sum of the repeats; when output_size is given it must equal that sum.

}  // namespace etrt::kernels
