// PlannedMemory: one arena per memory id of a method (ids are 1-based in the file), owned by the Method.
#pragma once

#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "etrt/core/result.h"
#include "etrt/core/tensor.h"

namespace etrt {

struct AlignedFree {
  void operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t{64}); }
};
using ArenaPtr = std::unique_ptr<uint8_t, AlignedFree>;

/// 64-byte-aligned, zero-filled storage.
inline ArenaPtr allocate_aligned(size_t nbytes) {
  auto* p = static_cast<uint8_t*>(::operator new(nbytes ? nbytes : 1, std::align_val_t{64}));
  std::memset(p, 0, nbytes ? nbytes : 1);
  return ArenaPtr(p);
}

class PlannedMemory {
 public:
  /// `sizes[i]` is the size of memory id i + 1.
  static Result<PlannedMemory> allocate(std::span<const int64_t> sizes, std::span<const Device> devices) {
    PlannedMemory m;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i < devices.size() && !devices[i].is_cpu())
        return fail(Error::NotSupported, "planned buffer ", i + 1, " lives on ", devices[i].str(),
                    ", which needs the CUDA-enabled build");
      m.sizes_.push_back(static_cast<size_t>(sizes[i]));
      m.arenas_.push_back(allocate_aligned(static_cast<size_t>(sizes[i])));
    }
    return m;
  }

  /// The address of [offset, offset + nbytes) in arena `memory_id` (1-based), overflow- and bounds-checked.
  Result<uint8_t*> address(uint32_t memory_id, uint64_t offset, size_t nbytes) const {
    if (memory_id == 0 || memory_id > arenas_.size())
      return fail(Error::InvalidProgram, "memory_id ", memory_id, " out of range (", arenas_.size(), " arenas)");
    const size_t size = sizes_[memory_id - 1];
    if (offset > size || nbytes > size - offset)
      return fail(Error::InvalidProgram, "planned tensor [", offset, ", +", nbytes, ") exceeds arena ", memory_id,
                  " of ", size, " bytes");
    return arenas_[memory_id - 1].get() + offset;
  }
  size_t num_arenas() const { return arenas_.size(); }
  size_t arena_size(size_t i) const { return sizes_[i]; }

 private:
  std::vector<ArenaPtr> arenas_;
  std::vector<size_t> sizes_;
};

}  // namespace etrt
