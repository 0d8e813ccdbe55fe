// ExecuTorchMethod: one loaded method behind a lock; inputs in, execute with the GIL released, outputs out.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

#include "etrt/adapters/conversions.h"
#include "etrt/adapters/inputs.h"
#include "etrt/adapters/py_meta.h"
#include "etrt/adapters/state.h"

namespace etrt::python {

namespace py = pybind11;

// ---- ExecuTorchMethod ---------------------------------------------------------------------------------------------

class PyMethod {
 public:
  explicit PyMethod(std::shared_ptr<MethodState> s) : state_(std::move(s)) {}

  /// `module_method`: a Module's method, which allocates new device memory for unplanned outputs each call.
  static std::shared_ptr<PyMethod> load(std::shared_ptr<ProgramState> ps, const std::string& name,
                                        bool module_method = false) {
    auto st = std::make_shared<MethodState>();
    st->program = ps;
    st->fresh_device_outputs = module_method;
    check(ps->check_files());
    if (ps->data_error) raise_logged(*ps->data_error);
    const uint64_t t0 = etdump::now_ticks();
    auto loaded = Method::load(ps->program, name, ps->options());
    if (!loaded) raise_logged(with_device_hint(*ps, name, loaded.error()));
    st->method = std::move(*loaded);
    if (ps->etdump) {
      const uint64_t t1 = etdump::now_ticks();
      ps->etdump->record_load(t0, t1, t0, t1);
      st->method->set_observer(ps->etdump.get());
    }
    return std::make_shared<PyMethod>(std::move(st));
  }

  /// A load failure of a method that needs CUDA, with what this build or machine lacks.
  static Failure with_device_hint(const ProgramState& ps, const std::string& name, Failure f) {
    auto meta = ps.program->method_meta(name);
    if (!meta) return f;
    std::optional<Device> dev;
    for (Device d : meta->planned_buffer_devices)
      if (!d.is_cpu() && !dev) dev = d;
    for (const auto* list : {&meta->inputs, &meta->outputs})
      for (const ValueInfo& v : *list)
        if (v.tensor && !v.tensor->device.is_cpu() && !dev) dev = v.tensor->device;
    const bool uses_cuda_backend =
        std::find(meta->backends.begin(), meta->backends.end(), kCudaBackendId) != meta->backends.end();
    if (!dev && !uses_cuda_backend) return f;
    const Device d = dev.value_or(Device{DeviceType::CUDA, 0});
    std::string why = device_runtime().device_problem(d.index);
    if (why.empty()) return f;
    f.what += cat(" [method '", name, "' runs on device ", d.str(), uses_cuda_backend ? cat(" through ", kCudaBackendId) : "",
                  ", and ", why, "]");
    return f;
  }

  const std::string& name() const { return state_->method->name(); }
  MethodState& state() { return *state_; }

  /// A single tensor-like object is one input; any other sequence is the flat list of inputs.
  static std::vector<py::object> as_input_list(py::handle inputs) {
    std::vector<py::object> out;
    if (PyList_Check(inputs.ptr()) || PyTuple_Check(inputs.ptr())) {
      out.reserve(static_cast<size_t>(Py_SIZE(inputs.ptr())));
      for (py::handle h : inputs) out.push_back(py::reinterpret_borrow<py::object>(h));
      return out;
    }
    const bool tensor_like = PyObject_CheckBuffer(inputs.ptr()) || PyCapsule_CheckExact(inputs.ptr()) ||
                             py::hasattr(inputs, "__dlpack__") || is_result(inputs) ||
                             InputConverter::is_torch_tensor(inputs);
    if (tensor_like) {
      out.push_back(py::reinterpret_borrow<py::object>(inputs));
      return out;
    }
    if (!PySequence_Check(inputs.ptr()) || PyUnicode_Check(inputs.ptr()))
      throw std::runtime_error(cat("inputs must be a sequence of tensors or scalars, got ",
                                   std::string(py::str(py::type::handle_of(inputs)))));
    for (py::handle h : py::reinterpret_borrow<py::sequence>(inputs)) out.push_back(py::reinterpret_borrow<py::object>(h));
    return out;
  }

  // Each of these assumes the caller holds the method lock.

  /// Binds the inputs. Waits first, once per device holding a non-empty CUDA input, and with `with_outputs` (a
  /// whole call) also per device holding a non-empty CUDA output (Note [device waits]).
  void set_inputs_locked(const std::vector<py::object>& inputs, bool with_outputs = false) {
    Method& m = *state_->method;
    if (inputs.size() != m.num_inputs())
      throw std::runtime_error(cat("method '", m.name(), "' expects ", m.num_inputs(), " input",
                                   m.num_inputs() == 1 ? "" : "s", ", got ", inputs.size()));
    InputConverter conv(m.name(), m.meta());
    std::vector<HostInput>& held = next_inputs_;  // reused across calls: its capacity stays
    // Empty again on every way out: what a failed call converted is released now, not at the next call.
    struct ClearOnExit {
      std::vector<HostInput>& v;
      ~ClearOnExit() { v.clear(); }
    } clear_on_exit{held};
    held.reserve(inputs.size());
    DeviceSet before;
    bool any_device = false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      HostInput in = conv.convert(inputs[i], i);
      // A device the method does not expect there: the core says which, before any wait (nothing is bound yet).
      if (in.is_tensor && in.device != m.expected_device(i)) check(m.set_input(i, in.tensor()));
      if (in.is_tensor && !in.device.is_cpu()) {
        any_device = true;
        if (checked_numel(in.sizes) > 0) before.add(in.device);
      }
      held.push_back(std::move(in));
    }
    if (with_outputs) add_output_devices(before, /*non_empty=*/true);
    if (any_device || !before.empty()) device_runtime().require_waits(cat("method '", m.name(), "'"));
    before.wait_all();
    // All or nothing: when input i is refused, inputs 0..i-1 may already alias memory `held` releases on the way
    // out, so every input is unbound before the error propagates.
    for (size_t i = 0; i < held.size(); ++i) {
      std::optional<Failure> refused;
      if (held[i].is_tensor) {
        if (auto b = m.set_input(i, held[i].tensor()); !b) refused = b.error();
      } else if (auto st = m.set_input(i, held[i].scalar); !st) {
        refused = st.error();
      }
      if (refused) {
        m.unbind_inputs();
        inputs_.clear();
        state_->outputs_visible = false;
        cloned_.clear();
        raise(*refused);
      }
    }
    std::swap(inputs_, held);  // the previous inputs are released only now (clear_on_exit)
    state_->outputs_visible = false;
    cloned_.clear();
  }

  /// Runs the method. Waits before it (unless set_inputs_locked just did, for a whole call) and after it
  /// (Note [device waits]).
  void execute_locked(bool wait_before = true) {
    MethodState& s = *state_;
    cloned_.clear();  // results nobody else holds release their output buffers for this execution
    DeviceSet all;
    add_input_devices(all, false);
    add_output_devices(all, false);
    if (!all.empty()) device_runtime().require_waits(cat("method '", s.method->name(), "'"));
    check(s.program->check_files());
    check(s.prepare_outputs());
    if (wait_before) {
      DeviceSet before;
      add_input_devices(before, true);
      add_output_devices(before, true);
      before.wait_all();
    }
    Status st, recorded;
    {
      py::gil_scoped_release release;
      if (s.program->etdump) s.program->etdump->begin_execute(s.method->name());
      st = s.method->execute();
      if (s.program->etdump) recorded = s.program->etdump->end_execute();
    }
    if (!st) {
      s.outputs_visible = false;
      try {
        all.wait_all();  // the device may still be running work the method queued before it failed
      } catch (std::exception&) {  // the execution's failure is the one to report
      }
      raise(st.error());
    }
    all.wait_all();
    ++s.execution;
    s.outputs_visible = true;
    cloned_.clear();
    // Note [debug buffer overflow]: the execution completed, but its intermediate outputs did not fit.
    if (!recorded) raise(recorded.error());
  }

  py::list get_outputs_locked(bool clone) {
    MethodState& s = *state_;
    Method& m = *s.method;
    if (!s.outputs_visible)
      throw std::runtime_error(cat("method '", m.name(), "': outputs are not available; ",
                                   m.executed() ? "set_inputs was called after the last execute; call execute() first"
                                                : "the method has not been executed"));
    py::list out;
    if (clone && cloned_.size() == m.num_outputs()) {  // same objects within one execution
      for (auto& o : cloned_) out.append(o);
      return out;
    }
    // clone: the results go to cloned_ as they are made (its capacity is reused); it is left empty unless every
    // output converted. A borrowing call leaves it as it is.
    if (clone) cloned_.clear();
    try {
      for (size_t i = 0; i < m.num_outputs(); ++i) {
        const bool constant = m.output_is_constant(i);
        const auto storage = i < s.output_storage.size() ? s.output_storage[i] : nullptr;
        auto tensor = [&](const Tensor& t) -> py::object {
          // Filled storage the bindings allocated for an unplanned output: a result holds that storage, so the next
          // execution writes the other buffer.
          const bool in_storage = storage && t.data() == storage->data();
          if (clone) {
            if (in_storage) return wrap_result(ExecuTorchResult(t, storage, false));  // handed over, no copy
            return clone_output(t, i);
          }
          std::shared_ptr<const void> owner = state_;
          if (in_storage)
            owner = std::make_shared<std::pair<std::shared_ptr<MethodState>, std::shared_ptr<Storage>>>(state_, storage);
          return wrap_result(ExecuTorchResult(t, std::move(owner), constant));
        };
        py::object o = value_to_python(m.output(i), tensor);
        out.append(o);
        if (clone) cloned_.push_back(std::move(o));
      }
    } catch (...) {
      if (clone) cloned_.clear();
      throw;
    }
    return out;
  }

  // ---- Python-facing ----
  void set_inputs(py::handle inputs) {
    auto list = as_input_list(inputs);
    MethodLock lock(state_->mu);
    set_inputs_locked(list);
  }
  void execute() {
    MethodLock lock(state_->mu);
    execute_locked();
  }
  py::list get_outputs(bool clone) {
    MethodLock lock(state_->mu);
    return get_outputs_locked(clone);
  }
  py::list call(py::handle inputs, bool clone) {
    auto list = as_input_list(inputs);
    MethodLock lock(state_->mu);
    set_inputs_locked(list, /*with_outputs=*/true);
    execute_locked(/*wait_before=*/false);
    return get_outputs_locked(clone);
  }
  py::list run_without_inputs(bool clone) {
    MethodLock lock(state_->mu);
    execute_locked();
    return get_outputs_locked(clone);
  }
  PyMethodMeta method_meta() const { return PyMethodMeta{state_->method->meta(), state_->program}; }

  py::object get_attribute(const std::string& name) {
    MethodLock lock(state_->mu);
    Tensor* t = check(state_->method->attribute(name));
    const bool constant = state_->method->value_is_constant(t);
    // A view of the method's memory; wrap_result copies a read-only constant in torch mode.
    return wrap_result(ExecuTorchResult(*t, std::static_pointer_cast<const void>(state_), constant));
  }

 private:
  /// A clone_outputs=True copy of output `i` on its own device. A CUDA output costs an allocation, a device-to-device
  /// copy and one wait; without CUDA-enabled bindings torch makes the copy in torch output mode.
  py::object clone_output(const Tensor& t, size_t i) {
    if (t.device().is_cpu() || device_runtime().cuda()) return wrap_result(ExecuTorchResult::clone_of(t));
    if (output_config().mode == OutputMode::Torch) {
      py::object borrowed = wrap_result(ExecuTorchResult(t, std::static_pointer_cast<const void>(state_), false));
      py::object copy = borrowed.attr("clone")();
      device_runtime().wait(t.device().index);
      return copy;
    }
    throw std::runtime_error(cat("method '", state_->method->name(), "': output ", i, " is on ", t.device().str(),
                                 "; clone_outputs=True copies it, and copying CUDA memory needs CUDA-enabled bindings "
                                 "(pass clone_outputs=False for a borrowed view)"));
  }

  /// Devices of the method's CUDA input values (bound ones; `non_empty`: holding at least one element).
  void add_input_devices(DeviceSet& set, bool non_empty) const {
    const Method& m = *state_->method;
    for (size_t i = 0; i < m.num_inputs(); ++i) add_devices(set, m.input(i), non_empty, false);
  }
  /// Devices of the method's CUDA outputs (`non_empty`: with room for at least one element).
  void add_output_devices(DeviceSet& set, bool non_empty) const {
    const Method& m = *state_->method;
    for (size_t i = 0; i < m.num_outputs(); ++i) add_devices(set, m.output(i), non_empty, true);
  }
  static void add_devices(DeviceSet& set, const EValue& v, bool non_empty, bool capacity) {
    const auto add = [&](const Tensor* t) {
      if (!t || t->device().is_cpu()) return;
      if (non_empty && (capacity ? t->capacity_nbytes() : t->nbytes()) == 0) return;
      set.add(t->device());
    };
    if (v.is_tensor()) {
      add(&v.tensor_unchecked());
    } else if (v.tag() == Tag::ListTensor || v.tag() == Tag::ListOptionalTensor) {
      if (auto items = v.to_optional_tensor_list("output"))
        for (Tensor* t : *items) add(t);
    }
  }

  std::shared_ptr<MethodState> state_;
  std::vector<HostInput> inputs_;       // keeps aliased inputs alive until the next set_inputs
  std::vector<HostInput> next_inputs_;  // set_inputs_locked's scratch (empty between calls)
  std::vector<py::object> cloned_;  // clone_outputs=True results of the current execution
};

}  // namespace etrt::python
