// Method: one loaded ExecutionPlan: its value table, planned memory and instructions, ready to execute.
//
// Everything that depends only on the program is checked in Method::load (value indices, kernel names and slot
// counts, jump targets, planned offsets); execute() relies on those checks (Note [checked at load]).
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etrt/backends/backend.h"
#include "etrt/core/log.h"
#include "etrt/core/tensor_copy.h"
#include "etrt/device/device_interface.h"
#include "etrt/kernels/kernel.h"
#include "etrt/method/memory_plan.h"
#include "etrt/method/planned_extents.h"
#include "etrt/program/flat_tensor.h"
#include "etrt/program/program.h"

namespace etrt {

/// The kinds of instruction a plan holds (schema/program.fbs InstructionArguments, in that order).
enum class InstructionKind : uint8_t { Kernel, Delegate, Move, JumpFalse, Free };

/// Receives one event per executed instruction (ETDump profiling) and, when it asks for them, the values
/// instructions wrote (ETDump intermediate outputs). The hooks run on the executing thread, after the instruction.
class InstructionObserver {
 public:
  virtual ~InstructionObserver() = default;
  /// After instruction `index` ran; `name` is its operator ("aten::add.out") for a kernel, the backend id for a
  /// delegate call, and the kind ("MoveCall", "JumpFalseCall", "FreeCall") otherwise.
  virtual void on_instruction(size_t index, InstructionKind kind, std::string_view name, uint64_t start_ns,
                              uint64_t end_ns) = 0;
  /// Whether on_values and on_outputs are wanted; asked once per execute, so observers that only profile cost
  /// nothing more.
  virtual bool wants_values() const { return false; }
  /// After kernel or delegate instruction `index` ran (before its on_instruction): the values it wrote
  /// (Note [logged values]). Tensors may live on a device; `device` (null without one) reads them. The values are
  /// valid only during the call.
  virtual void on_values(size_t /*index*/, std::span<EValue* const> /*values*/, const DeviceInterface* /*device*/) {}
  /// After an execution succeeded: the method's outputs, as on_values.
  virtual void on_outputs(std::span<EValue* const> /*outputs*/, const DeviceInterface* /*device*/) {}
};

struct LoadOptions {
  std::span<const KernelEntry> kernels;          // sorted by name (the generated table is)
  std::span<const BackendEntry> backends;
  const FlatTensorData* data_map = nullptr;      // external tensors (.ptd); must outlive the Method
  const DeviceInterface* cuda = nullptr;         // CUDA memory and copies; null in a build without CUDA
  /// Refuses, at load, a method whose planned buffers together exceed this many bytes (0: no cap). For services
  /// that load untrusted files (Note [arena sizes]).
  uint64_t max_planned_bytes = 0;
};

/// A caller's tensor handed to set_input: a host view with strides in elements.
struct InputTensor {
  const void* data = nullptr;
  ScalarType dtype = ScalarType::Float;
  std::span<const int64_t> sizes;
  std::span<const int64_t> strides_elems;
  Device device{};
  bool writable = false;
};

/// What set_input did with a tensor: aliased the caller's memory, or copied it.
enum class InputBinding : uint8_t { Copied, Aliased };

inline constexpr size_t kMaxInstructionsPerExecute = 10'000'000;

class Method {
 public:
  static Result<std::unique_ptr<Method>> load(std::shared_ptr<const Program> program, std::string_view name,
                                              const LoadOptions& options) {
    return errors_as_values(cat("loading method '", name, "'"), [&] { return load_unguarded(program, name, options); });
  }

  const MethodMeta& meta() const { return meta_; }
  const std::string& name() const { return meta_.name; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  const Program& program() const { return *program_; }
  /// The CUDA device layer this method was loaded with (null without one).
  const DeviceInterface* device_api() const { return device_api_; }
  /// Where input `input_index` (in range) is expected to live.
  Device expected_device(size_t input_index) const {
    const auto* m = value_meta_[static_cast<size_t>(inputs_[input_index] - values_.data())];
    return m ? m->device : Device{};
  }

  /// Binds input `index`. Planned inputs are copied into the arena; an unplanned input aliases the caller's memory
  /// when it is writable and already in the exported layout, and is copied into method-owned storage otherwise.
  /// The dtype, rank, shape (within the bounds of a dynamic shape) and device must match; a device input must be in
  /// the exported layout (the host cannot reorder device memory).
  Result<InputBinding> set_input(size_t index, const InputTensor& src);
  /// Binds a non-tensor input. Scalars are specialised at export, so the value must equal the exported one.
  Status set_input(size_t index, const EValue& value);
  /// Forgets every bound tensor input: unplanned ones no longer point at the caller's memory, and execute() fails
  /// until they are set again. A caller binding several inputs calls this when one is refused, so no input stays
  /// bound to memory the caller is about to release.
  void unbind_inputs() {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (!inputs_[i]->is_tensor()) continue;
      input_set_[i] = false;
      const TensorMeta* m = value_meta_[static_cast<size_t>(inputs_[i] - values_.data())];
      if (m && !m->has_allocation) inputs_[i]->tensor_unchecked().set_data(nullptr);
    }
  }

  /// Gives an unplanned output its storage (`size_bytes` >= the output's upper-bound bytes).
  Status set_output_data_ptr(size_t index, void* data, size_t size_bytes);
  /// True for a tensor output that is neither planned, a constant, nor an input value (a mutated input is
  /// returned as an output and keeps the input's storage).
  bool output_needs_storage(size_t index) const {
    const EValue& v = *outputs_[index];
    return v.is_tensor() && !meta_.outputs[index].tensor->is_memory_planned() &&
           std::find(inputs_.begin(), inputs_.end(), outputs_[index]) == inputs_.end();
  }

  Status execute() {
    return errors_as_values(where(), [&] { return execute_unguarded(); });
  }
  bool executed() const { return executed_; }

  const EValue& output(size_t index) const { return *outputs_[index]; }
  EValue& mutable_output(size_t index) { return *outputs_[index]; }
  const EValue& input(size_t index) const { return *inputs_[index]; }
  /// The tensor of a named mutable buffer (attribute) or a named constant.
  Result<Tensor*> attribute(std::string_view fqn);
  /// True when the output's storage is a program constant (read-only memory).
  bool output_is_constant(size_t index) const {
    const auto& t = meta_.outputs[index].tensor;
    return t && t->is_constant();
  }
  bool value_is_constant(const Tensor* t) const;

  void set_observer(InstructionObserver* o) { observer_ = o; }

  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;

 private:
  Method() = default;
  static Result<std::unique_ptr<Method>> load_unguarded(std::shared_ptr<const Program> program, std::string_view name,
                                                        const LoadOptions& options);
  Status execute_unguarded();

  using Kind = InstructionKind;
  struct Instruction {
    Kind kind;
    uint16_t log_first = 0, log_count = 0;  // args[log_first, +log_count): the values it writes (Note [logged values])
    KernelFn fn = nullptr;
    std::string_view op_name;
    std::vector<EValue*> args;
    uint32_t a = 0, b = 0;  // move from/to, jump cond/destination, free index, delegate index
    uint64_t mutable_slots = 0;  // kernel argument slots the kernel writes
  };
  struct Delegate {
    const BackendInterface* backend = nullptr;
    std::shared_ptr<void> handle;
    std::string id;
  };

  Status load_values(const fb::Table& plan, const fb::Reader& r, const LoadOptions& options);
  Result<void*> resolve_tensor_data(const TensorMeta& m, size_t value_index, const LoadOptions& options);
  Result<InputBinding> bind_device_input(size_t index, Tensor& t, const TensorMeta& meta, const InputTensor& src,
                                         bool same_layout);
  Status load_instructions(const fb::Table& plan, const fb::Reader& r, const LoadOptions& options);
  static void set_logged_slots(Instruction& ins, uint64_t mutable_slots);
  Status load_delegates(const fb::Table& plan, const fb::Reader& r, const LoadOptions& options);
  Status run_instruction(size_t& pc, const Instruction& ins, KernelContext& ctx);
  Status check_storage(size_t pc, const Instruction& ins) const;
  /// The device of `v`'s tensor, or of the first listed tensor on a device; nullopt when all are on the host.
  std::optional<Device> device_tensor_in(const EValue& v) const;
  std::string where() const { return cat("method '", meta_.name, "'"); }

  // Declared in dependency order: the program outlives the memory, which outlives the values that point into it.
  std::shared_ptr<const Program> program_;
  const DeviceInterface* device_api_ = nullptr;
  MethodMeta meta_;
  PlannedMemory memory_;
  std::vector<ArenaPtr> input_staging_;  // per input: storage for converted/copied unplanned inputs
  std::vector<size_t> input_staging_size_;
  std::vector<DeviceBuffer> input_device_staging_;  // per input: device copies of read-only device inputs
  std::vector<EValue> values_;
  std::vector<const TensorMeta*> value_meta_;  // per value, null unless a tensor
  std::vector<TensorMeta> tensor_metas_;
  std::vector<EValue*> inputs_;
  std::vector<EValue*> outputs_;
  std::vector<bool> input_set_;
  std::vector<Delegate> delegates_;
  std::vector<Instruction> instructions_;
  InstructionObserver* observer_ = nullptr;
  bool executed_ = false;
};

// ---------------------------------------------------------------------------------------------------------------

inline Result<std::unique_ptr<Method>> Method::load_unguarded(std::shared_ptr<const Program> program,
                                                              std::string_view name, const LoadOptions& options) {
  const Program::PlanRef* ref = program->find_plan(name);
  if (!ref) return program->unknown_method(name);
  auto m = std::unique_ptr<Method>(new Method());
  m->program_ = std::move(program);
  fb::Reader r(m->program_->flatbuffer(), "program");
  const fb::Table plan = r.table_at(ref->table_pos, "ExecutionPlan");
  if (!r.ok()) return r.take_failure();
  ETRT_TRY(m->meta_, read_method_meta(plan, r));
  m->device_api_ = options.cuda;
  {
    ETRT_TRY(const std::vector<uint64_t> extents, planned_extents(plan, r, m->meta_, m->where()));
    ETRT_TRY(const std::vector<int64_t> sizes,
             arena_allocation_sizes(m->meta_, extents, options.max_planned_bytes, m->where()));
    auto mem = PlannedMemory::allocate(sizes, m->meta_.planned_buffer_devices, options.cuda);
    if (!mem) return fail(mem.error().code, m->where(), ": ", mem.error().what);
    m->memory_ = std::move(*mem);
  }
  ETRT_CHECK_OK(m->load_values(plan, r, options));
  ETRT_CHECK_OK(m->load_delegates(plan, r, options));
  ETRT_CHECK_OK(m->load_instructions(plan, r, options));
  return Result<std::unique_ptr<Method>>(std::move(m));  // explicit: nvcc does not move implicitly into Result
}

inline Result<void*> Method::resolve_tensor_data(const TensorMeta& t, size_t vi, const LoadOptions& options) {
  const std::string at = cat(where(), " value ", vi);
  const size_t nbytes = t.nbytes();
  // Kernels read constants in place through typed pointers.
  const auto aligned_for = [&](const uint8_t* p) {
    return nbytes == 0 || reinterpret_cast<uintptr_t>(p) % element_size(t.dtype) == 0;
  };
  // Planned memory decides where a tensor really is; the tensor's own device must agree with its arena.
  const Device arena = t.has_allocation && t.memory_id >= 1 && t.memory_id <= memory_.num_arenas()
                           ? memory_.device(t.memory_id)
                           : Device{};
  if (t.has_allocation && arena != t.device)
    return fail(Error::InvalidProgram, at, " is declared on ", t.device.str(), " but planned in buffer ", t.memory_id,
                " on ", arena.str(), " (export with enable_non_cpu_memory_planning=True)");
  if (!t.device.is_cpu() && (t.external || (t.data_buffer_idx > 0 && !t.has_allocation)))
    return fail(Error::NotSupported, at, ": a constant on ", t.device.str(),
                " is not supported (constants of a device delegate belong in its payload)");
  // Initial contents go through the device layer when the destination is device memory.
  const auto fill = [&](uint8_t* dst, const uint8_t* src) -> Status {
    if (nbytes == 0) return {};
    if (arena.is_cpu()) {
      std::memcpy(dst, src, nbytes);
      return {};
    }
    if (auto s = device_api_->copy(dst, src, nbytes, CopyKind::HostToDevice, arena.index); !s)
      return fail(s.error().code, at, ": ", s.error().what);
    return {};
  };
  if (t.external) {
    if (!options.data_map)
      return fail(Error::NotFound, where(), ": tensor '", t.fqn,
                  "' is stored in external data (.ptd); load the program with its data file (data_path)");
    ETRT_TRY(const NamedBlob* blob, options.data_map->get(t.fqn));
    if (blob->has_layout) {
      if (blob->dtype != t.dtype || blob->sizes != t.sizes ||
          (!blob->dim_order.empty() && blob->dim_order != t.dim_order))
        return fail(Error::InvalidExternalData, where(), ": external tensor '", t.fqn, "' is ",
                    numpy_name(blob->dtype), shape_str(blob->sizes), " in the data file, the program expects ",
                    numpy_name(t.dtype), shape_str(t.sizes));
    }
    if (blob->bytes.size() != nbytes)
      return fail(Error::InvalidExternalData, where(), ": external tensor '", t.fqn, "' has ", blob->bytes.size(),
                  " bytes, expected ", nbytes);
    if (!t.has_allocation) {
      if (!aligned_for(blob->bytes.data()))
        return fail(Error::InvalidExternalData, where(), ": external tensor '", t.fqn, "' is not aligned for ",
                    numpy_name(t.dtype), " in the data file");
      return const_cast<uint8_t*>(blob->bytes.data());
    }
    ETRT_TRY(uint8_t * dst, memory_.address(t.memory_id, t.memory_offset, nbytes));
    ETRT_CHECK_OK(fill(dst, blob->bytes.data()));
    return static_cast<void*>(dst);
  }
  if (t.data_buffer_idx > 0 && !t.has_allocation) {
    ETRT_TRY(const uint8_t* p, program_->constant_data(t.data_buffer_idx, nbytes));
    if (!aligned_for(p))
      return fail(Error::InvalidProgram, at, ": constant ", t.data_buffer_idx, " is not aligned for ",
                  numpy_name(t.dtype), " in the file");
    return const_cast<uint8_t*>(p);
  }
  if (t.has_allocation) {
    auto dst = memory_.address(t.memory_id, t.memory_offset, nbytes);
    if (!dst) return fail(dst.error().code, at, ": ", dst.error().what);
    if (t.data_buffer_idx > 0) {
      ETRT_TRY(const uint8_t* init, program_->mutable_data(t.data_buffer_idx, nbytes));
      ETRT_CHECK_OK(fill(*dst, init));
    }
    return static_cast<void*>(*dst);
  }
  return static_cast<void*>(nullptr);
}

inline Status Method::load_values(const fb::Table& plan, const fb::Reader& r, const LoadOptions& options) {
  using V = pte::ValueTag;
  const auto values = plan.tables(pte::plan::values, "ExecutionPlan.values");
  if (!r.ok()) return r.take_failure();
  const uint32_t n = values.size();
  values_.resize(n);
  value_meta_.assign(n, nullptr);
  tensor_metas_.reserve(n);
  std::vector<uint8_t> tags(n);
  // Pass 1: scalars and tensors. Pass 2: lists, which refer to other values by index.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < n; ++i) {
      const fb::Table ev = values.at(i);
      const uint8_t tag = pass == 0 ? ev.scalar<uint8_t>(pte::evalue::val_type, 0, "EValue.val_type") : tags[i];
      tags[i] = tag;
      const fb::Table val = ev.table(pte::evalue::val, "EValue.val");
      if (!r.ok()) return r.take_failure();
      const std::string at = cat(where(), " value ", i);
      const auto item_index = [&](int64_t idx) -> Result<uint32_t> {
        if (idx < 0 || idx >= static_cast<int64_t>(n))
          return fail(Error::InvalidProgram, at, ": list item index ", idx, " out of range (", n, " values)");
        return static_cast<uint32_t>(idx);
      };
      const bool is_list = tag == uint8_t(V::IntList) || tag == uint8_t(V::TensorList) ||
                           tag == uint8_t(V::OptionalTensorList);
      if ((pass == 0) == is_list) continue;
      if (tag != uint8_t(V::Null) && !val.present())
        return fail(Error::InvalidProgram, at, ": value of type tag ", static_cast<int>(tag), " has no table");
      switch (static_cast<V>(tag)) {
        case V::Null: values_[i] = EValue(); break;
        case V::Int: values_[i] = EValue(val.scalar<int64_t>(0, 0, "Int.int_val")); break;
        case V::Bool: values_[i] = EValue(val.scalar<uint8_t>(0, 0, "Bool.bool_val") != 0); break;
        case V::Double: values_[i] = EValue(val.scalar<double>(0, 0.0, "Double.double_val")); break;
        case V::String: values_[i] = EValue(val.string(0, "String.string_val")); break;
        case V::DoubleList: {
          const auto items = val.vector<double>(0, "DoubleList.items");
          std::vector<double> v(items.size());
          for (uint32_t k = 0; k < items.size(); ++k) v[k] = items[k];
          values_[i] = EValue(EValue::Storage(std::move(v)));
          break;
        }
        case V::BoolList: {
          const auto items = val.vector<uint8_t>(0, "BoolList.items");
          std::vector<bool> v(items.size());
          for (uint32_t k = 0; k < items.size(); ++k) v[k] = items[k] != 0;
          values_[i] = EValue(EValue::Storage(std::move(v)));
          break;
        }
        case V::Tensor: {
          ETRT_TRY(TensorMeta meta, parse_tensor_meta(val, r, at));
          ETRT_TRY(void* data, resolve_tensor_data(meta, i, options));
          ETRT_TRY(Tensor t, Tensor::make(meta.dtype, meta.sizes, meta.dim_order, data, meta.dynamism, meta.device));
          tensor_metas_.push_back(std::move(meta));
          value_meta_[i] = &tensor_metas_.back();
          values_[i] = EValue(std::move(t));
          break;
        }
        case V::IntList: {
          const auto items = val.vector<int64_t>(0, "IntList.items");
          IntList l;
          for (uint32_t k = 0; k < items.size(); ++k) {
            ETRT_TRY(uint32_t idx, item_index(items[k]));
            l.items.push_back(&values_[idx]);
          }
          l.cache.resize(l.items.size());
          values_[i] = EValue(EValue::Storage(std::move(l)));
          break;
        }
        case V::TensorList:
        case V::OptionalTensorList: {
          const auto items = val.vector<int32_t>(0, "TensorList.items");
          std::vector<Tensor*> ptrs;
          for (uint32_t k = 0; k < items.size(); ++k) {
            if (tag == uint8_t(V::OptionalTensorList) && items[k] == -1) {
              ptrs.push_back(nullptr);
              continue;
            }
            ETRT_TRY(uint32_t idx, item_index(items[k]));
            if (!values_[idx].is_tensor())
              return fail(Error::InvalidProgram, at, ": tensor list item ", k, " (value ", idx, ") is not a tensor");
            ptrs.push_back(&values_[idx].tensor_unchecked());
          }
          if (tag == uint8_t(V::TensorList))
            values_[i] = EValue(EValue::Storage(TensorList{std::move(ptrs)}));
          else
            values_[i] = EValue(EValue::Storage(OptionalTensorList{std::move(ptrs)}));
          break;
        }
        default:
          return fail(Error::InvalidProgram, at, ": invalid value type tag ", static_cast<int>(tag));
      }
      if (!r.ok()) return r.take_failure();
    }
  }
  const auto in = plan.vector<int32_t>(pte::plan::inputs, "ExecutionPlan.inputs");
  const auto out = plan.vector<int32_t>(pte::plan::outputs, "ExecutionPlan.outputs");
  for (uint32_t i = 0; i < in.size(); ++i) inputs_.push_back(&values_[static_cast<uint32_t>(in[i])]);  // checked in meta
  for (uint32_t i = 0; i < out.size(); ++i) outputs_.push_back(&values_[static_cast<uint32_t>(out[i])]);
  input_set_.assign(inputs_.size(), false);
  input_staging_.resize(inputs_.size());
  input_staging_size_.assign(inputs_.size(), 0);
  input_device_staging_.resize(inputs_.size());
  // Non-tensor inputs carry their exported value already.
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!inputs_[i]->is_tensor()) input_set_[i] = true;
  return {};
}

inline Status Method::load_delegates(const fb::Table& plan, const fb::Reader& r, const LoadOptions& options) {
  const auto delegates = plan.tables(pte::plan::delegates, "ExecutionPlan.delegates");
  for (uint32_t i = 0; i < delegates.size(); ++i) {
    const fb::Table d = delegates.at(i);
    const std::string_view id = d.string(pte::backend_delegate::id, "BackendDelegate.id");
    const fb::Table processed = d.table(pte::backend_delegate::processed, "BackendDelegate.processed");
    const int loc = processed.scalar<int8_t>(pte::data_ref::location, 0, "location");
    const uint32_t index = processed.scalar<uint32_t>(pte::data_ref::index, 0, "index");
    const auto specs_t = d.tables(pte::backend_delegate::compile_specs, "BackendDelegate.compile_specs");
    std::vector<CompileSpec> specs;
    for (uint32_t k = 0; k < specs_t.size(); ++k) {
      const fb::Table s = specs_t.at(k);
      const auto v = s.vector<uint8_t>(pte::compile_spec::value, "CompileSpec.value");
      specs.push_back({s.string(pte::compile_spec::key, "CompileSpec.key"), {v.bytes(), v.size()}});
    }
    if (!r.ok()) return r.take_failure();
    const BackendInterface* backend = nullptr;
    for (const auto& e : options.backends)
      if (e.name == id) backend = e.backend;
    if (!backend) {
      std::string known;
      for (const auto& e : options.backends) known += cat(known.empty() ? "" : ", ", e.name);
      return fail(Error::NotFound, where(), " uses backend '", id, "', which is not registered (registered: ",
                  known.empty() ? std::string("none") : known, ")");
    }
    if (!backend->is_available())
      return fail(Error::NotFound, where(), ": backend '", id, "' is registered but not available on this machine");
    std::span<const uint8_t> payload;
    if (loc == 0) {
      ETRT_TRY(payload, program_->inline_delegate_data(index));
    } else if (loc == 1) {
      ETRT_TRY(payload, program_->segment(index));
    } else {
      return fail(Error::InvalidProgram, where(), ": delegate ", i, " has invalid data location ", loc);
    }
    const Program* program = program_.get();
    // The program's own named data first, then the external data file (.ptd) the program was loaded with.
    const FlatTensorData* data_map = options.data_map;
    const BackendInterface::NamedDataFn named =
        [program, data_map](std::string_view key) -> Result<std::span<const uint8_t>> {
      auto own = program->named_data(key);
      if (own || !data_map) return own;
      ETRT_TRY(const NamedBlob* blob, data_map->get(key));
      return std::span<const uint8_t>(blob->bytes);
    };
    auto handle = backend->init_with_limit(payload, specs, named, options.max_planned_bytes);
    if (!handle) return fail(handle.error().code, where(), ": backend '", id, "' init failed: ", handle.error().what);
    delegates_.push_back({backend, std::move(*handle), std::string(id)});
  }
  return {};
}

inline Status Method::load_instructions(const fb::Table& plan, const fb::Reader& r, const LoadOptions& options) {
  using I = pte::InstrTag;
  bool has_chains = false;
  const auto chains = plan.tables(pte::plan::chains, "ExecutionPlan.chains", &has_chains);
  const auto ops = plan.tables(pte::plan::operators, "ExecutionPlan.operators");
  if (!r.ok()) return r.take_failure();
  // Resolve every operator once; report all missing ones together.
  std::vector<const KernelEntry*> op_entries(ops.size(), nullptr);
  std::vector<std::string> op_names(ops.size());
  std::string missing;
  for (uint32_t k = 0; k < ops.size(); ++k) {
    const fb::Table op = ops.at(k);
    std::string key(op.string(pte::op::name, "Operator.name"));
    const std::string_view overload = op.string(pte::op::overload, "Operator.overload");
    if (!overload.empty()) key += cat(".", overload);
    if (!r.ok()) return r.take_failure();
    const auto it = std::lower_bound(options.kernels.begin(), options.kernels.end(), key,
                                     [](const KernelEntry& e, const std::string& k) { return e.name < k; });
    if (it != options.kernels.end() && it->name == key) op_entries[k] = &*it;
    op_names[k] = key;
  }
  size_t base = 0;
  std::vector<size_t> chain_sizes;
  for (uint32_t c = 0; c < chains.size(); ++c) chain_sizes.push_back(chains.at(c).tables(pte::chain::instructions, "Chain.instructions").size());
  size_t total = 0;
  for (size_t s : chain_sizes) total += s;
  const auto value_index = [&](int64_t idx, std::string_view at) -> Result<EValue*> {
    if (idx < 0 || idx >= static_cast<int64_t>(values_.size()))
      return fail(Error::InvalidProgram, at, ": value index ", idx, " out of range (", values_.size(), " values)");
    return &values_[static_cast<size_t>(idx)];
  };
  std::vector<bool> op_used(ops.size(), false);
  for (uint32_t c = 0; c < chains.size(); ++c) {
    const auto instrs = chains.at(c).tables(pte::chain::instructions, "Chain.instructions");
    for (uint32_t k = 0; k < instrs.size(); ++k) {
      const size_t pc = base + k;
      const std::string at = cat(where(), " instruction ", pc);
      const fb::Table ins = instrs.at(k);
      const uint8_t tag = ins.scalar<uint8_t>(pte::instruction::instr_args_type, 0, "Instruction.instr_args_type");
      const fb::Table a = ins.table(pte::instruction::instr_args, "Instruction.instr_args");
      if (!r.ok()) return r.take_failure();
      if (!a.present() && tag != 0) return fail(Error::InvalidProgram, at, ": instruction arguments missing");
      Instruction out{};
      switch (static_cast<I>(tag)) {
        case I::KernelCall: {
          const int32_t op = a.scalar<int32_t>(pte::kernel_call::op_index, 0, "KernelCall.op_index");
          bool has_args = false;
          const auto args = a.vector<int32_t>(pte::kernel_call::args, "KernelCall.args", &has_args);
          if (!r.ok()) return r.take_failure();
          if (op < 0 || static_cast<uint32_t>(op) >= ops.size())
            return fail(Error::InvalidProgram, at, ": operator index ", op, " out of range (", ops.size(), ")");
          if (!has_args) return fail(Error::InvalidProgram, at, ": KernelCall without args");
          op_used[op] = true;
          out.kind = Kind::Kernel;
          out.op_name = op_entries[op] ? op_entries[op]->name : std::string_view();
          for (uint32_t j = 0; j < args.size(); ++j) {
            ETRT_TRY(EValue * v, value_index(args[j], at));
            out.args.push_back(v);
          }
          if (op_entries[op]) {
            out.fn = op_entries[op]->fn;
            out.mutable_slots = op_entries[op]->mutable_slots;
            if (static_cast<int>(args.size()) != op_entries[op]->num_slots)
              return fail(Error::InvalidProgram, at, ": ", op_names[op], " takes ", op_entries[op]->num_slots,
                          " argument slots (schema arguments + 1 return), the program passes ", args.size());
            set_logged_slots(out, op_entries[op]->mutable_slots);
            // A kernel must never write into a constant (it may sit in read-only mapped memory).
            for (size_t j = 0; j < args.size() && j < 64; ++j) {
              if (!((op_entries[op]->mutable_slots >> j) & 1u)) continue;
              const size_t vi = static_cast<size_t>(out.args[j] - values_.data());
              if (value_meta_[vi] && value_meta_[vi]->is_constant())
                return fail(Error::InvalidProgram, at, ": ", op_names[op], " writes into value ", vi,
                            ", which is a constant");
            }
            // Portable kernels dereference their tensors on the host; only device-aware ones may see device memory.
            if (!op_entries[op]->device_aware)
              for (EValue* v : out.args)
                if (const auto dev = device_tensor_in(*v))
                  return fail(Error::InvalidProgram, at, ": ", op_names[op], " is a host kernel but value ",
                              v - values_.data(), " lives on ", dev->str(),
                              " (only delegates and et_copy copies run on a device)");
          }
          break;
        }
        case I::DelegateCall: {
          const int32_t di = a.scalar<int32_t>(pte::delegate_call::delegate_index, 0, "DelegateCall.delegate_index");
          const auto args = a.vector<int32_t>(pte::delegate_call::args, "DelegateCall.args");
          if (!r.ok()) return r.take_failure();
          if (di < 0 || static_cast<size_t>(di) >= delegates_.size())
            return fail(Error::InvalidProgram, at, ": delegate index ", di, " out of range (", delegates_.size(), ")");
          out.kind = Kind::Delegate;
          out.a = static_cast<uint32_t>(di);
          out.log_count = static_cast<uint16_t>(std::min<size_t>(args.size(), 0xFFFF));  // every argument
          out.op_name = delegates_[di].id;
          for (uint32_t j = 0; j < args.size(); ++j) {
            ETRT_TRY(EValue * v, value_index(args[j], at));
            out.args.push_back(v);
          }
          break;
        }
        case I::MoveCall: {
          out.kind = Kind::Move;
          const int32_t from = a.scalar<int32_t>(pte::move_call::move_from, 0, "MoveCall.move_from");
          const int32_t to = a.scalar<int32_t>(pte::move_call::move_to, 0, "MoveCall.move_to");
          ETRT_CHECK_OK(value_index(from, at));
          ETRT_CHECK_OK(value_index(to, at));
          out.a = static_cast<uint32_t>(from);
          out.b = static_cast<uint32_t>(to);
          out.op_name = "MoveCall";
          break;
        }
        case I::JumpFalseCall: {
          out.kind = Kind::JumpFalse;
          const int32_t cond = a.scalar<int32_t>(pte::jump_false_call::cond_value_index, 0, "cond_value_index");
          const int32_t dest = a.scalar<int32_t>(pte::jump_false_call::destination_instruction, 0, "destination");
          ETRT_CHECK_OK(value_index(cond, at));
          // Checked here, unlike upstream, so a bad target is a load error rather than a mid-run Internal error.
          if (dest < 0 || static_cast<size_t>(dest) > chain_sizes[c])
            return fail(Error::InvalidProgram, at, ": jump destination ", dest, " out of range (", chain_sizes[c],
                        " instructions)");
          out.a = static_cast<uint32_t>(cond);
          out.b = static_cast<uint32_t>(base + dest);
          out.op_name = "JumpFalseCall";
          break;
        }
        case I::FreeCall: {
          out.kind = Kind::Free;
          const int32_t vi = a.scalar<int32_t>(pte::free_call::value_index, 0, "FreeCall.value_index");
          ETRT_TRY(EValue * v, value_index(vi, at));
          if (!v->is_tensor()) return fail(Error::InvalidProgram, at, ": FreeCall on a non-tensor value");
          out.a = static_cast<uint32_t>(vi);
          out.op_name = "FreeCall";
          break;
        }
        default:
          return fail(Error::InvalidProgram, at, ": invalid instruction type ", static_cast<int>(tag));
      }
      if (!r.ok()) return r.take_failure();
      instructions_.push_back(std::move(out));
    }
    base += instrs.size();
  }
  (void)total;
  // A MoveCall can put a constant's tensor into another value; no kernel may then write through it.
  std::vector<bool> may_hold_constant(values_.size(), false);
  for (size_t i = 0; i < values_.size(); ++i) may_hold_constant[i] = value_meta_[i] && value_meta_[i]->is_constant();
  for (bool changed = true; changed;) {
    changed = false;
    for (const Instruction& ins : instructions_)
      if (ins.kind == Kind::Move && may_hold_constant[ins.a] && !may_hold_constant[ins.b])
        changed = may_hold_constant[ins.b] = true;
  }
  for (size_t pc = 0; pc < instructions_.size(); ++pc) {
    const Instruction& ins = instructions_[pc];
    if (ins.kind != Kind::Kernel || !ins.fn) continue;
    for (size_t j = 0; j < ins.args.size() && j < 64; ++j) {
      const size_t vi = static_cast<size_t>(ins.args[j] - values_.data());
      if (((ins.mutable_slots >> j) & 1u) && may_hold_constant[vi])
        return fail(Error::InvalidProgram, where(), " instruction ", pc, " (", ins.op_name, ") writes into value ", vi,
                    ", which can hold a constant");
    }
  }
  bool any_missing = false;  // a name can be empty in a corrupt file, so the list itself can't be the flag
  for (uint32_t k = 0; k < ops.size(); ++k) {
    if (!op_used[k] || op_entries[k]) continue;
    missing += cat(any_missing ? ", " : "", op_names[k].empty() ? std::string("<unnamed operator>") : op_names[k]);
    any_missing = true;
  }
  if (any_missing)
    return fail(Error::OperatorMissing, where(), " needs operators that are not registered: ", missing);
  return {};
}

/// Every element of a host bool view is the byte 0 or 1 (any strides, any order).
inline bool bool_bytes_valid(const InputTensor& src) {
  const auto* base = static_cast<const uint8_t*>(src.data);
  const size_t rank = src.sizes.size();
  std::array<int64_t, kMaxDims> idx{};
  const int64_t n = checked_numel(src.sizes);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (base[off] > 1) return false;
    for (size_t d = rank; d-- > 0;) {  // odometer over the dims, last fastest
      off += src.strides_elems[d];
      if (++idx[d] < src.sizes[d]) break;
      off -= src.strides_elems[d] * src.sizes[d];
      idx[d] = 0;
    }
  }
  return true;
}

inline Result<InputBinding> Method::set_input(size_t index, const InputTensor& src) {
  if (index >= inputs_.size())
    return fail(Error::InvalidArgument, where(), ": input index ", index, " out of range (", inputs_.size(),
                " inputs)");
  EValue& v = *inputs_[index];
  if (!v.is_tensor())
    return fail(Error::InvalidArgument, where(), ": input ", index, " expected ", tag_name(v.tag()), ", got a tensor");
  Tensor& t = v.tensor_unchecked();
  const TensorMeta& meta = *value_meta_[static_cast<size_t>(inputs_[index] - values_.data())];
  const auto describe = [&](ScalarType dt, std::span<const int64_t> s) { return cat(numpy_name(dt), shape_str(s)); };
  if (src.dtype != t.dtype())
    return fail(Error::InvalidArgument, where(), ": input ", index, " expected dtype ", numpy_name(t.dtype()),
                ", got ", numpy_name(src.dtype), " (expected ", describe(t.dtype(), t.max_sizes()), ", got ",
                describe(src.dtype, src.sizes), ")");
  if (src.sizes.size() != static_cast<size_t>(t.dim()))
    return fail(Error::InvalidArgument, where(), ": input ", index, " expected rank ", t.dim(), " ",
                describe(t.dtype(), t.max_sizes()), ", got rank ", src.sizes.size(), " ",
                describe(src.dtype, src.sizes));
  const Device want = t.device();
  if (src.device != want)
    return fail(Error::InvalidArgument, where(), ": input ", index, " is on ", src.device.str(),
                ", the method expects it on ", want.str(),
                want.is_cpu() ? std::string(" (copy it to the host first)")
                              : cat(" (pass a CUDA tensor or ExecuTorchResult.from_host(x, device_index=",
                                    static_cast<int>(want.index), "))"));
  if (auto s = t.resize(src.sizes); !s)
    return fail(s.error().code, where(), ": input ", index, " ", s.error().what);
  const size_t nbytes = t.nbytes();
  if (nbytes > 0 && !src.data)
    return fail(Error::InvalidArgument, where(), ": input ", index, " has no data pointer");
  const bool same_layout = strides_match_dim_order(src.sizes, src.strides_elems, t.dim_order());
  std::array<int64_t, kMaxDims> dst_strides{};
  std::copy(t.strides().begin(), t.strides().end(), dst_strides.begin());
  const auto copy_into = [&](void* dst) {
    if (nbytes == 0) return;
    if (same_layout)
      std::memcpy(dst, src.data, nbytes);
    else
      copy_strided(dst, std::span<const int64_t>(dst_strides.data(), t.dim()), src.data, src.strides_elems,
                   src.sizes, element_size(t.dtype()));
  };
  if (!want.is_cpu()) return bind_device_input(index, t, meta, src, same_layout);
  // A bool byte other than 0 or 1 is not a bool: kernels reading it would be undefined behaviour.
  if (t.dtype() == ScalarType::Bool && nbytes > 0 && !bool_bytes_valid(src))
    return fail(Error::InvalidArgument, where(), ": input ", index,
                " is a bool tensor holding bytes other than 0 and 1");
  input_set_[index] = true;
  if (!same_layout && log_enabled(LogLevel::Debug))
    log(LogLevel::Debug, cat(where(), ": input ", index, " copied into the exported dim order ",
                             shape_str(std::vector<int64_t>(t.dim_order().begin(), t.dim_order().end()))));
  if (meta.has_allocation) {  // planned: the arena slot was bound at load
    copy_into(t.data());
    return InputBinding::Copied;
  }
  if (same_layout && src.writable) {
    t.set_data(const_cast<void*>(src.data));
    return InputBinding::Aliased;
  }
  const size_t cap = t.capacity_nbytes();
  if (input_staging_size_[index] < cap || !input_staging_[index]) {
    input_staging_[index] = allocate_aligned(cap);
    if (!input_staging_[index])
      return fail(Error::MemoryAllocationFailed, where(), ": cannot allocate ", cap, " bytes for input ", index);
    input_staging_size_[index] = cap;
  }
  t.set_data(input_staging_[index].get());
  copy_into(t.data());
  return InputBinding::Copied;
}

inline Result<InputBinding> Method::bind_device_input(size_t index, Tensor& t, const TensorMeta& meta,
                                                      const InputTensor& src, bool same_layout) {
  const size_t nbytes = t.nbytes();
  if (!same_layout)
    return fail(Error::InvalidArgument, where(), ": input ", index, " on ", src.device.str(),
                " is not in the exported dim order ",
                shape_str(std::vector<int64_t>(t.dim_order().begin(), t.dim_order().end())),
                "; a CUDA input must already be in the exported layout");
  const auto copy_to = [&](void* dst) -> Status {
    if (nbytes == 0) return {};
    if (!device_api_)
      return fail(Error::NotSupported, where(), ": input ", index, " on ", src.device.str(),
                  " must be copied into the method's memory, and copying CUDA memory needs CUDA-enabled bindings");
    if (auto s = device_api_->copy(dst, src.data, nbytes, CopyKind::DeviceToDevice, src.device.index); !s)
      return fail(s.error().code, where(), ": input ", index, ": ", s.error().what);
    return {};
  };
  if (meta.has_allocation) {  // a planned device input: the arena slot was bound at load
    ETRT_CHECK_OK(copy_to(t.data()));
    input_set_[index] = true;
    return InputBinding::Copied;
  }
  if (src.writable) {
    t.set_data(const_cast<void*>(src.data));
    input_set_[index] = true;
    return InputBinding::Aliased;
  }
  // A read-only device input must not be written by the method's in-place updates: give it a device copy.
  DeviceBuffer& staging = input_device_staging_[index];
  if (staging.size() < t.capacity_nbytes() || (!staging && t.capacity_nbytes() > 0)) {
    if (!device_api_)
      return fail(Error::NotSupported, where(), ": read-only input ", index, " on ", src.device.str(),
                  " must be copied, and copying CUDA memory needs CUDA-enabled bindings");
    auto buf = DeviceBuffer::allocate(*device_api_, t.capacity_nbytes(), src.device.index);
    if (!buf) return fail(buf.error().code, where(), ": input ", index, ": ", buf.error().what);
    staging = std::move(*buf);
  }
  t.set_data(staging.data());
  ETRT_CHECK_OK(copy_to(t.data()));
  input_set_[index] = true;
  return InputBinding::Copied;
}

inline Status Method::set_input(size_t index, const EValue& value) {
  if (index >= inputs_.size())
    return fail(Error::InvalidArgument, where(), ": input index ", index, " out of range (", inputs_.size(),
                " inputs)");
  const EValue& cur = *inputs_[index];
  const auto mismatch = [&](const std::string& got) {
    return fail(Error::InvalidArgument, where(), ": input ", index, " expected ", tag_name(cur.tag()), ", got ", got);
  };
  if (cur.is_tensor()) return mismatch(std::string(tag_name(value.tag())));
  if (cur.tag() != value.tag() && !(cur.is_double() && value.is_int()))
    return mismatch(std::string(tag_name(value.tag())));
  // Scalars are specialised at export: the graph was built for the exported value.
  bool equal = true;
  std::string exported, got;
  if (cur.is_int()) {
    equal = cur.int_unchecked() == value.int_unchecked();
    exported = std::to_string(cur.int_unchecked());
    got = std::to_string(value.int_unchecked());
  } else if (cur.is_bool()) {
    equal = cur.bool_unchecked() == value.bool_unchecked();
    exported = cur.bool_unchecked() ? "True" : "False";
    got = value.bool_unchecked() ? "True" : "False";
  } else if (cur.is_double()) {
    const double a = cur.double_unchecked(), b = value.is_int() ? static_cast<double>(value.int_unchecked())
                                                                 : value.double_unchecked();
    equal = std::abs(a - b) <= 1e-4 + 1e-5 * std::abs(b);
    exported = std::to_string(a);
    got = std::to_string(b);
  } else if (cur.is_string()) {
    equal = cur.string_unchecked() == value.string_unchecked();
    exported = std::string(cur.string_unchecked());
    got = std::string(value.string_unchecked());
  }
  if (!equal)
    return fail(Error::InvalidArgument, where(), ": input ", index, " was exported as the constant ", exported,
                "; got ", got, " (re-export to use another value)");
  input_set_[index] = true;
  return {};
}

inline Status Method::set_output_data_ptr(size_t index, void* data, size_t size_bytes) {
  if (index >= outputs_.size())
    return fail(Error::InvalidArgument, where(), ": output index ", index, " out of range (", outputs_.size(), ")");
  if (!output_needs_storage(index))
    return fail(Error::InvalidState, where(), ": output ", index, " is memory planned, a constant or an input");
  Tensor& t = outputs_[index]->tensor_unchecked();
  if (size_bytes < t.capacity_nbytes())
    return fail(Error::InvalidArgument, where(), ": output ", index, " needs ", t.capacity_nbytes(), " bytes, got ",
                size_bytes);
  t.set_data(data);
  return {};
}

inline Result<Tensor*> Method::attribute(std::string_view fqn) {
  for (size_t i = 0; i < values_.size(); ++i)
    if (value_meta_[i] && value_meta_[i]->fqn == fqn) return &values_[i].tensor_unchecked();
  std::string known;
  for (const auto& a : meta_.attributes) known += cat(known.empty() ? "'" : ", '", a.fqn, "'");
  return fail(Error::NotFound, where(), " has no attribute '", fqn, "' (attributes: ",
              known.empty() ? std::string("none; export with emit_mutable_buffer_names=True") : known, ")");
}

inline bool Method::value_is_constant(const Tensor* t) const {
  for (size_t i = 0; i < values_.size(); ++i)
    if (value_meta_[i] && &values_[i].tensor_unchecked() == t) return value_meta_[i]->is_constant();
  return false;
}

inline std::optional<Device> Method::device_tensor_in(const EValue& v) const {
  const auto on_device = [](const Tensor* t) { return t && !t->device().is_cpu(); };
  if (v.is_tensor() && on_device(&v.tensor_unchecked())) return v.tensor_unchecked().device();
  if (const auto* l = std::get_if<TensorList>(&v.storage()))
    for (const Tensor* t : l->items)
      if (on_device(t)) return t->device();
  if (const auto* l = std::get_if<OptionalTensorList>(&v.storage()))
    for (const Tensor* t : l->items)
      if (on_device(t)) return t->device();
  return std::nullopt;
}

// Note [logged values]: the values ETDump records as an instruction's intermediate outputs, the ones upstream's
// generated kernel wrappers and Method log. A kernel logs its out arguments: the trailing run of written slots
// before the return slot (`*, Tensor(a!) out` or `Tensor(a!) values, Tensor(b!) indices`). An in-place kernel
// without out arguments (copy_) logs the run starting at its first written slot instead. A delegate call logs
// every argument, inputs included, because a DelegateCall does not say which of its arguments are outputs.
inline void Method::set_logged_slots(Instruction& ins, uint64_t mutable_slots) {
  const size_t ret = ins.args.size() - 1;  // the return slot (the slot count was checked: at least 1)
  size_t first = ret;
  while (first > 0 && first - 1 < 64 && ((mutable_slots >> (first - 1)) & 1u)) --first;
  if (first == ret && mutable_slots != 0) {
    first = static_cast<size_t>(std::countr_zero(mutable_slots));
    size_t end = first;
    while (end < 64 && end < ret && ((mutable_slots >> end) & 1u)) ++end;
    ins.log_first = static_cast<uint16_t>(first);
    ins.log_count = static_cast<uint16_t>(end - first);
    return;
  }
  ins.log_first = static_cast<uint16_t>(first);
  ins.log_count = static_cast<uint16_t>(ret - first);
}

/// Every tensor a kernel touches needs storage: a program can leave an intermediate unplanned, or free it, and a
/// kernel must then fail instead of dereferencing null.
inline Status Method::check_storage(size_t pc, const Instruction& ins) const {
  const auto missing = [&](const Tensor& t) { return t.data() == nullptr && t.capacity_nbytes() > 0; };
  // A kernel that computes its return value (a view such as et_view) gives the return slot its storage itself.
  const size_t ret = ins.args.size() - 1;
  const bool sets_return = ret < 64 && ((ins.mutable_slots >> ret) & 1u);
  for (size_t j = 0; j < ins.args.size(); ++j) {
    if (sets_return && j == ret) continue;
    const EValue* v = ins.args[j];
    if (v->is_tensor()) {
      if (missing(v->tensor_unchecked()))
        return fail(Error::InvalidProgram, where(), " instruction ", pc, " (", ins.op_name, "): value ",
                    v - values_.data(), " is a tensor without storage (not planned, not a constant, not bound)");
    } else if (const auto* l = std::get_if<TensorList>(&v->storage())) {
      for (const Tensor* t : l->items)
        if (missing(*t))
          return fail(Error::InvalidProgram, where(), " instruction ", pc, " (", ins.op_name,
                      "): a listed tensor has no storage");
    } else if (const auto* ol = std::get_if<OptionalTensorList>(&v->storage())) {
      for (const Tensor* t : ol->items)
        if (t && missing(*t))
          return fail(Error::InvalidProgram, where(), " instruction ", pc, " (", ins.op_name,
                      "): a listed tensor has no storage");
    }
  }
  return {};
}

inline Status Method::run_instruction(size_t& pc, const Instruction& ins, KernelContext& ctx) {
  // Note [checked at load]: every index, operator and slot count below was validated by Method::load.
  switch (ins.kind) {
    case Kind::Kernel: {
      ETRT_CHECK_OK(check_storage(pc, ins));
      if (auto s = ins.fn(ctx, ins.args); !s)
        return fail(s.error().code, where(), " instruction ", pc, " (", ins.op_name, "): ", s.error().what);
      ++pc;
      return {};
    }
    case Kind::Delegate: {
      const Delegate& d = delegates_[ins.a];
      if (auto s = d.backend->execute(d.handle.get(), ins.args); !s)
        return fail(s.error().code, where(), " instruction ", pc, " (delegate '", d.id, "'): ", s.error().what);
      ++pc;
      return {};
    }
    case Kind::Move:
      values_[ins.b] = values_[ins.a];
      ++pc;
      return {};
    case Kind::JumpFalse: {
      const EValue& c = values_[ins.a];
      bool cond = false;
      if (c.is_bool()) {
        cond = c.bool_unchecked();
      } else if (c.is_tensor() && c.tensor_unchecked().dtype() == ScalarType::Bool) {
        const Tensor& t = c.tensor_unchecked();
        if (!t.device().is_cpu())
          return fail(Error::InvalidProgram, where(), " instruction ", pc, ": jump condition lives on ",
                      t.device().str());
        const auto* p = static_cast<const uint8_t*>(t.data());  // bytes: any value a plan left there is defined
        cond = true;
        for (int64_t k = 0; k < t.numel(); ++k) cond = cond && p[k] != 0;
      } else {
        return fail(Error::InvalidProgram, where(), " instruction ", pc, ": jump condition is ", tag_name(c.tag()));
      }
      pc = cond ? pc + 1 : ins.b;
      return {};
    }
    case Kind::Free:
      values_[ins.a].tensor_unchecked().set_data(nullptr);
      ++pc;
      return {};
  }
  return fail(Error::Internal, "unreachable");
}

inline Status Method::execute_unguarded() {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!input_set_[i]) return fail(Error::InvalidArgument, where(), ": input ", i, " has not been set");
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (!outputs_[i]->is_tensor()) continue;
    const Tensor& t = outputs_[i]->tensor_unchecked();
    if (t.data() || t.capacity_nbytes() == 0) continue;
    if (output_needs_storage(i))
      return fail(Error::InvalidState, where(), ": output ", i,
                  " is not memory planned and has no storage (set_output_data_ptr)");
    return fail(Error::InvalidProgram, where(), ": output ", i, " is a tensor without storage");
  }
  KernelContext ctx;
  ctx.device = device_api_;
  const bool log_values = observer_ && observer_->wants_values();
  size_t pc = 0, steps = 0;
  const size_t n = instructions_.size();
  while (pc < n) {
    if (++steps > kMaxInstructionsPerExecute)
      return fail(Error::InvalidProgram, where(), ": exceeded ", kMaxInstructionsPerExecute,
                  " instructions (a jump loop?)");
    const Instruction& ins = instructions_[pc];
    if (observer_) {
      const size_t at = pc;
      const auto t0 = std::chrono::steady_clock::now();
      ETRT_CHECK_OK(run_instruction(pc, ins, ctx));
      const auto t1 = std::chrono::steady_clock::now();
      const auto ns = [](auto t) {
        return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
      };
      if (log_values && ins.log_count > 0)
        observer_->on_values(at, std::span<EValue* const>(ins.args).subspan(ins.log_first, ins.log_count),
                             device_api_);
      observer_->on_instruction(at, ins.kind, ins.op_name, ns(t0), ns(t1));
    } else {
      ETRT_CHECK_OK(run_instruction(pc, ins, ctx));
    }
  }
  // A program can reassign an output's tensor during execution (MoveCall, FreeCall): never hand out null storage.
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (outputs_[i]->is_tensor() && !outputs_[i]->tensor_unchecked().data() &&
        outputs_[i]->tensor_unchecked().nbytes() > 0)
      return fail(Error::InvalidProgram, where(), ": output ", i, " has no storage after execution");
  if (log_values) observer_->on_outputs(outputs_, device_api_);
  executed_ = true;
  return {};
}

}  // namespace etrt
