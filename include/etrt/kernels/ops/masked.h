// Masked kernels: masked_select (the elements under a boolean mask, as a 1-D tensor whose length depends on the
// mask's values) and masked_scatter (the masked positions of self filled, in order, from a source tensor).
#pragma once

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace masked_detail {
inline Status check_mask(std::string_view op, const Tensor& mask) {
  if (mask.dtype() != ScalarType::Bool)
    return fail(Error::InvalidArgument, op, ": mask must be Bool, got ", name(mask.dtype()));
  return {};
}

/// The broadcast shape of self and mask, refused when its element count does not fit in int64.
inline Result<Shape> joint_shape(std::string_view op, const Tensor& self, const Tensor& mask) {
  ETRT_TRY(Shape b, broadcast_shapes(op, self.sizes(), mask.sizes()));
  if (checked_numel(b.span()) < 0)
    return fail(Error::InvalidArgument, op, ": broadcasting self ", self.describe(), " with mask ", mask.describe(),
                " gives too many elements");
  return b;
}

/// Walks a tensor's elements in logical (row-major) order one at a time, whatever its dim order: the source of
/// masked_scatter is consumed in that order.
class LogicalCursor {
 public:
  explicit LogicalCursor(const Tensor& t) : t_(t) {}
  int64_t offset() const { return off_; }
  void next() {
    for (int k = t_.dim() - 1; k >= 0; --k) {
      off_ += t_.stride(k);
      if (++idx_[k] < t_.size(k)) return;
      off_ -= t_.stride(k) * t_.size(k);
      idx_[k] = 0;
    }
  }

 private:
  const Tensor& t_;
  std::array<int64_t, kMaxDims> idx_{};
  int64_t off_ = 0;
};
}  // namespace masked_detail

/// masked_select.out(self, mask, *, out): self and mask broadcast together; out is 1-D and resized to the number of
/// true mask entries (so it must be dynamic unless that number is known).
template <class Dtypes>
Status masked_select_out(KernelContext& ctx, const Tensor& self, const Tensor& mask, Tensor& out) {
  constexpr std::string_view op = "masked_select.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_CHECK_OK(masked_detail::check_mask(op, mask));
  if (out.dim() != 1) return fail(Error::InvalidArgument, op, ": out must be 1-D, got ", out.describe());
  ETRT_TRY(Shape b, masked_detail::joint_shape(op, self, mask));
  const std::array<std::array<int64_t, kMaxDims>, 2> st{broadcast_strides(self, b), broadcast_strides(mask, b)};
  const uint8_t* m = mask.data_as<const uint8_t>();
  int64_t count = 0;
  for_each_offset<2>(b, st, [&](const std::array<int64_t, 2>& off) { count += m[off[1]] != 0; });
  const int64_t want[] = {count};
  ETRT_CHECK_OK(ctx.resize(op, out, want));
  if (count == 0) return {};
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T* s = self.data_as<const T>();
    T* o = out.data_as<T>();
    const int64_t os = out.stride(0);
    int64_t k = 0;
    for_each_offset<2>(b, st, [&](const std::array<int64_t, 2>& off) {
      if (m[off[1]]) o[os * k++] = s[off[0]];
    });
    return {};
  });
}

/// masked_scatter.out(self, mask, source, *, out): out = self broadcast with mask, whose masked positions take
/// source's elements in logical order (source needs at least as many elements as the mask selects).
template <class Dtypes>
Status masked_scatter_out(KernelContext& ctx, const Tensor& self, const Tensor& mask, const Tensor& source,
                          Tensor& out) {
  constexpr std::string_view op = "masked_scatter.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (source.dtype() != self.dtype())
    return fail(Error::InvalidArgument, op, ": source dtype ", name(source.dtype()), " != self dtype ",
                name(self.dtype()));
  ETRT_CHECK_OK(masked_detail::check_mask(op, mask));
  ETRT_TRY(Shape b, masked_detail::joint_shape(op, self, mask));
  const uint8_t* m = mask.data_as<const uint8_t>();
  int64_t count = 0;
  {
    const std::array<std::array<int64_t, kMaxDims>, 1> mst{broadcast_strides(mask, b)};
    for_each_offset<1>(b, mst, [&](const std::array<int64_t, 1>& off) { count += m[off[0]] != 0; });
  }
  if (count > source.numel())
    return fail(Error::InvalidArgument, op, ": the mask selects ", count, " elements but source ", source.describe(),
                " has only ", source.numel());
  ETRT_CHECK_OK(ctx.resize(op, out, b.span()));
  if (out.numel() == 0) return {};
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T* s = self.data_as<const T>();
    const T* src = source.data_as<const T>();
    T* o = out.data_as<T>();
    std::array<int64_t, kMaxDims> ost{};
    for (int i = 0; i < out.dim(); ++i) ost[i] = out.stride(i);
    const std::array<std::array<int64_t, kMaxDims>, 3> st{broadcast_strides(self, b), broadcast_strides(mask, b), ost};
    masked_detail::LogicalCursor cur(source);
    for_each_offset<3>(b, st, [&](const std::array<int64_t, 3>& off) {
      if (m[off[1]]) {
        o[off[2]] = src[cur.offset()];
        cur.next();
      } else {
        o[off[2]] = s[off[0]];
      }
    });
    return {};
  });
}

}  // namespace etrt::kernels
