// TensorMeta: what a serialized program Tensor says about a tensor, checked once when it is parsed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "etrt/core/evalue.h"
#include "etrt/format/flatbuffer.h"
#include "etrt/format/pte_schema.h"

namespace etrt {

/// Where a tensor's bytes come from: planned memory, a constant, or external data.
struct TensorMeta {
  ScalarType dtype = ScalarType::Float;
  std::vector<int64_t> sizes;       // upper bounds for dynamic shapes
  std::vector<uint8_t> dim_order;   // outermost first; identity = contiguous
  ShapeDynamism dynamism = ShapeDynamism::Static;
  bool has_allocation = false;      // memory-planned into an arena
  uint32_t memory_id = 0;           // 1-based arena id
  uint64_t memory_offset = 0;       // bytes into the arena
  uint32_t data_buffer_idx = 0;     // 0 = no serialized data
  bool external = false;            // data from a named data map (.ptd), looked up by `fqn`
  std::string_view fqn;             // fully qualified name, empty when absent
  Device device{};

  /// Upstream's rule: constants count as planned.
  bool is_memory_planned() const { return has_allocation || data_buffer_idx != 0; }
  size_t nbytes() const { return static_cast<size_t>(checked_numel(sizes)) * element_size(dtype); }
  bool is_constant() const { return !has_allocation && (data_buffer_idx != 0 || external); }
};

/// The ScalarType values a program may hold: the schema's (scalar_type.fbs omits 8..10 and 18..21) plus the complex
/// types 8..10, which upstream's exporter writes for complex intermediates (torch.fft.rfft's output) and upstream's
/// runtime accepts.
inline bool is_schema_scalar_type(int v) { return (v >= 0 && v <= 17) || (v >= 22 && v <= 29); }

inline Result<TensorMeta> parse_tensor_meta(const fb::Table& t, const fb::Reader& r, std::string_view where) {
  namespace S = pte::tensor;
  TensorMeta m;
  const int st = t.scalar<int8_t>(S::scalar_type, 0, "Tensor.scalar_type");
  if (!is_schema_scalar_type(st)) return fail(Error::InvalidProgram, where, ": invalid scalar type ", st);
  m.dtype = static_cast<ScalarType>(st);
  if (t.scalar<int32_t>(S::storage_offset, 0, "Tensor.storage_offset") != 0)
    return fail(Error::NotSupported, where, ": non-zero storage_offset");
  const auto sizes = t.vector<int32_t>(S::sizes, "Tensor.sizes");
  const auto dim_order = t.vector<uint8_t>(S::dim_order, "Tensor.dim_order");
  if (!r.ok()) return r.take_failure();
  if (sizes.size() > static_cast<uint32_t>(kMaxDims))
    return fail(Error::NotSupported, where, ": rank ", sizes.size(), " exceeds ", kMaxDims);
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) return fail(Error::InvalidProgram, where, ": negative size ", sizes[i]);
    m.sizes.push_back(sizes[i]);
  }
  // nbytes() must not overflow, and neither may the strides, which multiply the sizes even when one of them is 0.
  {
    std::vector<int64_t> nonzero(m.sizes);
    for (int64_t& s : nonzero) s = std::max<int64_t>(s, 1);
    const int64_t span = checked_numel(nonzero);
    if (span < 0 || static_cast<uint64_t>(span) > (uint64_t{1} << 62) / std::max<size_t>(element_size(m.dtype), 1))
      return fail(Error::InvalidProgram, where, ": sizes ", shape_str(m.sizes), " overflow");
  }
  for (uint32_t i = 0; i < dim_order.size(); ++i) m.dim_order.push_back(dim_order[i]);
  if (m.dim_order.empty()) {
    for (size_t i = 0; i < m.sizes.size(); ++i) m.dim_order.push_back(static_cast<uint8_t>(i));
  }
  if (m.dim_order.size() != m.sizes.size() || !is_valid_dim_order(m.dim_order))
    return fail(Error::InvalidProgram, where, ": dim_order is not a permutation of ", m.sizes.size(), " dims");
  const int dyn = t.scalar<int8_t>(S::shape_dynamism, 0, "Tensor.shape_dynamism");
  if (dyn < 0 || dyn > 2) return fail(Error::InvalidProgram, where, ": invalid shape_dynamism ", dyn);
  m.dynamism = static_cast<ShapeDynamism>(dyn);
  m.data_buffer_idx = t.scalar<uint32_t>(S::data_buffer_idx, 0, "Tensor.data_buffer_idx");
  const fb::Table alloc = t.table(S::allocation_info, "Tensor.allocation_info");
  if (alloc.present()) {
    m.has_allocation = true;
    m.memory_id = alloc.scalar<uint32_t>(pte::alloc::memory_id, 0, "AllocationDetails.memory_id");
    const uint64_t lo = alloc.scalar<uint32_t>(pte::alloc::memory_offset_low, 0, "memory_offset_low");
    const uint64_t hi = alloc.scalar<uint32_t>(pte::alloc::memory_offset_high, 0, "memory_offset_high");
    m.memory_offset = lo | (hi << 32);
  }
  const fb::Table extra = t.table(S::extra_tensor_info, "Tensor.extra_tensor_info");
  if (extra.present()) {
    m.fqn = extra.string(pte::extra::fully_qualified_name, "ExtraTensorInfo.fully_qualified_name");
    const int loc = extra.scalar<int8_t>(pte::extra::location, 0, "ExtraTensorInfo.location");
    if (loc != 0 && loc != 1) return fail(Error::InvalidProgram, where, ": invalid data location ", loc);
    m.external = loc == 1;
    const int dev = extra.scalar<int8_t>(pte::extra::device_type, 0, "ExtraTensorInfo.device_type");
    if (dev != 0 && dev != 1) return fail(Error::InvalidProgram, where, ": invalid device type ", dev);
    m.device = Device{static_cast<DeviceType>(dev), extra.scalar<int8_t>(pte::extra::device_index, 0, "device_index")};
    if (m.external && m.fqn.empty())
      return fail(Error::InvalidProgram, where, ": external tensor without a fully qualified name");
  }
  if (!r.ok()) return r.take_failure();
  return m;
}

}  // namespace etrt
