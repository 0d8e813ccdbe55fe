// DeviceInterface: memory, copies and waits on a non-CPU device.
//
// The core never calls a device API itself. A build with CUDA hands the CUDA implementation
// (etrt/backends/cuda/cuda_device.h) to Method::load through LoadOptions; without one, a program that places
// memory on a device fails to load with an error saying so. Tests use a host-emulated device
// (etrt/device/host_emulated_device.h) to exercise every device code path on machines without a GPU.
#pragma once

#include <cstddef>
#include <memory>

#include "etrt/core/result.h"
#include "etrt/core/tensor.h"

namespace etrt {

enum class CopyKind : uint8_t { HostToDevice, DeviceToHost, DeviceToDevice };

class DeviceInterface {
 public:
  virtual ~DeviceInterface() = default;
  virtual DeviceType type() const = 0;
  /// Number of devices of this type present (0 when the driver or hardware is missing).
  virtual int device_count() const = 0;
  /// `nbytes` of zero-filled memory on device `index`. Null data is never returned for nbytes > 0.
  virtual Result<void*> allocate(size_t nbytes, int index) const = 0;
  virtual void release(void* p, int index) const noexcept = 0;
  /// Copies `nbytes`. When it returns the host may reuse or read host memory on either side; a copy between two
  /// device buffers completes in the device's order, before any later work on that device.
  virtual Status copy(void* dst, const void* src, size_t nbytes, CopyKind kind, int index) const = 0;
  /// Waits for all work queued on device `index` (for CUDA: cudaDeviceSynchronize).
  virtual Status synchronize(int index) const = 0;
};

/// Owns one device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(const DeviceInterface& dev, size_t nbytes, int index) {
    DeviceBuffer b;
    b.dev_ = &dev;
    b.index_ = index;
    b.size_ = nbytes;
    // Explicit moves: nvcc's front end does not apply C++20's implicit move into Result<DeviceBuffer>.
    if (nbytes == 0) return Result<DeviceBuffer>(std::move(b));
    ETRT_TRY(b.data_, dev.allocate(nbytes, index));
    return Result<DeviceBuffer>(std::move(b));
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      dev_ = o.dev_;
      data_ = o.data_;
      size_ = o.size_;
      index_ = o.index_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void* data() const { return data_; }
  size_t size() const { return size_; }
  int index() const { return index_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  void reset() {
    if (data_ && dev_) dev_->release(data_, index_);
    data_ = nullptr;
    size_ = 0;
  }
  const DeviceInterface* dev_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
  int index_ = 0;
};

/// The copy between two placements, or an error when neither side is a device of `dev`'s type.
inline Result<CopyKind> copy_kind(Device dst, Device src) {
  if (src.is_cpu() && !dst.is_cpu()) return CopyKind::HostToDevice;
  if (!src.is_cpu() && dst.is_cpu()) return CopyKind::DeviceToHost;
  if (!src.is_cpu() && !dst.is_cpu()) {
    if (src.index != dst.index)
      return fail(Error::NotSupported, "copy between ", src.str(), " and ", dst.str(), " is not supported");
    return CopyKind::DeviceToDevice;
  }
  return fail(Error::InvalidArgument, "copy between two host tensors is not a device copy");
}

}  // namespace etrt
