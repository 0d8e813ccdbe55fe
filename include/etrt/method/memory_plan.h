// PlannedMemory: one arena per memory id of a method (ids are 1-based in the file), owned by the Method.
//
// An arena lives where the program's non_const_buffer_device puts it: host memory, or memory on a device obtained
// through the DeviceInterface the Method was loaded with.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "etrt/core/result.h"
#include "etrt/core/tensor.h"
#include "etrt/device/device_interface.h"

namespace etrt {

/// Frees memory from allocate_aligned: the block's original pointer sits just before the aligned address.
struct AlignedFree {
  void operator()(uint8_t* p) const {
    if (p) std::free(reinterpret_cast<void**>(p)[-1]);
  }
};
using ArenaPtr = std::unique_ptr<uint8_t, AlignedFree>;

/// Largest single allocation the runtime attempts; anything larger in a file is treated as corrupt.
inline constexpr size_t kMaxAllocationBytes = size_t{1} << 40;

/// 64-byte-aligned, zero-filled storage, or null when the memory is not available. calloc leaves large blocks
/// to the kernel's zero pages, so an arena costs nothing until it is touched.
inline ArenaPtr allocate_aligned(size_t nbytes) {
  if (nbytes > kMaxAllocationBytes) return ArenaPtr(nullptr);
  void* raw = std::calloc(1, nbytes + 64 + sizeof(void*));
  if (!raw) return ArenaPtr(nullptr);
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw) + sizeof(void*);
  auto* aligned = reinterpret_cast<uint8_t*>((base + 63) & ~uintptr_t{63});
  reinterpret_cast<void**>(aligned)[-1] = raw;
  return ArenaPtr(aligned);
}

class PlannedMemory {
 public:
  /// `sizes[i]` is the size of memory id i + 1, `devices[i]` where it lives (missing entries: the host).
  static Result<PlannedMemory> allocate(std::span<const int64_t> sizes, std::span<const Device> devices,
                                        const DeviceInterface* device_api) {
    PlannedMemory m;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Device dev = i < devices.size() ? devices[i] : Device{};
      const size_t nbytes = static_cast<size_t>(sizes[i]);
      m.sizes_.push_back(nbytes);
      m.devices_.push_back(dev);
      if (!dev.is_cpu()) {
        if (!device_api || device_api->type() != dev.type)
          return fail(Error::NotSupported, "planned buffer ", i + 1, " lives on ", dev.str(),
                      ", which needs the CUDA-enabled build (pip install with cuda=enabled)");
        if (dev.index < 0 || dev.index >= device_api->device_count())
          return fail(Error::NotSupported, "planned buffer ", i + 1, " lives on ", dev.str(), ", but this machine has ",
                      device_api->device_count(), " CUDA device(s)");
        if (nbytes > kMaxAllocationBytes)
          return fail(Error::MemoryAllocationFailed, "planned buffer ", i + 1, " of ", sizes[i], " bytes is too large");
        auto buf = DeviceBuffer::allocate(*device_api, nbytes, dev.index);
        if (!buf)
          return fail(Error::MemoryAllocationFailed, "cannot allocate planned buffer ", i + 1, " of ", sizes[i],
                      " bytes on ", dev.str(), ": ", buf.error().what);
        m.arenas_.push_back(ArenaPtr(nullptr));
        m.device_arenas_.push_back(std::move(*buf));
        continue;
      }
      m.arenas_.push_back(allocate_aligned(nbytes));
      m.device_arenas_.emplace_back();
      if (!m.arenas_.back())
        return fail(Error::MemoryAllocationFailed, "cannot allocate planned buffer ", i + 1, " of ", sizes[i],
                    " bytes");
    }
    return Result<PlannedMemory>(std::move(m));  // explicit: nvcc does not move implicitly into Result
  }

  /// The address of [offset, offset + nbytes) in arena `memory_id` (1-based), overflow- and bounds-checked. For a
  /// device arena this is a device address.
  Result<uint8_t*> address(uint32_t memory_id, uint64_t offset, size_t nbytes) const {
    if (memory_id == 0 || memory_id > arenas_.size())
      return fail(Error::InvalidProgram, "memory_id ", memory_id, " out of range (", arenas_.size(), " arenas)");
    const size_t size = sizes_[memory_id - 1];
    if (offset > size || nbytes > size - offset)
      return fail(Error::InvalidProgram, "planned tensor [", offset, ", +", nbytes, ") exceeds arena ", memory_id,
                  " of ", size, " bytes");
    return base(memory_id - 1) + offset;
  }
  /// Where arena `memory_id` (1-based, in range) lives.
  Device device(uint32_t memory_id) const { return devices_[memory_id - 1]; }
  size_t num_arenas() const { return arenas_.size(); }
  size_t arena_size(size_t i) const { return sizes_[i]; }

 private:
  uint8_t* base(size_t i) const {
    return devices_[i].is_cpu() ? arenas_[i].get() : static_cast<uint8_t*>(device_arenas_[i].data());
  }
  std::vector<ArenaPtr> arenas_;
  std::vector<DeviceBuffer> device_arenas_;
  std::vector<Device> devices_;
  std::vector<size_t> sizes_;
};

}  // namespace etrt
