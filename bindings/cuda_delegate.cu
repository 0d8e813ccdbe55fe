// The one nvcc translation unit: instantiates the CUDA delegate with its CUDA kernels.
//
// Everything else in the runtime is host C++; this file is compiled only in a CUDA build (meson: cuda=enabled or
// auto with nvcc found) and linked with the static CUDA runtime.
#include "etrt/backends/cuda/cuda_backend.h"
#include "etrt/backends/cuda/cuda_delegate_entry.h"
#include "etrt/backends/cuda/cuda_ops.cuh"

namespace etrt::cuda {

const BackendInterface& cuda_delegate(const DeviceInterface& dev) {
  // A function-local static: built on first use, no global constructor.
  static const CudaDelegate<CudaOps> delegate(dev);
  return delegate;
}

}  // namespace etrt::cuda
