// Kernels that split, join or rearrange whole tensors: split/unbind, cat/stack, repeat, repeat_interleave, flip, roll,
// pixel_shuffle, tril.
//
// Like the views of shape.h, each kernel validates, resizes the output, then copies strided views of the input with
// mv::copy_views (Note [strided views]); element types only matter for ops that create values (tril,
// repeat_interleave).
#pragma once

#include <vector>

#include "etrt/kernels/ops/shape.h"

namespace etrt::kernels {
namespace shape_detail {
/// Copies consecutive chunks of `sizes` along dim into the outputs.
inline Status split_into(KernelContext& ctx, std::string_view op, const Tensor& self, int d,
                         std::span<const int64_t> sizes, std::span<Tensor* const> out) {
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ETRT_CHECK_OK(emit(ctx, op, *out[i], narrowed(self, d, start, sizes[i], 1)));
    start += sizes[i];
  }
  return {};
}
}  // namespace shape_detail

template <class Dtypes>
Status split_copy_tensor_out(KernelContext& ctx, const Tensor& self, int64_t split_size, int64_t dim,
                             std::span<Tensor* const> out) {
  constexpr std::string_view op = "split_copy.Tensor_out";
  if (!contains(Dtypes{}, self.dtype())) return fail(Error::InvalidArgument, op, ": unsupported dtype ", name(self.dtype()));
  if (self.dim() == 0) return fail(Error::InvalidArgument, op, ": cannot split a rank-0 tensor");
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  const int64_t n = self.size(d);
  if (split_size < 0 || (split_size == 0 && n != 0))
    return fail(Error::InvalidArgument, op, ": split_size must be positive, got ", split_size);
  const int64_t chunks = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  ETRT_CHECK_OK(shape_detail::check_out_list(op, out, static_cast<size_t>(chunks), self));
  std::vector<int64_t> sizes(static_cast<size_t>(chunks));
  for (int64_t i = 0; i < chunks; ++i) sizes[i] = std::min(split_size, n - i * split_size);
  return shape_detail::split_into(ctx, op, self, d, sizes, out);
}

template <class Dtypes>
Status split_with_sizes_copy_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> split_sizes,
                                 int64_t dim, std::span<Tensor* const> out) {
  constexpr std::string_view op = "split_with_sizes_copy.out";
  if (!contains(Dtypes{}, self.dtype())) return fail(Error::InvalidArgument, op, ": unsupported dtype ", name(self.dtype()));
  if (self.dim() == 0) return fail(Error::InvalidArgument, op, ": cannot split a rank-0 tensor");
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    if (s < 0) return fail(Error::InvalidArgument, op, ": negative split size ", s);
    total += s;
  }
  if (total != self.size(d))
    return fail(Error::InvalidArgument, op, ": split sizes ", shape_str(split_sizes), " sum to ", total,
                ", expected dim size ", self.size(d));
  ETRT_CHECK_OK(shape_detail::check_out_list(op, out, split_sizes.size(), self));
  return shape_detail::split_into(ctx, op, self, d, split_sizes, out);
}

template <class Dtypes>
Status unbind_copy_int_out(KernelContext& ctx, const Tensor& self, int64_t dim, std::span<Tensor* const> out) {
  constexpr std::string_view op = "unbind_copy.int_out";
  if (!contains(Dtypes{}, self.dtype())) return fail(Error::InvalidArgument, op, ": unsupported dtype ", name(self.dtype()));
  if (self.dim() == 0) return fail(Error::InvalidArgument, op, ": cannot unbind a rank-0 tensor");
  ETRT_TRY(int d, mv::wrap_dim(op, dim, self.dim()));
  ETRT_CHECK_OK(shape_detail::check_out_list(op, out, static_cast<size_t>(self.size(d)), self));
  for (int64_t i = 0; i < self.size(d); ++i) {
    ETRT_CHECK_OK(shape_detail::emit(ctx, op, *out[i], shape_detail::drop_dim(self, d, i)));
  }
  return {};
}

namespace shape_detail {
/// Tensors that take part in cat (torch skips legacy 1-D empty tensors when other ranks differ).
inline bool cat_skips(const Tensor& t, int rank) { return t.dim() == 1 && t.size(0) == 0 && rank != 1; }
}  // namespace shape_detail

template <class Dtypes>
Status cat_out(KernelContext& ctx, std::span<Tensor* const> tensors, int64_t dim, Tensor& out) {
  constexpr std::string_view op = "cat.out";
  if (tensors.empty()) return fail(Error::InvalidArgument, op, ": expected a non-empty list of tensors");
  if (!contains(Dtypes{}, out.dtype())) return fail(Error::InvalidArgument, op, ": unsupported dtype ", name(out.dtype()));
  const Tensor* ref = nullptr;
  for (auto* t : tensors) {
    if (!t) return fail(Error::InvalidArgument, op, ": a tensor in the list is None");
    if (!(t->dim() == 1 && t->size(0) == 0)) {
      ref = t;
      break;
    }
  }
  if (!ref) ref = tensors[0];  // all legacy-empty
  const int rank = ref->dim();
  if (rank == 0) return fail(Error::InvalidArgument, op, ": zero-dimensional tensor cannot be concatenated");
  ETRT_TRY(int d, mv::wrap_dim(op, dim, rank));
  Shape s = shape_of(ref->sizes());
  s.sizes[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    if (shape_detail::cat_skips(t, rank)) continue;
    if (t.dim() != rank)
      return fail(Error::InvalidArgument, op, ": tensor ", i, " has rank ", t.dim(), ", expected ", rank);
    for (int k = 0; k < rank; ++k)
      if (k != d && t.size(k) != ref->size(k))
        return fail(Error::InvalidArgument, op, ": tensor ", i, " has shape ", shape_str(t.sizes()),
                    ", expected ", shape_str(ref->sizes()), " except in dim ", d);
    s.sizes[d] += t.size(d);
  }
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  int64_t at = 0;
  for (auto* tp : tensors) {
    const Tensor& t = *tp;
    if (shape_detail::cat_skips(t, rank) || t.numel() == 0) {
      if (!shape_detail::cat_skips(t, rank)) at += t.size(d);
      continue;
    }
    ETRT_CHECK_OK(mv::convert_views<Dtypes>(op, shape_detail::narrowed(out, d, at, t.size(d), 1), out.dtype(),
                                            mv::view_of(t), t.dtype()));
    at += t.size(d);
  }
  return {};
}

template <class Dtypes>
Status stack_out(KernelContext& ctx, std::span<Tensor* const> tensors, int64_t dim, Tensor& out) {
  constexpr std::string_view op = "stack.out";
  if (tensors.empty()) return fail(Error::InvalidArgument, op, ": expected a non-empty list of tensors");
  if (!contains(Dtypes{}, out.dtype())) return fail(Error::InvalidArgument, op, ": unsupported dtype ", name(out.dtype()));
  for (auto* t : tensors)
    if (!t) return fail(Error::InvalidArgument, op, ": a tensor in the list is None");
  const Tensor& ref = *tensors[0];
  if (ref.dim() >= kMaxDims) return fail(Error::InvalidArgument, op, ": rank too large");
  ETRT_TRY(int d, mv::wrap_dim(op, dim, ref.dim() + 1));
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!std::ranges::equal(tensors[i]->sizes(), ref.sizes()))
      return fail(Error::InvalidArgument, op, ": stack expects each tensor to be equal size, but got ",
                  shape_str(ref.sizes()), " at entry 0 and ", shape_str(tensors[i]->sizes()), " at entry ", i);
  Shape s;
  for (int i = 0; i <= ref.dim(); ++i) {
    if (i == d) s.sizes[s.rank++] = static_cast<int64_t>(tensors.size());
    if (i < ref.dim()) s.sizes[s.rank++] = ref.size(i);
  }
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  for (size_t i = 0; i < tensors.size(); ++i)
    ETRT_CHECK_OK(mv::convert_views<Dtypes>(op, shape_detail::drop_dim(out, d, static_cast<int64_t>(i)), out.dtype(),
                                            mv::view_of(*tensors[i]), tensors[i]->dtype()));
  return {};
}

template <class Dtypes>
Status repeat_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> repeats, Tensor& out) {
  constexpr std::string_view op = "repeat.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  const int r = static_cast<int>(repeats.size());
  if (r < self.dim() || r > kMaxDims)
    return fail(Error::InvalidArgument, op, ": number of repeat dims (", r,
                ") can not be smaller than the number of tensor dims (", self.dim(), ")");
  Shape s;
  s.rank = r;
  mv::View src = shape_detail::with_data(self), dst = shape_detail::with_data(out);
  ETRT_CHECK_OK([&]() -> Status {
    for (int i = 0; i < r; ++i) {
      if (repeats[i] < 0) return fail(Error::InvalidArgument, op, ": negative repeat ", repeats[i]);
      const int k = i - (r - self.dim());
      s.sizes[i] = repeats[i] * (k >= 0 ? self.size(k) : 1);
    }
    return Status{};
  }());
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  for (int i = 0; i < r; ++i) {  // out dim i = (repeat, size): Note [strided views]
    const int k = i - (r - self.dim());
    const int64_t size = k >= 0 ? self.size(k) : 1, stride = k >= 0 ? self.stride(k) : 0;
    src.push(repeats[i], 0);
    src.push(size, stride);
    dst.push(repeats[i], out.stride(i) * size);
    dst.push(size, out.stride(i));
  }
  mv::copy_views(element_size(out.dtype()), dst, src);
  return {};
}

template <class Dtypes>
Status flip_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> dims, Tensor& out) {
  constexpr std::string_view op = "flip.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  mv::View v = mv::view_of(self);
  std::array<bool, kMaxDims> seen{};
  for (int64_t dd : dims) {
    ETRT_TRY(int d, mv::wrap_dim(op, dd, self.dim()));
    if (seen[d]) return fail(Error::InvalidArgument, op, ": dim ", dd, " appears multiple times in ", shape_str(dims));
    seen[d] = true;
    if (self.dim() == 0 || self.size(d) == 0) continue;
    v.data += (self.size(d) - 1) * self.stride(d) * static_cast<int64_t>(element_size(self.dtype()));
    v.strides[d] = -self.stride(d);
  }
  return shape_detail::emit(ctx, op, out, v);
}

template <class Dtypes>
Status roll_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> shifts, std::span<const int64_t> dims,
                Tensor& out) {
  constexpr std::string_view op = "roll.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  const int64_t es = static_cast<int64_t>(element_size(self.dtype()));
  if (dims.empty()) {  // roll the flattened tensor
    if (shifts.size() != 1) return fail(Error::InvalidArgument, op, ": expected one shift when dims is empty, got ", shifts.size());
    const int64_t n = self.numel();
    if (n == 0) return {};
    const int64_t sh = ((shifts[0] % n) + n) % n;
    std::vector<int64_t> io, oo;
    io.reserve(static_cast<size_t>(n));
    oo.reserve(static_cast<size_t>(n));
    mv::for_each_view_offset(mv::view_of(self), [&](int64_t o) { io.push_back(o); });
    mv::for_each_view_offset(mv::view_of(out), [&](int64_t o) { oo.push_back(o); });
    const char* s = static_cast<const char*>(self.data());
    char* d = static_cast<char*>(out.data());
    for (int64_t i = 0; i < n; ++i) std::memmove(d + oo[(i + sh) % n] * es, s + io[i] * es, static_cast<size_t>(es));
    return {};
  }
  if (shifts.size() != dims.size())
    return fail(Error::InvalidArgument, op, ": shifts and dims must align, got ", shifts.size(), " and ", dims.size());
  std::array<int64_t, kMaxDims> shift{};
  for (size_t i = 0; i < dims.size(); ++i) {
    ETRT_TRY(int d, mv::wrap_dim(op, dims[i], self.dim()));
    if (self.dim() == 0) continue;
    shift[d] += shifts[i];
  }
  if (self.numel() == 0) return {};
  // Each rolled dim splits into two segments; copy every combination of segments.
  std::vector<int> rolled;
  for (int d = 0; d < self.dim(); ++d) {
    const int64_t n = self.size(d);
    shift[d] = ((shift[d] % n) + n) % n;
    if (shift[d] != 0) rolled.push_back(d);
  }
  const size_t combos = size_t{1} << rolled.size();
  for (size_t m = 0; m < combos; ++m) {
    mv::View src = mv::view_of(self), dst = mv::view_of(out);
    for (size_t j = 0; j < rolled.size(); ++j) {
      const int d = rolled[j];
      const int64_t n = self.size(d), sh = shift[d];
      // segment 0: out[sh, n) <- in[0, n - sh); segment 1: out[0, sh) <- in[n - sh, n)
      const bool second = (m >> j) & 1;
      const int64_t in0 = second ? n - sh : 0, out0 = second ? 0 : sh, len = second ? sh : n - sh;
      src.data += in0 * self.stride(d) * es;
      dst.data += out0 * out.stride(d) * es;
      src.sizes[d] = dst.sizes[d] = len;
    }
    mv::copy_views(static_cast<size_t>(es), dst, src);
  }
  return {};
}

template <class Dtypes>
Status pixel_shuffle_out(KernelContext& ctx, const Tensor& self, int64_t upscale_factor, Tensor& out) {
  constexpr std::string_view op = "pixel_shuffle.out";
  const int64_t r = upscale_factor;
  ETRT_CHECK_OK(mv::check_pixel_args<Dtypes>(op, self, out, r, "upscale_factor"));
  const int rk = self.dim();
  const int64_t C = self.size(rk - 3), H = self.size(rk - 2), W = self.size(rk - 1);
  if (C % (r * r) != 0)
    return fail(Error::InvalidArgument, op, ": channels (", C, ") must be divisible by upscale_factor^2 (", r * r, ")");
  Shape s = shape_of(self.sizes());
  s.sizes[rk - 3] = C / (r * r);
  s.sizes[rk - 2] = H * r;
  s.sizes[rk - 1] = W * r;
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  const auto [packed, spread] = mv::pixel_views(self, out, r);
  mv::copy_views(element_size(out.dtype()), spread, packed);
  return {};
}

template <class Dtypes>
Status tril_out(KernelContext& ctx, const Tensor& self, int64_t diagonal, Tensor& out) {
  constexpr std::string_view op = "tril.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (self.dim() < 2) return fail(Error::InvalidArgument, op, ": expected a tensor of rank >= 2, got ", self.describe());
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  if (out.numel() == 0) return {};
  mv::copy_views(element_size(out.dtype()), mv::view_of(out), mv::view_of(self));
  const int rk = out.dim();
  const int64_t rows = out.size(rk - 2), cols = out.size(rk - 1), rs = out.stride(rk - 2), cs = out.stride(rk - 1);
  const size_t es = element_size(out.dtype());
  diagonal = std::clamp<int64_t>(diagonal, -rows - 1, cols + 1);  // no overflow in i + diagonal + 1
  mv::View batch = shape_detail::with_data(out);
  for (int i = 0; i < rk - 2; ++i) batch.push(out.size(i), out.stride(i));
  char* base = static_cast<char*>(out.data());
  mv::for_each_view_offset(batch, [&](int64_t off) {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t j0 = std::max<int64_t>(0, i + diagonal + 1);
      for (int64_t j = j0; j < cols; ++j)
        std::memset(base + (off + i * rs + j * cs) * static_cast<int64_t>(es), 0, es);
    }
  });
  return {};
}

/// diagonal_copy.out(self, offset, dim1, dim2, *, out): dims dim1 and dim2 are replaced by one trailing dim holding
/// the diagonal shifted by `offset` (above the main diagonal when positive, below when negative).
template <class Dtypes>
Status repeat_interleave_tensor_out(KernelContext& ctx, const Tensor& repeats, std::optional<int64_t> output_size,
                                    Tensor& out) {
  constexpr std::string_view op = "repeat_interleave.Tensor_out";
  if (repeats.dim() != 1) return fail(Error::InvalidArgument, op, ": repeats must be 1-D, got ", repeats.describe());
  if (!contains(Dtypes{}, repeats.dtype()))
    return fail(Error::InvalidArgument, op, ": repeats must be Long or Int, got ", name(repeats.dtype()));
  if (out.dtype() != repeats.dtype())
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != repeats dtype ",
                name(repeats.dtype()));
  if (out.dim() != 1) return fail(Error::InvalidArgument, op, ": out must be 1-D, got ", out.describe());
  return visit(repeats.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T* r = repeats.data_as<const T>();
    const int64_t n = repeats.size(0), rs = repeats.stride(0);
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = static_cast<int64_t>(r[i * rs]);
      if (c < 0) return fail(Error::InvalidArgument, op, ": repeats can not be negative, got ", c, " at index ", i);
      if (c > INT64_MAX - total) return fail(Error::InvalidArgument, op, ": the sum of repeats overflows int64");
      total += c;
    }
    if (output_size && *output_size != total)
      return fail(Error::InvalidArgument, op, ": output_size ", *output_size, " does not match the sum of repeats ",
                  total);
    const int64_t want[] = {total};
    ETRT_CHECK_OK(ctx.resize(op, out, want));
    T* o = out.data_as<T>();
    const int64_t os = out.stride(0);
    int64_t at = 0;
    for (int64_t i = 0; i < n; ++i)
      for (T c = r[i * rs]; c > 0; --c) o[os * at++] = static_cast<T>(i);
    return Status{};
  });
}

}  // namespace etrt::kernels
