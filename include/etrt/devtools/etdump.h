// ETDump (`.etdp`) writer and reader: the profiling and debugging dump of devtools/etdump/etdump_schema_flatcc.fbs.
//
// Container (etdump_schema_flatcc.fbs): a size-prefixed flatbuffer. u32 at byte 0 = file size - 4, root uoffset
// at byte 4 (relative to byte 4), identifier "ED00" at bytes 8..11; scalars aligned relative to byte 0.
//
// Note [etdump defaults]: the ProfileEvent defaults below are the runtime's "unset" values (chain -1 =
// kUnsetChainId, instruction 0 = kUnsetDebugHandle), which differ from the *schema* defaults
// (ProfileEvent.chain_index 0, instruction_id -1, delegate_debug_id_int -1, RunData.bundled_input_index -1). The
// writer omits a field only when it equals the schema default, and the reader returns the schema default for an
// absent field, so every value round-trips exactly; e.g. a default-constructed ProfileEvent writes both chain -1
// and instruction 0, and upstream's `chain_index = 0` events carry no chain slot at all. DebugEvent's in-memory
// defaults are the schema's.
//
// Profile and debug events are modelled; the reader skips allocation events (and allocators) without decoding them.
//
// Note [debug events]: a DebugEvent carries one logged value (an intermediate output or a program output). A
// tensor's bytes are not in the flatbuffer: `TensorEntry::offset` is a byte offset into the separate debug buffer
// (the `.bin` written next to the `.etdp`), in the tensor's own memory order (sizes and strides in elements say
// how to read it). A tensor without bytes (numel 0) has offset kNoDebugData (-1), as upstream writes it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
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

/// etdump.ValueType: which field of a Value is set (a plain int8 enum, not a union).
enum class ValueType : int8_t {
  Null = 0, Int = 1, Bool = 2, Float = 3, Double = 4, Tensor = 5, TensorList = 6, String = 7
};

/// A debug-buffer offset meaning "no bytes" (an empty tensor): all ones, as upstream writes it.
inline constexpr int64_t kNoDebugData = -1;

/// etdump.Tensor: a logged tensor's metadata (Note [debug events]).
struct TensorEntry {
  int8_t scalar_type = 0;        // executorch_flatbuffer.ScalarType (the same numbers as etrt::ScalarType)
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements
  int64_t offset = 0;            // byte offset of the data in the debug buffer, or kNoDebugData
  bool operator==(const TensorEntry&) const = default;
};

/// etdump.Value: one logged value. Only the field that `type` selects is meaningful.
struct Value {
  ValueType type = ValueType::Null;
  std::vector<TensorEntry> tensors;  // one for Tensor, any number for TensorList
  int64_t int_value = 0;
  float float_value = 0;
  double double_value = 0;
  bool bool_value = false;
  bool output = false;  // a program output (Value.output = Bool{true}); intermediate outputs leave it absent
  bool operator==(const Value&) const = default;
};

/// etdump.DebugEvent. The defaults are the schema's, so an event read back equals the one written.
struct DebugEvent {
  uint64_t chain_index = 0;  // uint64 here (int32 in ProfileEvent); upstream writes the unset chain -1 as all ones
  int32_t instruction_id = -1;
  Value value;                     // the schema's `debug_entry`
  int32_t delegate_debug_id_int = -1;
  std::string delegate_debug_id_str;  // empty = absent
  std::string name;                   // empty = absent (upstream leaves it absent for kernel outputs)
  bool operator==(const DebugEvent&) const = default;
};

/// One etdump.Event: exactly one of its fields is set.
using Event = std::variant<ProfileEvent, DebugEvent>;

struct RunData {
  std::string name;
  int32_t bundled_input_index = -1;
  std::vector<Event> events;  // in the order they were completed
  bool operator==(const RunData&) const = default;
};

/// The profile events of a run, in order.
inline std::vector<ProfileEvent> profile_events(const RunData& run) {
  std::vector<ProfileEvent> out;
  for (const Event& e : run.events)
    if (const auto* p = std::get_if<ProfileEvent>(&e)) out.push_back(*p);
  return out;
}
/// The debug events of a run, in order.
inline std::vector<DebugEvent> debug_events(const RunData& run) {
  std::vector<DebugEvent> out;
  for (const Event& e : run.events)
    if (const auto* d = std::get_if<DebugEvent>(&e)) out.push_back(*d);
  return out;
}

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

/// Schema slots and defaults (etdump_schema_flatcc.fbs).
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
// DebugEvent (chain_index is uint64 here, default 0)
inline constexpr int kDeChainIndex = 0, kDeInstructionId = 1, kDeDebugEntry = 2, kDeDelegateIdInt = 3,
                     kDeDelegateIdStr = 4, kDeName = 5;
// Value
inline constexpr int kValType = 0, kValTensor = 1, kValTensorList = 2, kValInt = 3, kValFloat = 4, kValDouble = 5,
                     kValBool = 6, kValOutput = 7;
// Tensor
inline constexpr int kTensorScalarType = 0, kTensorSizes = 1, kTensorStrides = 2, kTensorOffset = 3;
// TensorList, Int, Bool, Float, Double: one field each, in slot 0.
inline constexpr int kOnlyField = 0;
}  // namespace schema

namespace detail {

inline fb::Builder::Offset write_tensor_entry(fb::Builder& b, const TensorEntry& t) {
  using namespace schema;
  // Sizes and strides are always written (also when empty): upstream's Python reader requires both.
  const auto sizes = b.create_vector(t.sizes);
  const auto strides = b.create_vector(t.strides);
  b.start_table();
  b.add_scalar<int64_t>(kTensorOffset, t.offset, 0);
  b.add_offset(kTensorSizes, sizes);
  b.add_offset(kTensorStrides, strides);
  b.add_scalar<int8_t>(kTensorScalarType, t.scalar_type, 0);
  return b.end_table();
}

/// A one-field table (Int, Bool, Float, Double) holding `v`.
template <class T>
fb::Builder::Offset write_boxed(fb::Builder& b, T v) {
  b.start_table();
  b.add_scalar<T>(schema::kOnlyField, v, T{});
  return b.end_table();
}

inline fb::Builder::Offset write_value(fb::Builder& b, const Value& v) {
  using namespace schema;
  fb::Builder::Offset tensor = 0, list = 0, boxed = 0, output = 0;
  switch (v.type) {
    case ValueType::Tensor:
      if (!v.tensors.empty()) tensor = write_tensor_entry(b, v.tensors.front());
      break;
    case ValueType::TensorList: {
      std::vector<fb::Builder::Offset> items;
      items.reserve(v.tensors.size());
      for (const TensorEntry& t : v.tensors) items.push_back(write_tensor_entry(b, t));
      const auto vec = b.create_offset_vector(items);
      b.start_table();
      b.add_offset(kOnlyField, vec);
      list = b.end_table();
      break;
    }
    case ValueType::Int: boxed = write_boxed<int64_t>(b, v.int_value); break;
    case ValueType::Bool: boxed = write_boxed<uint8_t>(b, v.bool_value ? 1 : 0); break;
    case ValueType::Float: boxed = write_boxed<float>(b, v.float_value); break;
    case ValueType::Double: boxed = write_boxed<double>(b, v.double_value); break;
    case ValueType::Null:
    case ValueType::String: break;  // no Value field carries a string
  }
  if (v.output) output = write_boxed<uint8_t>(b, 1);
  b.start_table();
  b.add_offset(kValTensor, tensor);
  b.add_offset(kValTensorList, list);
  const int boxed_slot = v.type == ValueType::Int      ? kValInt
                         : v.type == ValueType::Float  ? kValFloat
                         : v.type == ValueType::Double ? kValDouble
                                                       : kValBool;
  b.add_offset(boxed_slot, boxed);
  b.add_offset(kValOutput, output);
  b.add_scalar<int8_t>(kValType, static_cast<int8_t>(v.type), 0);
  return b.end_table();
}

inline fb::Builder::Offset write_profile_event(fb::Builder& b, const ProfileEvent& e) {
  using namespace schema;
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
  return b.end_table();
}

inline fb::Builder::Offset write_debug_event(fb::Builder& b, const DebugEvent& e) {
  using namespace schema;
  const auto value = write_value(b, e.value);
  const auto name = e.name.empty() ? 0 : b.create_string(e.name);
  const auto id_str = e.delegate_debug_id_str.empty() ? 0 : b.create_string(e.delegate_debug_id_str);
  b.start_table();
  b.add_scalar<uint64_t>(kDeChainIndex, e.chain_index, 0);
  b.add_offset(kDeDebugEntry, value);
  b.add_offset(kDeDelegateIdStr, id_str);
  b.add_offset(kDeName, name);
  b.add_scalar<int32_t>(kDeInstructionId, e.instruction_id, kDefaultInstructionId);
  b.add_scalar<int32_t>(kDeDelegateIdInt, e.delegate_debug_id_int, kDefaultDelegateIdInt);
  return b.end_table();
}

}  // namespace detail

/// Serialises `data` as a size-prefixed "ED00" flatbuffer. An ETDumpData without runs still yields a valid buffer
/// (with an empty run_data vector).
inline std::vector<uint8_t> write_etdump(const ETDumpData& data) {
  using namespace schema;
  fb::Builder b;
  std::vector<fb::Builder::Offset> runs;
  runs.reserve(data.runs.size());
  for (const RunData& run : data.runs) {
    std::vector<fb::Builder::Offset> events;
    events.reserve(run.events.size());
    for (const Event& e : run.events) {
      const bool is_profile = std::holds_alternative<ProfileEvent>(e);
      const auto inner = is_profile ? detail::write_profile_event(b, std::get<ProfileEvent>(e))
                                    : detail::write_debug_event(b, std::get<DebugEvent>(e));
      b.start_table();
      b.add_offset(is_profile ? kEventProfile : kEventDebug, inner);
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
      if (pt.present()) {
        ProfileEvent e;
        e.name = std::string(pt.string(kPeName, "ProfileEvent.name"));
        e.chain_index = pt.scalar<int32_t>(kPeChainIndex, kDefaultChainIndex, "ProfileEvent.chain_index");
        e.instruction_id =
            pt.scalar<int32_t>(kPeInstructionId, kDefaultInstructionId, "ProfileEvent.instruction_id");
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
        run.events.emplace_back(std::move(e));
        continue;
      }
      const fb::Table dt = et.table(kEventDebug, "Event.debug_event");
      if (!dt.present()) continue;  // an allocation event (or an empty one): skipped
      DebugEvent e;
      e.chain_index = dt.scalar<uint64_t>(kDeChainIndex, 0, "DebugEvent.chain_index");
      e.instruction_id = dt.scalar<int32_t>(kDeInstructionId, kDefaultInstructionId, "DebugEvent.instruction_id");
      e.delegate_debug_id_int =
          dt.scalar<int32_t>(kDeDelegateIdInt, kDefaultDelegateIdInt, "DebugEvent.delegate_debug_id_int");
      e.delegate_debug_id_str = std::string(dt.string(kDeDelegateIdStr, "DebugEvent.delegate_debug_id_str"));
      e.name = std::string(dt.string(kDeName, "DebugEvent.name"));
      const fb::Table vt = dt.table(kDeDebugEntry, "DebugEvent.debug_entry");
      Value& v = e.value;
      v.type = static_cast<ValueType>(vt.scalar<int8_t>(kValType, 0, "Value.val"));
      const auto read_tensor = [&](const fb::Table& t) {
        TensorEntry te;
        te.scalar_type = t.scalar<int8_t>(kTensorScalarType, 0, "Tensor.scalar_type");
        te.offset = t.scalar<int64_t>(kTensorOffset, 0, "Tensor.offset");
        const auto sizes = t.vector<int64_t>(kTensorSizes, "Tensor.sizes");
        const auto strides = t.vector<int64_t>(kTensorStrides, "Tensor.strides");
        if (!spend(sizeof(TensorEntry) + 8ull * (sizes.size() + strides.size()))) return te;
        for (uint32_t k = 0; k < sizes.size(); ++k) te.sizes.push_back(sizes[k]);
        for (uint32_t k = 0; k < strides.size(); ++k) te.strides.push_back(strides[k]);
        return te;
      };
      switch (v.type) {
        case ValueType::Tensor: {
          const fb::Table t = vt.table(kValTensor, "Value.tensor");
          if (t.present()) v.tensors.push_back(read_tensor(t));
          break;
        }
        case ValueType::TensorList: {
          const auto items = vt.table(kValTensorList, "Value.tensor_list").tables(kOnlyField, "TensorList.tensors");
          for (uint32_t k = 0; k < items.size() && r.ok(); ++k) v.tensors.push_back(read_tensor(items.at(k)));
          break;
        }
        case ValueType::Int: v.int_value = vt.table(kValInt, "Value.int_value").scalar<int64_t>(0, 0, "Int"); break;
        case ValueType::Float:
          v.float_value = vt.table(kValFloat, "Value.float_value").scalar<float>(0, 0.0f, "Float");
          break;
        case ValueType::Double:
          v.double_value = vt.table(kValDouble, "Value.double_value").scalar<double>(0, 0.0, "Double");
          break;
        case ValueType::Bool:
          v.bool_value = vt.table(kValBool, "Value.bool_value").scalar<uint8_t>(0, 0, "Bool") != 0;
          break;
        default: break;  // Null, String and unknown types carry nothing
      }
      v.output = vt.table(kValOutput, "Value.output").scalar<uint8_t>(0, 0, "Value.output") != 0;
      if (!r.ok() || !spend(sizeof(DebugEvent) + e.name.size() + e.delegate_debug_id_str.size())) break;
      run.events.emplace_back(std::move(e));
    }
    out.runs.push_back(std::move(run));
  }
  if (!r.ok()) return r.take_failure();
  return out;
}

}  // namespace etrt::etdump
