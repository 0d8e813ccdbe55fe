// MethodMeta: a method's signature read from its ExecutionPlan without instantiating it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "etrt/program/tensor_meta.h"

namespace etrt {

/// Maps the serialized KernelTypes tag to the runtime Tag.
inline Result<Tag> runtime_tag(uint8_t serialized, std::string_view where) {
  using V = pte::ValueTag;
  switch (static_cast<V>(serialized)) {
    case V::Null: return Tag::None;
    case V::Int: return Tag::Int;
    case V::Bool: return Tag::Bool;
    case V::Double: return Tag::Double;
    case V::Tensor: return Tag::Tensor;
    case V::String: return Tag::String;
    case V::IntList: return Tag::ListInt;
    case V::DoubleList: return Tag::ListDouble;
    case V::BoolList: return Tag::ListBool;
    case V::TensorList: return Tag::ListTensor;
    case V::OptionalTensorList: return Tag::ListOptionalTensor;
    default: return fail(Error::InvalidProgram, where, ": invalid value type tag ", static_cast<int>(serialized));
  }
}

struct ValueInfo {
  Tag tag = Tag::None;
  std::optional<TensorMeta> tensor;  // set when tag == Tensor
};

struct MethodMeta {
  std::string name;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<TensorMeta> attributes;      // named mutable buffers (emit_mutable_buffer_names=True)
  std::vector<int64_t> planned_buffer_sizes;  // one per arena, memory_id 1.. (entry 0 of the file dropped)
  std::vector<Device> planned_buffer_devices;
  std::vector<std::string> backends;
  size_t num_instructions = 0;

  size_t num_inputs() const { return inputs.size(); }
  size_t num_outputs() const { return outputs.size(); }
};

/// Reads the value at `index` of a plan's values vector as a ValueInfo.
inline Result<ValueInfo> read_value_info(const fb::Table::TableVector& values, uint32_t index, const fb::Reader& r,
                                         std::string_view where) {
  if (index >= values.size())
    return fail(Error::InvalidProgram, where, ": value index ", index, " out of range (", values.size(), " values)");
  const fb::Table ev = values.at(index);
  const uint8_t tag = ev.scalar<uint8_t>(pte::evalue::val_type, 0, "EValue.val_type");
  if (!r.ok()) return r.take_failure();
  ETRT_TRY(Tag t, runtime_tag(tag, where));
  ValueInfo info{t, std::nullopt};
  if (t == Tag::Tensor) {
    const fb::Table tt = ev.table(pte::evalue::val, "EValue.val");
    if (!r.ok()) return r.take_failure();
    if (!tt.present()) return fail(Error::InvalidProgram, where, ": tensor value without a table");
    ETRT_TRY(TensorMeta m, parse_tensor_meta(tt, r, where));
    info.tensor = std::move(m);
  }
  return info;
}

/// Builds a MethodMeta from an ExecutionPlan table.
inline Result<MethodMeta> read_method_meta(const fb::Table& plan, const fb::Reader& r) {
  namespace P = pte::plan;
  MethodMeta meta;
  meta.name = std::string(plan.string(P::name, "ExecutionPlan.name"));
  const auto values = plan.tables(P::values, "ExecutionPlan.values");
  bool has_inputs = false, has_outputs = false, has_sizes = false;
  const auto inputs = plan.vector<int32_t>(P::inputs, "ExecutionPlan.inputs", &has_inputs);
  const auto outputs = plan.vector<int32_t>(P::outputs, "ExecutionPlan.outputs", &has_outputs);
  const auto sizes = plan.vector<int64_t>(P::non_const_buffer_sizes, "non_const_buffer_sizes", &has_sizes);
  if (!r.ok()) return r.take_failure();
  const std::string where = cat("method '", meta.name, "'");
  if (!has_inputs || !has_outputs || !has_sizes)
    return fail(Error::InvalidProgram, where, ": inputs, outputs and non_const_buffer_sizes are required");
  for (uint32_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] < 0) return fail(Error::InvalidProgram, where, ": negative input value index");
    ETRT_TRY(ValueInfo v, read_value_info(values, static_cast<uint32_t>(inputs[i]), r, cat(where, " input ", i)));
    meta.inputs.push_back(std::move(v));
  }
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] < 0) return fail(Error::InvalidProgram, where, ": negative output value index");
    ETRT_TRY(ValueInfo v, read_value_info(values, static_cast<uint32_t>(outputs[i]), r, cat(where, " output ", i)));
    meta.outputs.push_back(std::move(v));
  }
  for (uint32_t i = 1; i < sizes.size(); ++i) {
    if (sizes[i] < 0) return fail(Error::InvalidProgram, where, ": negative planned buffer size");
    meta.planned_buffer_sizes.push_back(sizes[i]);
    meta.planned_buffer_devices.push_back(Device{});
  }
  const auto devices = plan.tables(P::non_const_buffer_device, "non_const_buffer_device");
  for (uint32_t i = 0; i < devices.size(); ++i) {
    const fb::Table d = devices.at(i);
    const int32_t idx = d.scalar<int32_t>(pte::buffer_device::buffer_idx, 0, "NonConstBufferDevice.buffer_idx");
    const int8_t type = d.scalar<int8_t>(pte::buffer_device::device_type, 0, "NonConstBufferDevice.device_type");
    const int8_t index = d.scalar<int8_t>(pte::buffer_device::device_index, 0, "NonConstBufferDevice.device_index");
    if (idx < 1 || static_cast<size_t>(idx) > meta.planned_buffer_devices.size() || (type != 0 && type != 1))
      return fail(Error::InvalidProgram, where, ": invalid non_const_buffer_device entry ", i);
    meta.planned_buffer_devices[idx - 1] = Device{static_cast<DeviceType>(type), index};
  }
  // Attributes: named, planned tensors (mutable buffers emitted with their names).
  for (uint32_t i = 0; i < values.size(); ++i) {
    const fb::Table ev = values.at(i);
    if (ev.scalar<uint8_t>(pte::evalue::val_type, 0, "EValue.val_type") != static_cast<uint8_t>(pte::ValueTag::Tensor))
      continue;
    const fb::Table tt = ev.table(pte::evalue::val, "EValue.val");
    if (!tt.present() || !tt.table(pte::tensor::extra_tensor_info, "extra_tensor_info").present()) continue;
    ETRT_TRY(TensorMeta m, parse_tensor_meta(tt, r, cat(where, " value ", i)));
    if (!m.fqn.empty() && !m.external && m.has_allocation) meta.attributes.push_back(std::move(m));
  }
  const auto delegates = plan.tables(P::delegates, "ExecutionPlan.delegates");
  for (uint32_t i = 0; i < delegates.size(); ++i)
    meta.backends.emplace_back(delegates.at(i).string(pte::backend_delegate::id, "BackendDelegate.id"));
  const auto chains = plan.tables(P::chains, "ExecutionPlan.chains");
  for (uint32_t i = 0; i < chains.size(); ++i)
    meta.num_instructions += chains.at(i).tables(pte::chain::instructions, "Chain.instructions").size();
  if (!r.ok()) return r.take_failure();
  return meta;
}

}  // namespace etrt
