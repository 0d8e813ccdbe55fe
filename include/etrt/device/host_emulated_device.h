// HostEmulatedDevice: a DeviceInterface whose "device memory" is host memory, labelled as another device type.
//
// It lets every device code path (device arenas, host/device copies at delegate boundaries, the CUDA delegate's
// graph executor with host kernels, waits) run and be tested on machines without a GPU. It counts its calls so
// tests can check how often the runtime copies and waits.
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "etrt/device/device_interface.h"

namespace etrt {

class HostEmulatedDevice final : public DeviceInterface {
 public:
  explicit HostEmulatedDevice(DeviceType type = DeviceType::CUDA, int count = 1) : type_(type), count_(count) {}

  DeviceType type() const override { return type_; }
  int device_count() const override { return count_; }
  Result<void*> allocate(size_t nbytes, int index) const override {
    ETRT_CHECK_OK(check_index(index));
    void* p = std::calloc(1, nbytes ? nbytes : 1);
    if (!p) return fail(Error::MemoryAllocationFailed, "emulated device: cannot allocate ", nbytes, " bytes");
    ++allocations;
    ++live_allocations;
    return p;
  }
  void release(void* p, int) const noexcept override {
    if (!p) return;
    std::free(p);
    --live_allocations;
  }
  Status copy(void* dst, const void* src, size_t nbytes, CopyKind kind, int index) const override {
    ETRT_CHECK_OK(check_index(index));
    if (nbytes) std::memmove(dst, src, nbytes);
    ++copies[static_cast<int>(kind)];
    return {};
  }
  Status synchronize(int index) const override {
    ETRT_CHECK_OK(check_index(index));
    ++waits;
    return {};
  }

  mutable std::atomic<int64_t> allocations{0}, live_allocations{0}, waits{0};
  mutable std::atomic<int64_t> copies[3] = {0, 0, 0};  // indexed by CopyKind

 private:
  Status check_index(int index) const {
    if (index < 0 || index >= count_)
      return fail(Error::InvalidArgument, "emulated device index ", index, " out of range (", count_, " devices)");
    return {};
  }
  DeviceType type_;
  int count_;
};

}  // namespace etrt
