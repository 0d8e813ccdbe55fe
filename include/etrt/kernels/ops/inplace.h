// In-place operators the exporter keeps: copy_ writes a mutable buffer back (stateful modules).
#pragma once

#include "etrt/kernels/util/elementwise.h"

namespace etrt::kernels {

/// self[...] = src, broadcasting src to self's shape and converting its dtype.
template <class Dtypes>
Status copy_inplace(KernelContext&, Tensor& self, const Tensor& src, bool /*non_blocking*/) {
  auto shape = broadcast_shapes("copy_", self.sizes(), src.sizes());
  if (!shape) return std::move(shape).error();
  if (!std::ranges::equal(shape->span(), self.sizes()))
    return fail(Error::InvalidArgument, "copy_: source shape ", shape_str(src.sizes()),
                " cannot be broadcast to the destination shape ", shape_str(self.sizes()));
  return visit(self.dtype(), Dtypes{}, "copy_", [&]<class T>() -> Status {
    using C = compute_t<T>;
    return map_elementwise<C, C>("copy_", self, [](C x) { return x; }, src);
  });
}

}  // namespace etrt::kernels
