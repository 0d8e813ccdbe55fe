// The optional "eh00" extended header spliced in at byte 8 of a .pte: magic, header length, program size, segment
// base offset and segment data size, little-endian.
#pragma once

#include <cstdint>
#include <span>

#include "etrt/core/result.h"
#include "etrt/format/flatbuffer.h"

namespace etrt::pte {

struct ExtendedHeader {
  bool present = false;
  uint64_t program_size = 0;         // bytes [0, program_size) are the flatbuffer region
  uint64_t segment_base_offset = 0;  // absolute offset of segment data; 0 = no segments
  uint64_t segment_data_size = 0;    // only written when header_length >= 32
};

inline constexpr size_t kMinHeaderLength = 24;

/// Parses and checks the header against the file size; a file without "eh00" is all flatbuffer.
inline Result<ExtendedHeader> parse_extended_header(std::span<const uint8_t> file) {
  ExtendedHeader h;
  if (file.size() < 8) return fail(Error::InvalidProgram, "program: file of ", file.size(), " bytes is too small");
  if (file.size() < 16 || std::memcmp(file.data() + 8, "eh00", 4) != 0) {
    h.program_size = file.size();
    return h;
  }
  const uint32_t len = fb::load_le<uint32_t>(file.data() + 12);
  if (len < kMinHeaderLength || file.size() < 8 + static_cast<uint64_t>(len))
    return fail(Error::InvalidProgram, "program: extended header length ", len, " is invalid for a file of ",
                file.size(), " bytes");
  h.present = true;
  h.program_size = fb::load_le<uint64_t>(file.data() + 16);
  h.segment_base_offset = fb::load_le<uint64_t>(file.data() + 24);
  if (len >= 32) h.segment_data_size = fb::load_le<uint64_t>(file.data() + 32);
  if (h.program_size < 8 || h.program_size > file.size())
    return fail(Error::InvalidProgram, "program: extended header program_size ", h.program_size,
                " exceeds the file size ", file.size(), " (truncated file?)");
  if (h.segment_base_offset != 0) {
    if (h.segment_base_offset < h.program_size || h.segment_base_offset > file.size())
      return fail(Error::InvalidProgram, "program: segment_base_offset ", h.segment_base_offset,
                  " is outside the file of ", file.size(), " bytes (truncated file?)");
    if (h.segment_data_size > file.size() - h.segment_base_offset)
      return fail(Error::InvalidProgram, "program: segment data of ", h.segment_data_size, " bytes at ",
                  h.segment_base_offset, " exceeds the file size ", file.size(), " (truncated file?)");
  }
  return h;
}

}  // namespace etrt::pte
