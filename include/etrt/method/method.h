// Method: one loaded ExecutionPlan: its value table, planned memory and instructions, ready to execute.
//
// Everything that depends only on the program is checked in Method::load (value indices, kernel names and slot
// counts, jump targets, planned offsets); execute() relies on those checks (Note [checked at load]).
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "etrt/backend/backend.h"
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

/// The index of the first byte of p[0, n) that is not a bool (0 or 1), or n (Note [bool bytes]). Blocks of 64 bytes
/// are OR-reduced first (a byte above 1 sets a bit above bit 0): a loop of fixed length vectorizes, where the
/// search loop's early exit kept it at a byte a cycle (a 30k-element mask cost a kernel 16 us before its own loop).
inline size_t first_non_bool_byte(const uint8_t* p, size_t n) {
  constexpr size_t kBlock = 64;
  size_t k = 0;
  for (; k + kBlock <= n; k += kBlock) {
    uint8_t bits = 0;
    for (size_t j = 0; j < kBlock; ++j) bits |= p[k + j];
    if (bits > 1) break;
  }
  while (k < n && p[k] <= 1) ++k;
  return k;
}

/// True when `pred` holds for the tensor `v` holds, or for one tensor of its (optional) tensor list.
template <class Pred>
inline bool any_tensor(const EValue& v, Pred&& pred) {
  if (v.is_tensor()) return pred(v.tensor_unchecked());
  if (const auto* l = std::get_if<TensorList>(&v.storage()))
    return std::ranges::any_of(l->items, [&](const Tensor* t) { return pred(*t); });
  if (const auto* ol = std::get_if<OptionalTensorList>(&v.storage()))
    return std::ranges::any_of(ol->items, [&](const Tensor* t) { return t && pred(*t); });
  return false;
}

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
  /// True for an output the file declares a tensor that is neither planned, a constant, nor an input value (a
  /// mutated input is returned as an output and keeps the input's storage).
  bool output_needs_storage(size_t index) const {
    const EValue& v = *outputs_[index];
    // A value the file does not declare a tensor may hold one after a move; it has whatever storage it was given.
    const auto& declared = meta_.outputs[index].tensor;
    return v.is_tensor() && declared && !declared->is_memory_planned() &&
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
    uint64_t bool_read_slots = 0;  // kernel argument slots it only reads that hold bool tensors (Note [bool bytes])
    uint64_t storage_slots = ~uint64_t{0};  // slots whose storage is checked per call (Note [storage checked])
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
  Status check_bool_bytes(size_t pc, const Instruction& ins) const;
  /// The device of `v`'s tensor, or of the first listed tensor on a device; nullopt when all are on the host.
  std::optional<Device> device_tensor_in(const EValue& v) const;
  /// "method 'NAME'", the context of this method's failures (made once at load: execute() passes it on every call).
  const std::string& where() const { return where_; }

  // Declared in dependency order: the program outlives the memory, which outlives the values that point into it.
  std::shared_ptr<const Program> program_;
  const DeviceInterface* device_api_ = nullptr;
  MethodMeta meta_;
  std::string where_;  // where()
  PlannedMemory memory_;
  std::vector<ArenaPtr> input_staging_;  // per input: storage for converted/copied unplanned inputs
  std::vector<size_t> input_staging_size_;
  std::vector<DeviceBuffer> input_device_staging_;  // per input: device copies of read-only device inputs
  std::vector<EValue> values_;
  std::vector<const TensorMeta*> value_meta_;  // per value, null unless a tensor
  std::unordered_map<std::string_view, size_t> value_by_fqn_;  // named tensors: attribute()
  std::vector<TensorMeta> tensor_metas_;
  std::vector<EValue*> inputs_;
  std::vector<EValue*> outputs_;
  std::vector<bool> input_set_;
  std::vector<Delegate> delegates_;
  std::vector<Instruction> instructions_;
  InstructionObserver* observer_ = nullptr;
  bool executed_ = false;
};

}  // namespace etrt

// The member definitions, one file per job; each includes this header first, so any of them may be included alone.
#include "etrt/method/method_execute.h"
#include "etrt/method/method_inputs.h"
#include "etrt/method/method_load.h"
