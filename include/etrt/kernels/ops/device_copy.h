// et_copy::_h2d_copy.out / _d2h_copy.out: the host<->device copies the exporter's PropagateDevicePass inserts at
// the boundaries of a device delegate (when enable_non_cpu_memory_planning=True). They are the only kernels that
// receive device tensors, and they copy through the DeviceInterface the method was loaded with.
#pragma once

#include <string_view>

#include "etrt/core/tensor_copy.h"
#include "etrt/device/device_interface.h"
#include "etrt/kernels/kernel.h"

namespace etrt::kernels {

namespace detail {

inline Status device_copy(std::string_view op, KernelContext& ctx, const Tensor& self, Tensor& out,
                          bool to_device) {
  const Tensor& host = to_device ? self : out;
  const Tensor& dev = to_device ? out : self;
  if (!host.device().is_cpu() || dev.device().is_cpu())
    return fail(Error::InvalidProgram, op, ": copies from ", self.device().str(), " to ", out.device().str(),
                ", expected ", to_device ? "host to device" : "device to host");
  if (self.dtype() != out.dtype())
    return fail(Error::InvalidArgument, op, ": input dtype ", numpy_name(self.dtype()), " differs from output dtype ",
                numpy_name(out.dtype()));
  if (!ctx.device || ctx.device->type() != dev.device().type)
    return fail(Error::NotSupported, op, ": the method copies to or from ", dev.device().str(),
                ", which needs the CUDA-enabled build");
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  // Both sides are planned by the exporter in the same dim order; a layout change would need a device kernel.
  if (!std::ranges::equal(self.dim_order(), out.dim_order()))
    return fail(Error::NotSupported, op, ": input and output dim orders differ");
  const size_t nbytes = self.nbytes();
  if (nbytes == 0) return {};
  return ctx.device->copy(out.data(), self.data(), nbytes,
                          to_device ? CopyKind::HostToDevice : CopyKind::DeviceToHost, dev.device().index);
}

}  // namespace detail

/// _h2d_copy.out(Tensor self, *, Tensor(a!) out): `self` on the host, `out` on the device.
template <class Dtypes>
Status h2d_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::device_copy("_h2d_copy.out", ctx, self, out, true);
}

/// _d2h_copy.out(Tensor self, *, Tensor(a!) out): `self` on the device, `out` on the host.
template <class Dtypes>
Status d2h_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::device_copy("_d2h_copy.out", ctx, self, out, false);
}

}  // namespace etrt::kernels
