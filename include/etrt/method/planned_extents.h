// What a method's own tensors need from each planned arena, read before any arena is allocated.
//
// Note [arena sizes]: a file declares its arena sizes (non_const_buffer_sizes) apart from the tensors placed in
// them, so a corrupt or hostile file could ask for gigabytes that no tensor uses. The declared size is believed only
// up to the largest extent (offset + upper-bound bytes) a tensor of the method occupies in that arena: the arena
// allocated is the smaller of the two (a tensor reaching past the declared size is refused when it is placed).
// Refusing a larger declaration outright would refuse real programs: the exporter's planner also sizes arenas for
// values that a delegate absorbed and that the program no longer lists (64 bytes in its XNNPACK-lowered MLP).
// Offsets must be aligned for the tensor's element type, since kernels read planned tensors through typed pointers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "etrt/format/flatbuffer.h"
#include "etrt/format/pte_schema.h"
#include "etrt/program/method_meta.h"
#include "etrt/program/tensor_meta.h"

namespace etrt {

/// Per arena (memory_id 1..), the largest byte extent any planned tensor of the plan occupies.
inline Result<std::vector<uint64_t>> planned_extents(const fb::Table& plan, const fb::Reader& r,
                                                     const MethodMeta& meta, std::string_view where) {
  std::vector<uint64_t> extent(meta.planned_buffer_sizes.size(), 0);
  const auto values = plan.tables(pte::plan::values, "ExecutionPlan.values");
  if (!r.ok()) return r.take_failure();
  for (uint32_t i = 0; i < values.size(); ++i) {
    const fb::Table ev = values.at(i);
    if (ev.scalar<uint8_t>(pte::evalue::val_type, 0, "EValue.val_type") != uint8_t(pte::ValueTag::Tensor)) continue;
    const fb::Table val = ev.table(pte::evalue::val, "EValue.val");
    if (!r.ok()) return r.take_failure();
    if (!val.present()) continue;  // Method::load reports it
    const std::string at = cat(where, " value ", i);
    ETRT_TRY(const TensorMeta m, parse_tensor_meta(val, r, at));
    if (!m.has_allocation) continue;
    if (m.memory_id == 0 || m.memory_id > extent.size())
      return fail(Error::InvalidProgram, at, ": memory_id ", m.memory_id, " out of range (", extent.size(),
                  " arenas)");
    const size_t align = element_size(m.dtype);
    if (align > 1 && m.memory_offset % align != 0)
      return fail(Error::InvalidProgram, at, ": planned offset ", m.memory_offset, " is not aligned for ",
                  numpy_name(m.dtype), " (", align, " bytes)");
    const uint64_t nbytes = m.nbytes();
    if (m.memory_offset > UINT64_MAX - nbytes)
      return fail(Error::InvalidProgram, at, ": planned offset ", m.memory_offset, " overflows");
    extent[m.memory_id - 1] = std::max(extent[m.memory_id - 1], m.memory_offset + nbytes);
  }
  return extent;
}

/// The bytes to allocate per arena: the declared size, cut down to what the tensors reach (Note [arena sizes]).
/// With `max_planned_bytes` > 0, a method whose arenas together need more is refused, naming the sizes.
inline Result<std::vector<int64_t>> arena_allocation_sizes(const MethodMeta& meta, std::span<const uint64_t> extent,
                                                           uint64_t max_planned_bytes, std::string_view where) {
  std::vector<int64_t> sizes(extent.size());
  uint64_t total = 0;
  for (size_t k = 0; k < extent.size(); ++k) {
    const uint64_t declared = static_cast<uint64_t>(meta.planned_buffer_sizes[k]);
    sizes[k] = static_cast<int64_t>(std::min(declared, extent[k]));
    total += static_cast<uint64_t>(sizes[k]);
  }
  if (max_planned_bytes > 0 && total > max_planned_bytes)
    return fail(Error::MemoryAllocationFailed, where, ": its planned buffers need ", total,
                " bytes, over the load option's cap of ", max_planned_bytes, " bytes (max_planned_bytes)");
  return sizes;
}

}  // namespace etrt
