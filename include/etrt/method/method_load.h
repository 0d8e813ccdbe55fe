// Method loading: the value table (tensors placed in planned arenas, constants, external data), the delegates
// (each payload parsed and checked once) and the instructions (kernels resolved, arguments and jumps checked).
// Everything execution relies on is checked here (Note [checked at load]).
#pragma once

#include "etrt/method/method.h"

namespace etrt {

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
  m->where_ = cat("method '", m->meta_.name, "'");
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

/// Note [bool bytes]: a bool element is one byte, 0 or 1; loading any other byte as C++ bool is undefined behaviour,
/// and kernels read bool tensors through bool pointers. So a bool tensor a kernel reads must hold only 0s and 1s:
/// inputs are checked when bound (set_input), the initial contents a file gives a bool tensor (constants, mutable
/// buffers, external data) are checked here at load, and the interpreter checks the bool tensors a kernel only reads
/// before calling it (check_bool_bytes): the one way left for another byte to get there is a memory plan that lets
/// another tensor's bytes reach a bool tensor before it is written, which no exporter writes.
inline Status check_bool_contents(const std::string& at, const uint8_t* p, size_t n) {
  if (const size_t k = first_non_bool_byte(p, n); k < n)
    return fail(Error::InvalidProgram, at, ": bool element ", k, " is the byte ", int(p[k]),
                " (a bool is stored as 0 or 1)");
  return {};
}

inline Result<void*> Method::resolve_tensor_data(const TensorMeta& t, size_t vi, const LoadOptions& options) {
  const std::string at = cat(where(), " value ", vi);
  const size_t nbytes = t.nbytes();
  const auto check_bools = [&](const uint8_t* p) -> Status {
    return t.dtype == ScalarType::Bool ? check_bool_contents(at, p, nbytes) : Status{};
  };
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
    ETRT_CHECK_OK(check_bools(blob->bytes.data()));
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
    ETRT_CHECK_OK(check_bools(p));
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
      ETRT_CHECK_OK(check_bools(init));
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
          if (!value_meta_[i]->fqn.empty()) value_by_fqn_.emplace(value_meta_[i]->fqn, i);  // the first one named
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
            // Note [bool bytes]: the bool tensors this kernel only reads are checked before each call.
            const auto holds_bool = [](const EValue& v) {
              return any_tensor(v, [](const Tensor& t) { return t.dtype() == ScalarType::Bool; });
            };
            // A slot holding a value the kernel writes (its out argument, or the return slot that aliases it) is
            // not read: its bytes before the call can be anything the arena held.
            const auto written = [&](const EValue* v) {
              for (size_t w = 0; w < args.size() && w < 64; ++w)
                if (((out.mutable_slots >> w) & 1u) && out.args[w] == v) return true;
              return false;
            };
            for (size_t j = 0; j < args.size() && j < 64; ++j)
              if (!written(out.args[j]) && holds_bool(*out.args[j])) out.bool_read_slots |= uint64_t{1} << j;
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
  // Note [storage checked]: a planned or constant tensor that no MoveCall overwrites and no FreeCall releases keeps
  // its storage for the method's life; only a kernel's other argument slots are checked before each call.
  std::vector<bool> always_backed(values_.size(), false);
  for (size_t i = 0; i < values_.size(); ++i)
    always_backed[i] = value_meta_[i] && (value_meta_[i]->has_allocation || value_meta_[i]->is_constant());
  for (const Instruction& ins : instructions_) {
    if (ins.kind == Kind::Move) always_backed[ins.b] = false;
    if (ins.kind == Kind::Free) always_backed[ins.a] = false;
  }
  for (Instruction& ins : instructions_) {
    if (ins.kind != Kind::Kernel) continue;
    ins.storage_slots = 0;
    for (size_t j = 0; j < ins.args.size() && j < 64; ++j)
      if (!always_backed[static_cast<size_t>(ins.args[j] - values_.data())]) ins.storage_slots |= uint64_t{1} << j;
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

}  // namespace etrt
