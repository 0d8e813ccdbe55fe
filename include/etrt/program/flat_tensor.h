// FlatTensorData: a .ptd file (identifier "FT01" with the "FH01" header): named blobs with tensor layouts,
// used for a program's EXTERNAL tensors (flat_tensor.fbs).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "etrt/program/data_source.h"
#include "etrt/program/tensor_meta.h"

namespace etrt {

struct NamedBlob {
  std::span<const uint8_t> bytes;
  bool has_layout = false;
  ScalarType dtype = ScalarType::Byte;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> dim_order;
};

class FlatTensorData {
 public:
  static Result<std::shared_ptr<const FlatTensorData>> load(std::shared_ptr<const DataSource> source) {
    const auto file = source->bytes();
    if (file.size() < 48) return fail(Error::InvalidExternalData, "data file: ", file.size(), " bytes is too small");
    if (std::memcmp(file.data() + 4, "FT01", 4) != 0)
      return fail(Error::InvalidExternalData, "data file: not a .ptd file (identifier bytes 4..7 are not 'FT01')");
    if (std::memcmp(file.data() + 8, "FH01", 4) != 0)
      return fail(Error::InvalidExternalData, "data file: missing the FH01 header");
    const uint32_t hlen = fb::load_le<uint32_t>(file.data() + 12);
    const uint64_t fb_off = fb::load_le<uint64_t>(file.data() + 16);
    const uint64_t fb_size = fb::load_le<uint64_t>(file.data() + 24);
    const uint64_t sbo = fb::load_le<uint64_t>(file.data() + 32);
    const uint64_t sds = fb::load_le<uint64_t>(file.data() + 40);
    if (hlen < 40) return fail(Error::InvalidExternalData, "data file: FH01 header length ", hlen, " < 40");
    if (fb_off > file.size() || fb_size > file.size() - fb_off || sbo > file.size() || sds > file.size() - sbo)
      return fail(Error::InvalidExternalData, "data file: header ranges exceed the file of ", file.size(),
                  " bytes (truncated file?)");
    auto d = std::shared_ptr<FlatTensorData>(new FlatTensorData());
    d->source_ = source;
    fb::Reader r(file.subspan(0, fb_off + fb_size), "data file");
    const fb::Table root = r.root();
    if (!r.ok()) return Failure{Error::InvalidExternalData, r.failure().what};
    for (int slot = 3; slot < root.num_slots(); ++slot)
      if (root.field_offset(slot) != 0)
        return fail(Error::InvalidExternalData, "data file: old FT01 layout (2025-04) is not supported; re-export it");
    bool has_segments = false, has_named = false;
    const auto segments = root.tables(1, "FlatTensor.segments", &has_segments);
    const auto named = root.tables(2, "FlatTensor.named_data", &has_named);
    if (!r.ok()) return Failure{Error::InvalidExternalData, r.failure().what};
    if (!has_segments || !has_named)
      return fail(Error::InvalidExternalData, "data file: segments and named_data are required");
    const auto seg_data = file.subspan(sbo, sds);
    for (uint32_t i = 0; i < named.size(); ++i) {
      const fb::Table n = named.at(i);
      NamedBlob blob;
      const std::string_view key = n.string(0, "NamedData.key");
      const uint32_t si = n.scalar<uint32_t>(1, 0, "NamedData.segment_index");
      if (si >= segments.size())
        return fail(Error::InvalidExternalData, "data file: '", key, "' segment ", si, " out of range");
      const fb::Table s = segments.at(si);
      const uint64_t off = s.scalar<uint64_t>(0, 0, "DataSegment.offset");
      const uint64_t size = s.scalar<uint64_t>(1, 0, "DataSegment.size");
      if (off > seg_data.size() || size > seg_data.size() - off)
        return fail(Error::InvalidExternalData, "data file: '", key, "' [", off, ", +", size,
                    ") exceeds the segment data of ", seg_data.size(), " bytes");
      blob.bytes = seg_data.subspan(off, size);
      const fb::Table layout = n.table(2, "NamedData.tensor_layout");
      if (layout.present()) {
        blob.has_layout = true;
        const int st = layout.scalar<int8_t>(0, 0, "TensorLayout.scalar_type");
        if (!is_schema_scalar_type(st))
          return fail(Error::InvalidExternalData, "data file: '", key, "' has invalid scalar type ", st);
        blob.dtype = static_cast<ScalarType>(st);
        const auto sizes = layout.vector<int32_t>(1, "TensorLayout.sizes");
        const auto order = layout.vector<uint8_t>(2, "TensorLayout.dim_order");
        for (uint32_t k = 0; k < sizes.size(); ++k) blob.sizes.push_back(sizes[k]);
        for (uint32_t k = 0; k < order.size(); ++k) blob.dim_order.push_back(order[k]);
      }
      if (!r.ok()) return Failure{Error::InvalidExternalData, r.failure().what};
      d->entries_.emplace_back(key, std::move(blob));
    }
    return std::shared_ptr<const FlatTensorData>(std::move(d));
  }

  Result<const NamedBlob*> get(std::string_view key) const {
    for (const auto& [k, b] : entries_)
      if (k == key) return &b;
    return fail(Error::NotFound, "external data '", key, "' not found in the data file");
  }
  std::vector<std::string_view> keys() const {
    std::vector<std::string_view> out;
    for (const auto& e : entries_) out.push_back(e.first);
    return out;
  }

 private:
  FlatTensorData() = default;
  std::shared_ptr<const DataSource> source_;
  std::vector<std::pair<std::string_view, NamedBlob>> entries_;
};

}  // namespace etrt
