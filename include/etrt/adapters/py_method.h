// ExecuTorchMethod: one loaded method behind a lock; inputs in, execute with the GIL released, outputs out.
#pragma once

#include <pybind11/pybind11.h>

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

  static std::shared_ptr<PyMethod> load(std::shared_ptr<ProgramState> ps, const std::string& name) {
    auto st = std::make_shared<MethodState>();
    st->program = ps;
    const uint64_t t0 = now_ticks();
    st->method = check(Method::load(ps->program, name, ps->options()));
    if (ps->etdump) {
      const uint64_t t1 = now_ticks();
      ps->etdump->record_load(t0, t1, t0, t1);
      st->method->set_observer(ps->etdump.get());
    }
    return std::make_shared<PyMethod>(std::move(st));
  }

  const std::string& name() const { return state_->method->name(); }
  MethodState& state() { return *state_; }

  /// A single tensor-like object is one input; any other sequence is the flat list of inputs.
  static std::vector<py::object> as_input_list(py::handle inputs) {
    std::vector<py::object> out;
    if (PyList_Check(inputs.ptr()) || PyTuple_Check(inputs.ptr())) {
      for (py::handle h : inputs) out.push_back(py::reinterpret_borrow<py::object>(h));
      return out;
    }
    const bool tensor_like = PyObject_CheckBuffer(inputs.ptr()) || PyCapsule_CheckExact(inputs.ptr()) ||
                             py::hasattr(inputs, "__dlpack__") || py::isinstance<ExecuTorchResult>(inputs) ||
                             py::hasattr(inputs, "data_ptr");
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
  void set_inputs_locked(const std::vector<py::object>& inputs) {
    Method& m = *state_->method;
    if (inputs.size() != m.num_inputs())
      throw std::runtime_error(cat("method '", m.name(), "' expects ", m.num_inputs(), " input",
                                   m.num_inputs() == 1 ? "" : "s", ", got ", inputs.size()));
    InputConverter conv(m.name(), m.meta());
    std::vector<HostInput> held;
    held.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      HostInput in = conv.convert(inputs[i], i);
      if (in.is_tensor) {
        if (!in.tensor.device.is_cpu())
          throw std::runtime_error(cat("method '", m.name(), "': input ", i, " is on ", in.tensor.device.str(),
                                       "; CUDA inputs need the CUDA-enabled build and a method exported with CUDA inputs"));
        check(m.set_input(i, in.tensor));
      } else {
        check(m.set_input(i, in.scalar));
      }
      held.push_back(std::move(in));
    }
    inputs_ = std::move(held);  // the previous inputs are released only now
    state_->outputs_visible = false;
    cloned_.clear();
  }

  void execute_locked() {
    MethodState& s = *state_;
    check(s.prepare_outputs());
    Status st;
    {
      py::gil_scoped_release release;
      if (s.program->etdump) s.program->etdump->begin_execute();
      st = s.method->execute();
      if (s.program->etdump) s.program->etdump->end_execute();
    }
    if (!st) {
      s.outputs_visible = false;
      raise(st.error());
    }
    ++s.execution;
    s.outputs_visible = true;
    cloned_.clear();
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
    std::vector<py::object> objs;
    for (size_t i = 0; i < m.num_outputs(); ++i) {
      const bool constant = m.output_is_constant(i);
      const auto storage = i < s.output_storage.size() ? s.output_storage[i] : nullptr;
      auto tensor = [&](const Tensor& t) -> py::object {
        if (clone) {
          // An output that filled storage the bindings allocated for it is handed over without a copy.
          if (storage && t.data() == storage->bytes.get()) return wrap_result(ExecuTorchResult(t, storage, false));
          return wrap_result(ExecuTorchResult::clone_of(t));
        }
        return wrap_result(ExecuTorchResult(t, std::static_pointer_cast<const void>(state_), constant));
      };
      objs.push_back(value_to_python(m.output(i), tensor));
    }
    for (auto& o : objs) out.append(o);
    if (clone) cloned_ = std::move(objs);
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
    set_inputs_locked(list);
    execute_locked();
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
  std::shared_ptr<MethodState> state_;
  std::vector<HostInput> inputs_;   // keeps aliased inputs alive until the next set_inputs
  std::vector<py::object> cloned_;  // clone_outputs=True results of the current execution
};

}  // namespace etrt::python
