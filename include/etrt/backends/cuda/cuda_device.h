// CudaDevice: the DeviceInterface of the CUDA runtime API. Compiled only in the CUDA-enabled build (it includes
// cuda_runtime.h); the extension links the static CUDA runtime, so importing it needs no CUDA library and a
// machine without a driver or GPU reports zero devices instead of failing to load.
//
// Every call selects the device it works on and restores the caller's current device afterwards, so torch (or any
// other library in the process) keeps the device it had selected.
#pragma once

#include <cuda_runtime.h>

#include "etrt/device/device_interface.h"

namespace etrt::cuda {

/// A Failure naming the CUDA call and the runtime's error text.
inline Failure cuda_failure(std::string_view what, cudaError_t e) {
  return Failure{Error::Internal, cat(what, " failed: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e))};
}

/// Makes `index` the current device for a scope.
class ScopedDevice {
 public:
  static Result<ScopedDevice> enter(int index) {
    ScopedDevice s;
    if (cudaError_t e = cudaGetDevice(&s.prev_); e != cudaSuccess) return cuda_failure("cudaGetDevice", e);
    if (s.prev_ != index) {
      if (cudaError_t e = cudaSetDevice(index); e != cudaSuccess) return cuda_failure("cudaSetDevice", e);
      s.switched_ = true;
    }
    return Result<ScopedDevice>(std::move(s));  // explicit: nvcc does not move implicitly into Result
  }
  ScopedDevice(ScopedDevice&& o) noexcept : prev_(o.prev_), switched_(o.switched_) { o.switched_ = false; }
  ScopedDevice(const ScopedDevice&) = delete;
  ~ScopedDevice() {
    if (switched_) cudaSetDevice(prev_);
  }

 private:
  ScopedDevice() = default;
  int prev_ = 0;
  bool switched_ = false;
};

class CudaDevice final : public DeviceInterface {
 public:
  DeviceType type() const override { return DeviceType::CUDA; }

  int device_count() const override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // a missing driver is not sticky; clear it so later calls report their own errors
      return 0;
    }
    return n;
  }

  /// Why device_count() is 0, for error messages.
  std::string unavailable_reason() const {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    cudaGetLastError();
    if (e != cudaSuccess) return cat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
    return n == 0 ? std::string("no CUDA device is present") : std::string();
  }

  Result<void*> allocate(size_t nbytes, int index) const override {
    ETRT_TRY(ScopedDevice scope, ScopedDevice::enter(index));
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, nbytes ? nbytes : 1); e != cudaSuccess) {
      cudaGetLastError();
      return cuda_failure(cat("cudaMalloc(", nbytes, " bytes) on cuda:", index), e);
    }
    if (nbytes) {
      if (cudaError_t e = cudaMemset(p, 0, nbytes); e != cudaSuccess) {
        cudaFree(p);
        return cuda_failure("cudaMemset", e);
      }
    }
    return p;
  }

  void release(void* p, int index) const noexcept override {
    if (!p) return;
    auto scope = ScopedDevice::enter(index);
    cudaFree(p);  // an error here (e.g. the context is gone at exit) leaves nothing to recover
  }

  /// cudaMemcpy on the legacy default stream: host memory may be reused when it returns; a device-to-device copy
  /// completes in stream order, before any later work on the device.
  Status copy(void* dst, const void* src, size_t nbytes, CopyKind kind, int index) const override {
    if (nbytes == 0) return {};
    ETRT_TRY(ScopedDevice scope, ScopedDevice::enter(index));
    const cudaMemcpyKind k = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                             : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                              : cudaMemcpyDeviceToDevice;
    if (cudaError_t e = cudaMemcpy(dst, src, nbytes, k); e != cudaSuccess)
      return cuda_failure(cat("cudaMemcpy(", nbytes, " bytes) on cuda:", index), e);
    return {};
  }

  Status synchronize(int index) const override {
    ETRT_TRY(ScopedDevice scope, ScopedDevice::enter(index));
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
      return cuda_failure(cat("cudaDeviceSynchronize on cuda:", index), e);
    return {};
  }
};

/// The process's CUDA device layer (a function-local static: nothing runs before first use).
inline const CudaDevice& cuda_device() {
  static const CudaDevice d;
  return d;
}

}  // namespace etrt::cuda
