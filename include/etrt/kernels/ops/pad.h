// Padding kernels: constant_pad_nd, reflection_pad{1,2,3}d and replication_pad{1,2,3}d.
//
// Note [pad segments]: along one padded axis the source index of output position j is a piecewise-linear function of
// j with at most three pieces (left border, the copied middle, right border): slope -1 / +1 / -1 for reflection,
// 0 / +1 / 0 for replication. Every combination of pieces over the padded axes is therefore one strided view of the
// input (negative or zero strides) copied into one box of the output with mv::copy_views (Note [strided views]), so
// the kernels are dtype-agnostic, follow any dim order and copy contiguous runs with memcpy. Negative padding crops:
// the same formulas hold with the middle piece starting inside the input, as in torch.
#pragma once

#include <vector>

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace pad_detail {

enum class Mode { Reflect, Replicate };

/// One piece of an axis: output positions [out0, out0 + len) read input positions src0, src0 + step, ...
struct Piece {
  int64_t out0, len, src0, step;
};

/// The (up to three) non-empty pieces of one axis of input size `in`, padded by `lo` in front to `out` positions.
/// The callers' checks (torch's: reflection pads below `in`, a non-negative output size) keep every source index
/// inside [0, in); 128-bit intermediates because replication accepts any int64 pads whose sum fits.
inline std::vector<Piece> pieces(Mode mode, int64_t in, int64_t lo, int64_t out) {
  using I = __int128;
  std::vector<Piece> v;
  // k = j - lo is the unpadded coordinate of output j; k in [0, in) is the middle piece.
  const I mid0 = std::clamp<I>(lo, 0, out);
  const I mid1 = std::clamp<I>(I(in) + lo, mid0, out);
  if (mid0 > 0) {  // k < 0
    if (mode == Mode::Reflect) v.push_back({0, int64_t(mid0), lo, -1});  // source -k
    else v.push_back({0, int64_t(mid0), 0, 0});
  }
  if (mid1 > mid0) v.push_back({int64_t(mid0), int64_t(mid1 - mid0), int64_t(mid0 - lo), 1});
  if (out > mid1) {  // k >= in
    if (mode == Mode::Reflect)
      v.push_back({int64_t(mid1), int64_t(out - mid1), int64_t(I(2) * (in - 1) - (mid1 - lo)), -1});
    else v.push_back({int64_t(mid1), int64_t(out - mid1), in - 1, 0});
  }
  return v;
}

/// Shared body: `nsp` trailing dims are padded by `padding` (last dim first, (lo, hi) pairs, torch's order).
template <class Dtypes>
Status pad_nd(KernelContext& ctx, std::string_view op, Mode mode, int nsp, const Tensor& self,
              std::span<const int64_t> padding, Tensor& out) {
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (static_cast<int>(padding.size()) != 2 * nsp)
    return fail(Error::InvalidArgument, op, ": padding size is expected to be ", 2 * nsp, ", but got ",
                padding.size(), " values ", shape_str(padding));
  const int rank = self.dim();
  if (rank != nsp + 1 && rank != nsp + 2)
    return fail(Error::InvalidArgument, op, ": expected a ", nsp + 1, "-D or ", nsp + 2, "-D (batch mode) input, got ",
                self.describe());
  // torch allows an empty batch but no other empty dim.
  for (int d = rank - nsp - 1; d < rank; ++d)
    if (self.size(d) == 0)
      return fail(Error::InvalidArgument, op, ": expected non-zero sizes except the batch dim, got ", self.describe());
  std::array<int64_t, kMaxDims> osz{};
  for (int d = 0; d < rank; ++d) osz[d] = self.size(d);
  bool any_positive = false;
  for (int i = 0; i < nsp; ++i) {
    const int d = rank - 1 - i;
    const int64_t in = self.size(d), lo = padding[2 * i], hi = padding[2 * i + 1];
    if (mode == Mode::Reflect && (lo >= in || hi >= in))
      return fail(Error::InvalidArgument, op, ": padding (", lo, ", ", hi, ") must be less than the input size ", in,
                  " at dim ", d, " of input ", self.describe());
    const __int128 o = static_cast<__int128>(in) + lo + hi;
    if (o < 0 || o > INT64_MAX)
      return fail(Error::InvalidArgument, op, ": padding ", shape_str(padding), " gives a ",
                  o < 0 ? "negative" : "too large", " output size at dim ", d, " of input ", self.describe());
    osz[d] = static_cast<int64_t>(o);
    any_positive = any_positive || o >= 1;
  }
  if (!any_positive)
    return fail(Error::InvalidArgument, op, ": input ", self.describe(), " is too small for padding ",
                shape_str(padding), ": every padded output size is 0");
  ETRT_CHECK_OK(ctx.resize(op, out, std::span<const int64_t>(osz.data(), static_cast<size_t>(rank))));
  if (out.numel() == 0) return {};
  std::array<std::vector<Piece>, 3> ax;
  for (int i = 0; i < nsp; ++i) {
    const int d = rank - 1 - i;
    ax[i] = pieces(mode, self.size(d), padding[2 * i], osz[d]);
  }
  const int64_t es = static_cast<int64_t>(element_size(self.dtype()));
  const mv::View src0 = mv::view_of(self), dst0 = mv::view_of(out);
  // Odometer over one piece per padded axis.
  std::array<size_t, 3> pick{};
  while (true) {
    mv::View src = src0, dst = dst0;
    for (int i = 0; i < nsp; ++i) {
      const int d = rank - 1 - i;
      const Piece& p = ax[i][pick[i]];
      dst.data += p.out0 * out.stride(d) * es;
      dst.sizes[d] = p.len;
      src.data += p.src0 * self.stride(d) * es;
      src.sizes[d] = p.len;
      src.strides[d] = p.step * self.stride(d);
    }
    mv::copy_views(static_cast<size_t>(es), dst, src);
    int i = 0;
    for (; i < nsp; ++i) {
      if (++pick[i] < ax[i].size()) break;
      pick[i] = 0;
    }
    if (i == nsp) return {};
  }
}

}  // namespace pad_detail

template <class Dtypes>
Status reflection_pad1d_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> padding, Tensor& out) {
  return pad_detail::pad_nd<Dtypes>(ctx, "reflection_pad1d.out", pad_detail::Mode::Reflect, 1, self, padding, out);
}
template <class Dtypes>
Status reflection_pad2d_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> padding, Tensor& out) {
  return pad_detail::pad_nd<Dtypes>(ctx, "reflection_pad2d.out", pad_detail::Mode::Reflect, 2, self, padding, out);
}
template <class Dtypes>
Status reflection_pad3d_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> padding, Tensor& out) {
  return pad_detail::pad_nd<Dtypes>(ctx, "reflection_pad3d.out", pad_detail::Mode::Reflect, 3, self, padding, out);
}
template <class Dtypes>
Status replication_pad1d_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> padding, Tensor& out) {
  return pad_detail::pad_nd<Dtypes>(ctx, "replication_pad1d.out", pad_detail::Mode::Replicate, 1, self, padding, out);
}
template <class Dtypes>
Status replication_pad2d_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> padding, Tensor& out) {
  return pad_detail::pad_nd<Dtypes>(ctx, "replication_pad2d.out", pad_detail::Mode::Replicate, 2, self, padding, out);
}
template <class Dtypes>
Status replication_pad3d_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> padding, Tensor& out) {
  return pad_detail::pad_nd<Dtypes>(ctx, "replication_pad3d.out", pad_detail::Mode::Replicate, 3, self, padding, out);
}

template <class Dtypes>
Status constant_pad_nd_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> pad, const Scalar& value,
                           Tensor& out) {
  constexpr std::string_view op = "constant_pad_nd.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (pad.size() % 2 != 0 || static_cast<int>(pad.size()) > 2 * self.dim())
    return fail(Error::InvalidArgument, op, ": padding length ", pad.size(),
                " must be even and at most twice the rank ", self.dim());
  Shape s = shape_of(self.sizes());
  std::array<int64_t, kMaxDims> lo{}, hi{};
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int d = self.dim() - 1 - static_cast<int>(i);
    lo[d] = pad[2 * i];
    hi[d] = pad[2 * i + 1];
    const __int128 o = static_cast<__int128>(self.size(d)) + lo[d] + hi[d];
    if (o < 0 || o > INT64_MAX)
      return fail(Error::InvalidArgument, op, ": padding ", shape_str(pad), " gives a ",
                  o < 0 ? "negative" : "too large", " size in dim ", d);
    s.sizes[d] = static_cast<int64_t>(o);
  }
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  if (out.numel() == 0) return {};
  ETRT_CHECK_OK(mv::fill_scalar<Dtypes>(op, out, value));
  const int64_t es = static_cast<int64_t>(element_size(self.dtype()));
  mv::View src = mv::view_of(self), dst = mv::view_of(out);
  for (int d = 0; d < self.dim(); ++d) {
    // min(size, -lo) without negating lo, which may be INT64_MIN.
    const int64_t in0 = lo[d] >= 0 ? 0 : lo[d] < -self.size(d) ? self.size(d) : -lo[d];
    const int64_t out0 = std::max<int64_t>(0, lo[d]);
    const int64_t len = std::max<int64_t>(0, std::min(self.size(d) - in0, s.sizes[d] - out0));
    if (len == 0) return {};
    src.data += in0 * self.stride(d) * es;
    dst.data += out0 * out.stride(d) * es;
    src.sizes[d] = dst.sizes[d] = len;
  }
  mv::copy_views(static_cast<size_t>(es), dst, src);
  return {};
}

}  // namespace etrt::kernels
