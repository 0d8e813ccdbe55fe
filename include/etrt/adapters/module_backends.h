// The out-of-line definitions of the delegate entry points the Python module registers (xnnpack_entry.h,
// host_delegate_entry.h). Not inline: exactly one translation unit of a program includes this header (the module's
// is written by gen/generate.py --backends-tu).
#pragma once

#include "etrt/backends/cuda/cuda_backend.h"
#include "etrt/backends/cuda/host_delegate_entry.h"
#include "etrt/backends/cuda/host_ops.h"
#include "etrt/backends/xnnpack/xnnpack_backend.h"
#include "etrt/backends/xnnpack/xnnpack_entry.h"
#include "etrt/device/host_emulated_device.h"

namespace etrt::xnnpack {
const BackendInterface& xnnpack_delegate_entry() { return xnnpack_delegate(); }
}  // namespace etrt::xnnpack

namespace etrt::cuda {
const BackendInterface* new_host_cuda_delegate(const HostEmulatedDevice& dev) {
  return new CudaDelegate<HostOps>(dev);
}
}  // namespace etrt::cuda
