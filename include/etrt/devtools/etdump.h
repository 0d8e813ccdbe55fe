// ETDump (`.etdp`) writer and reader: the profiling dump of devtools/etdump/etdump_schema_flatcc.fbs.
//
// Container (SCHEMA.md §6, FORMAT.md §13): a size-prefixed flatbuffer. u32 at byte 0 = file size - 4, root uoffset
// at byte 4 (relative to byte 4), identifier "ED00" at bytes 8..11; scalars aligned relative to byte 0.
//
// Note [etdump defaults]: the in-memory defaults below are the runtime's "unset" values (chain -1 =
// kUnsetChainId, instruction 0 = kUnsetDebugHandle), which differ from the *schema* defaults
// (ProfileEvent.chain_index 0, instruction_id -1, delegate_debug_id_int -1, RunData.bundled_input_index -1). The
// writer omits a field only when it equals the schema default, and the reader returns the schema default for an
// absent field, so every value round-trips exactly; e.g. a default-constructed ProfileEvent writes both chain -1
// and instruction 0, and upstream's `chain_index = 0` events carry no chain slot at all.
//
// Only profile events are modelled. The reader skips allocation/debug events (and allocators) without decoding them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "etrt/core/result.h"
#include "etrt/format/flatbuffer.h"
#include "etrt/format/flatbuffer_builder.h"

namespace etrt::etdump {

inline constexpr std::string_view kIdentifier = "ED00";

struct ProfileEvent {
  std::string name;  // empty = absent (delegate events identified by an int id have no name)
  int32_t chain_index = -1;
  int32_t instruction_id = 0;
  int32_t delegate_debug_id_int = -1;
  uint64_t start_time = 0, end_time = 0;
  std::string delegate_debug_id_str;             // empty = absent
  std::vector<uint8_t> delegate_debug_metadata;  // empty = absent
  bool operator==(const ProfileEvent&) const = default;
};

struct RunData {
  std::string name;
  int32_t bundled_input_index = -1;
  std::vector<ProfileEvent> profile_events;
  bool operator==(const RunData&) const = default;
};

struct ETDumpData {
  uint32_t version = 0;
  std::vector<RunData> runs;
  bool operator==(const ETDumpData&) const = default;
};

inline ProfileEvent make_event(std::string name, int32_t chain, int32_t instr, uint64_t start, uint64_t end) {
  ProfileEvent e;
  e.name = std::move(name);
  e.chain_index = chain;
  e.instruction_id = instr;
  e.start_time = start;
  e.end_time = end;
  return e;
}

/// Schema slots and defaults (SCHEMA.md §6).
namespace schema {
// ETDump
inline constexpr int kETDumpVersion = 0, kETDumpRunData = 1;
// RunData
inline constexpr int kRunName = 0, kRunBundledInputIndex = 1, kRunAllocators = 2, kRunEvents = 3;
inline constexpr int32_t kDefaultBundledInputIndex = -1;
// Event
inline constexpr int kEventProfile = 0, kEventAllocation = 1, kEventDebug = 2;
// ProfileEvent
inline constexpr int kPeName = 0, kPeChainIndex = 1, kPeInstructionId = 2, kPeDelegateIdInt = 3,
                     kPeDelegateIdStr = 4, kPeDelegateMetadata = 5, kPeStartTime = 6, kPeEndTime = 7;
inline constexpr int32_t kDefaultChainIndex = 0, kDefaultInstructionId = -1, kDefaultDelegateIdInt = -1;
}  // namespace schema

/// Serialises `data` as a size-prefixed "ED00" flatbuffer. An ETDumpData without runs still yields a valid buffer
/// (with an empty run_data vector).
inline std::vector<uint8_t> write_etdump(const ETDumpData& data) {
  using namespace schema;
  fb::Builder b;
  std::vector<fb::Builder::Offset> runs;
  runs.reserve(data.runs.size());
  for (const RunData& run : data.runs) {
    std::vector<fb::Builder::Offset> events;
    events.reserve(run.profile_events.size());
    for (const ProfileEvent& e : run.profile_events) {
      const auto name = e.name.empty() ? 0 : b.create_string(e.name);
      const auto id_str = e.delegate_debug_id_str.empty() ? 0 : b.create_string(e.delegate_debug_id_str);
      const auto meta = e.delegate_debug_metadata.empty() ? 0 : b.create_vector(e.delegate_debug_metadata);
      b.start_table();
      b.add_scalar<uint64_t>(kPeStartTime, e.start_time, 0);
      b.add_scalar<uint64_t>(kPeEndTime, e.end_time, 0);
      b.add_offset(kPeName, name);
      b.add_scalar<int32_t>(kPeChainIndex, e.chain_index, kDefaultChainIndex);
      b.add_scalar<int32_t>(kPeInstructionId, e.instruction_id, kDefaultInstructionId);
      b.add_scalar<int32_t>(kPeDelegateIdInt, e.delegate_debug_id_int, kDefaultDelegateIdInt);
      b.add_offset(kPeDelegateIdStr, id_str);
      b.add_offset(kPeDelegateMetadata, meta);
      const auto pe = b.end_table();
      b.start_table();
      b.add_offset(kEventProfile, pe);
      events.push_back(b.end_table());
    }
    const auto ev_vec = b.create_offset_vector(events);
    const auto name = b.create_string(run.name);
    b.start_table();
    b.add_offset(kRunName, name);
    b.add_scalar<int32_t>(kRunBundledInputIndex, run.bundled_input_index, kDefaultBundledInputIndex);
    b.add_offset(kRunEvents, ev_vec);
    runs.push_back(b.end_table());
  }
  const auto run_vec = b.create_offset_vector(runs);
  b.start_table();
  b.add_scalar<uint32_t>(kETDumpVersion, data.version, 0);
  b.add_offset(kETDumpRunData, run_vec);
  const auto root = b.end_table();
  return b.finish(root, kIdentifier, /*size_prefixed=*/true);
}

/// Decodes an ETDump. Bad bytes give an InvalidProgram failure naming the cause, never a crash. Shared sub-objects
/// are legal flatbuffers, so the decoded size is bounded (64 x input + 1 MiB) against amplification by crafted
/// files.
inline Result<ETDumpData> read_etdump(std::span<const uint8_t> bytes) {
  using namespace schema;
  if (bytes.size() < 12) return fail(Error::InvalidProgram, "etdump: ", bytes.size(), " bytes is too small");
  const uint32_t prefix = fb::load_le<uint32_t>(bytes.data());
  if (static_cast<uint64_t>(prefix) + 4 != bytes.size())
    return fail(Error::InvalidProgram, "etdump: size prefix ", prefix, " does not match file size ", bytes.size(),
                " - 4");
  fb::Reader r(bytes, "etdump");
  if (r.identifier(4) != kIdentifier)
    return fail(Error::InvalidProgram, "etdump: identifier at bytes 8..11 is not ED00");

  const uint64_t budget = 64ull * bytes.size() + (1u << 20);
  uint64_t used = 0;
  auto spend = [&](uint64_t n) {
    used += n;
    if (used > budget) r.set_error("decoded size exceeds ", budget, " bytes (shared objects?)");
    return r.ok();
  };

  ETDumpData out;
  const fb::Table root = r.root(4);
  out.version = root.scalar<uint32_t>(kETDumpVersion, 0, "ETDump.version");
  const auto runs = root.tables(kETDumpRunData, "ETDump.run_data");
  out.runs.reserve(runs.size());
  for (uint32_t i = 0; i < runs.size() && r.ok(); ++i) {
    const fb::Table rt = runs.at(i);
    RunData run;
    run.name = std::string(rt.string(kRunName, "RunData.name"));
    run.bundled_input_index =
        rt.scalar<int32_t>(kRunBundledInputIndex, kDefaultBundledInputIndex, "RunData.bundled_input_index");
    const auto events = rt.tables(kRunEvents, "RunData.events");
    if (!spend(sizeof(RunData) + run.name.size() + 4ull * events.size())) break;
    for (uint32_t j = 0; j < events.size() && r.ok(); ++j) {
      const fb::Table et = events.at(j);
      const fb::Table pt = et.table(kEventProfile, "Event.profile_event");
      if (!pt.present()) continue;  // allocation/debug event (or an empty one): skipped
      ProfileEvent e;
      e.name = std::string(pt.string(kPeName, "ProfileEvent.name"));
      e.chain_index = pt.scalar<int32_t>(kPeChainIndex, kDefaultChainIndex, "ProfileEvent.chain_index");
      e.instruction_id = pt.scalar<int32_t>(kPeInstructionId, kDefaultInstructionId, "ProfileEvent.instruction_id");
      e.delegate_debug_id_int =
          pt.scalar<int32_t>(kPeDelegateIdInt, kDefaultDelegateIdInt, "ProfileEvent.delegate_debug_id_int");
      e.delegate_debug_id_str = std::string(pt.string(kPeDelegateIdStr, "ProfileEvent.delegate_debug_id_str"));
      const auto meta = pt.vector<uint8_t>(kPeDelegateMetadata, "ProfileEvent.delegate_debug_metadata");
      e.delegate_debug_metadata.assign(meta.bytes(), meta.bytes() + meta.size());
      e.start_time = pt.scalar<uint64_t>(kPeStartTime, 0, "ProfileEvent.start_time");
      e.end_time = pt.scalar<uint64_t>(kPeEndTime, 0, "ProfileEvent.end_time");
      if (!r.ok()) break;
      if (!spend(sizeof(ProfileEvent) + e.name.size() + e.delegate_debug_id_str.size() +
                 e.delegate_debug_metadata.size()))
        break;
      run.profile_events.push_back(std::move(e));
    }
    out.runs.push_back(std::move(run));
  }
  if (!r.ok()) return r.take_failure();
  return out;
}

}  // namespace etrt::etdump
