// The Python module `portable_lib` (compiled as executorch.extension.pybindings._C): classes and loaders with the
// upstream names, signatures and defaults (../shared/reference/upstream-api.md), on top of the header-only runtime.
//
// Locking (Note [lock order]): a call first releases the GIL, takes the method's mutex, then re-acquires the GIL.
// It releases the GIL again only around execute(). A thread that waits for the mutex never holds the GIL, so two
// threads can't deadlock on the pair.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "etrt/adapters/inputs.h"
#include "etrt/adapters/state.h"

namespace etrt::python {

namespace py = pybind11;

// ---- output mode: fixed when the extension loads ---------------------------------------------------------------

enum class OutputMode { ExecuTorch, Torch };

struct OutputConfig {
  OutputMode mode = OutputMode::ExecuTorch;
  PyObject* torch_from_dlpack = nullptr;  // a strong reference kept for the process lifetime
};
inline OutputConfig& output_config() {
  static OutputConfig c;
  return c;
}

[[noreturn]] inline void raise(const Failure& f) { throw std::runtime_error(f.describe()); }
inline void check(const Status& s) {
  if (!s) raise(s.error());
}
template <class T>
T check(Result<T>&& r) {
  if (!r) raise(r.error());
  return std::move(*r);
}

/// Holds `mu` for a scope, taking it without the GIL (Note [lock order]).
class MethodLock {
 public:
  explicit MethodLock(std::mutex& mu) : lock_(mu, std::try_to_lock) {
    if (lock_.owns_lock()) return;  // uncontended: no need to drop the GIL
    py::gil_scoped_release release;
    lock_.lock();
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

/// Wraps a result for Python: an ExecuTorchResult, or a torch.Tensor in torch output mode.
/// In torch mode the capsule goes straight to torch.from_dlpack (its capsule form skips the protocol
/// negotiation); a read-only result is copied first, since a torch tensor cannot be read-only.
inline py::object wrap_result(ExecuTorchResult r) {
  if (output_config().mode == OutputMode::Torch) {
    py::capsule cap = to_dlpack_capsule(r.read_only() ? r.copy() : r, /*versioned=*/true, 0);
    return py::reinterpret_borrow<py::object>(output_config().torch_from_dlpack)(cap);
  }
  return py::cast(std::move(r));
}

inline py::object value_to_python(const EValue& v, const std::function<py::object(const Tensor&)>& tensor) {
  switch (v.tag()) {
    case Tag::None: return py::none();
    case Tag::Int: return py::int_(v.int_unchecked());
    case Tag::Double: return py::float_(v.double_unchecked());
    case Tag::Bool: return py::bool_(v.bool_unchecked());
    case Tag::String: return py::str(std::string(v.string_unchecked()));
    case Tag::Tensor: return tensor(v.tensor_unchecked());
    case Tag::ListInt: {
      py::list l;
      for (int64_t x : *v.to_int_list("output")) l.append(x);
      return l;
    }
    case Tag::ListDouble: {
      py::list l;
      for (double x : *v.to_double_list("output")) l.append(x);
      return l;
    }
    case Tag::ListBool: {
      py::list l;
      for (bool x : **v.to_bool_list("output")) l.append(x);
      return l;
    }
    case Tag::ListTensor:
    case Tag::ListOptionalTensor: {
      py::list l;
      for (Tensor* t : *v.to_optional_tensor_list("output")) l.append(t ? tensor(*t) : py::none());
      return l;
    }
    default: throw std::runtime_error("unsupported output type " + std::string(tag_name(v.tag())));
  }
}

// ---- TensorInfo / MethodMeta -------------------------------------------------------------------------------------

struct PyTensorInfo {
  TensorMeta meta;
  std::shared_ptr<ProgramState> keepalive;

  py::tuple sizes() const { return py::cast(meta.sizes); }
  int dtype() const { return static_cast<int>(meta.dtype); }
  bool is_memory_planned() const { return meta.is_memory_planned(); }
  size_t nbytes() const { return meta.nbytes(); }
  py::tuple dim_order() const { return py::cast(std::vector<int>(meta.dim_order.begin(), meta.dim_order.end())); }
  std::string device() const { return meta.device.str(); }
  std::string name() const { return std::string(meta.fqn); }
  std::string repr() const {
    return cat("TensorInfo(sizes=", shape_str(meta.sizes), ", dtype=", etrt::name(meta.dtype),
               ", is_memory_planned=", meta.is_memory_planned() ? "True" : "False", ", nbytes=", meta.nbytes(), ")");
  }
};

struct PyMethodMeta {
  MethodMeta meta;
  std::shared_ptr<ProgramState> keepalive;

  static PyTensorInfo info(const std::vector<ValueInfo>& v, size_t i, std::string_view what,
                           const std::shared_ptr<ProgramState>& ka) {
    if (i >= v.size() || !v[i].tensor) throw py::index_error(cat("Cannot get ", what, " tensor meta at ", i));
    return PyTensorInfo{*v[i].tensor, ka};
  }
  PyTensorInfo input_tensor_meta(size_t i) const { return info(meta.inputs, i, "input", keepalive); }
  PyTensorInfo output_tensor_meta(size_t i) const { return info(meta.outputs, i, "output", keepalive); }
  PyTensorInfo attribute_tensor_meta(size_t i) const {
    if (i >= meta.attributes.size()) throw py::index_error(cat("Cannot get attribute tensor meta at ", i));
    return PyTensorInfo{meta.attributes[i], keepalive};
  }
  std::string repr() const {
    auto list = [&](const std::vector<ValueInfo>& v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += ", ";
        s += "'" + (v[i].tensor ? PyTensorInfo{*v[i].tensor, nullptr}.repr() : std::string(tag_name(v[i].tag))) + "'";
      }
      return s + "]";
    };
    return cat("MethodMeta(name='", meta.name, "', num_inputs=", meta.inputs.size(), ", input_tensor_meta=",
               list(meta.inputs), ", num_outputs=", meta.outputs.size(), ", output_tensor_meta=", list(meta.outputs),
               ")");
  }
};

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

// ---- ExecuTorchProgram / ExecuTorchModule ---------------------------------------------------------------------

/// Writes the ETDump recorded since the previous write (upstream semantics: each write holds the newer runs).
inline void write_etdump(ProgramState& ps, const std::string& path, py::object debug_buffer_path) {
  if (!ps.etdump) throw std::runtime_error("No etdump found");
  (void)debug_buffer_path;  // no debug buffer: intermediate outputs are not recorded
  const auto bytes = ps.etdump->take();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error(cat("Failed to open file ", path, ": ", std::strerror(errno)));
  const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (n != bytes.size()) throw std::runtime_error(cat("Failed to write etdump to file ", path));
  if (!closed) throw std::runtime_error(cat("Failed to close etdump file ", path));
}

inline std::shared_ptr<ProgramState> make_program_state(std::shared_ptr<const DataSource> src,
                                                        std::shared_ptr<const DataSource> data_src,
                                                        Verification verification, bool etdump,
                                                        std::span<const KernelEntry> kernels) {
  auto ps = std::make_shared<ProgramState>();
  if (BundledProgram::is_bundled(src->bytes())) {  // a .bpte: run its embedded program
    auto bp = check(BundledProgram::load(src));
    src = bp->program_source();
  }
  ps->source = src;
  ps->kernels = kernels;
  ps->enable_etdump = etdump;
  if (etdump) ps->etdump = std::make_shared<ETDumpRecorder>();
  {
    py::gil_scoped_release release;
    auto prog = Program::load(src, verification);
    if (!prog) {
      py::gil_scoped_acquire acquire;
      raise(prog.error());
    }
    ps->program = std::move(*prog);
    if (data_src) {
      auto dm = FlatTensorData::load(data_src);
      if (!dm) {
        py::gil_scoped_acquire acquire;
        raise(dm.error());
      }
      ps->data_map = std::move(*dm);
    }
  }
  return ps;
}

inline std::shared_ptr<const DataSource> source_from_path(const std::string& path) {
  return check(DataSource::from_file(path));
}
inline std::shared_ptr<const DataSource> source_from_bytes(py::handle buffer) {
  // The bytes are copied into storage the program owns, so the caller's object may go away (upstream #10725).
  py::buffer_info info = py::reinterpret_borrow<py::buffer>(buffer).request();
  return DataSource::copy_of({static_cast<const uint8_t*>(info.ptr), static_cast<size_t>(info.size * info.itemsize)});
}

class PyProgram {
 public:
  explicit PyProgram(std::shared_ptr<ProgramState> ps) : ps_(std::move(ps)) {}
  size_t num_methods() const { return ps_->program->num_methods(); }
  std::string get_method_name(size_t i) const { return std::string(check(ps_->program->get_method_name(i))); }
  std::shared_ptr<PyMethod> load_method(const std::string& name) { return PyMethod::load(ps_, name); }
  PyMethodMeta method_meta(const std::string& name) const {
    return PyMethodMeta{check(ps_->program->method_meta(name)), ps_};
  }
  bool has_etdump() const { return ps_->enable_etdump; }
  const std::shared_ptr<ProgramState>& state() const { return ps_; }

 private:
  std::shared_ptr<ProgramState> ps_;
};

class PyModule {
 public:
  explicit PyModule(std::shared_ptr<ProgramState> ps) : ps_(std::move(ps)) {}

  PyMethod& method(const std::string& name) {
    std::lock_guard<std::mutex> g(mu_);  // held briefly, never across a GIL acquire
    auto it = methods_.find(name);
    if (it != methods_.end()) return *it->second;
    if (!ps_->program->has_method(name)) raise(ps_->program->unknown_method(name));
    auto m = PyMethod::load(ps_, name);
    return *methods_.emplace(name, std::move(m)).first->second;
  }

  py::list run_method(const std::string& name, py::handle inputs, bool clone) {
    return method(name).call(inputs, clone);
  }
  py::list plan_execute(const std::string& name, bool clone) { return method(name).run_without_inputs(clone); }
  PyMethodMeta method_meta(const std::string& name) const {
    return PyMethodMeta{check(ps_->program->method_meta(name)), ps_};
  }
  std::vector<std::string> method_names() const { return ps_->program->method_names(); }
  bool has_etdump() const { return ps_->enable_etdump; }
  const std::shared_ptr<ProgramState>& state() const { return ps_; }

 private:
  std::shared_ptr<ProgramState> ps_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<PyMethod>> methods_;
};

class PyBundledModule {
 public:
  PyBundledModule(std::shared_ptr<const BundledProgram> bp, std::shared_ptr<ProgramState> ps)
      : bundle_(std::move(bp)), module_(std::move(ps)) {}

  py::list verify(const std::string& method_name, size_t index, double rtol, double atol) {
    PyMethod& m = module_.method(method_name);
    MethodLock lock(m.state().mu);
    check(bundle_->load_inputs(*m.state().method, index));
    m.execute_locked();
    py::list outputs = m.get_outputs_locked(true);
    if (auto s = bundle_->verify_outputs(*m.state().method, index, rtol, atol); !s)
      throw std::runtime_error(cat("Result verification failed with status ", static_cast<int>(s.error().code), ": ",
                                   s.error().what));
    return outputs;
  }
  const std::shared_ptr<const BundledProgram>& bundle() const { return bundle_; }
  PyModule& module() { return module_; }

 private:
  std::shared_ptr<const BundledProgram> bundle_;
  PyModule module_;
};

// ---- the module ---------------------------------------------------------------------------------------------------

inline void init_output_mode() {
  const char* env = std::getenv("EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT");
  const std::string choice = env ? env : "";
  auto& cfg = output_config();
  if (choice == "executorch") {
    cfg.mode = OutputMode::ExecuTorch;
    return;
  }
  if (!choice.empty() && choice != "torch")
    throw std::runtime_error("EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT must be 'executorch' or 'torch', got '" + choice + "'");
  try {
    py::module_ torch = py::module_::import("torch");
    cfg.torch_from_dlpack = py::object(torch.attr("from_dlpack")).release().ptr();
    cfg.mode = OutputMode::Torch;
  } catch (py::error_already_set& e) {
    if (choice == "torch")
      throw std::runtime_error("EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=torch but torch cannot be imported: " +
                               std::string(e.what()));
    cfg.mode = OutputMode::ExecuTorch;
  }
}

/// Sends runtime logs to Python's sys.stderr (not fd 2), so they show in notebooks too.
inline void python_log_sink(LogLevel, std::string_view message) {
  if (!Py_IsInitialized()) return stderr_sink(LogLevel::Error, message);
  py::gil_scoped_acquire gil;
  try {
    py::object err = py::module_::import("sys").attr("stderr");
    if (err.is_none()) return;
    err.attr("write")(std::string(message) + "\n");
  } catch (py::error_already_set&) {
    PyErr_Clear();
  }
}

inline void log_ignored_debug_buffer(size_t debug_buffer_size) {
  if (debug_buffer_size > 0)
    log(LogLevel::Info, cat("debug_buffer_size=", debug_buffer_size,
                            " is ignored: this runtime records profiling events, not intermediate outputs"));
}

inline void define_module(py::module_& m, std::span<const KernelEntry> kernels) {
  init_output_mode();
  set_log_sink(&python_log_sink);
  m.doc() = "ExecuTorch portable runtime bindings (header-only runtime, no ATen / libtorch).";
  m.attr("_output_mode") = output_config().mode == OutputMode::Torch ? "torch" : "executorch";

  py::enum_<Verification>(m, "Verification")
      .value("Minimal", Verification::Minimal)
      .value("InternalConsistency", Verification::InternalConsistency);

  py::class_<ExecuTorchResult>(m, "ExecuTorchResult", py::buffer_protocol())
      .def_buffer([](ExecuTorchResult& r) -> py::buffer_info {
        if (!r.device().is_cpu())
          throw py::buffer_error("a CUDA result has no buffer protocol; use DLPack or to_host()");
        return r.buffer(false);
      })
      .def_property_readonly("shape", [](const ExecuTorchResult& r) { return py::tuple(py::cast(r.sizes())); })
      .def_property_readonly("strides", [](const ExecuTorchResult& r) {
        std::vector<int64_t> b;
        for (int64_t s : r.strides_elems()) b.push_back(s * static_cast<int64_t>(element_size(r.dtype())));
        return py::tuple(py::cast(b));
      })
      .def_property_readonly("dtype_name", [](const ExecuTorchResult& r) { return std::string(numpy_name(r.dtype())); })
      .def_property_readonly("dtype", [](const ExecuTorchResult& r) { return static_cast<int>(r.dtype()); })
      .def_property_readonly("device", [](const ExecuTorchResult& r) { return r.device().str(); })
      .def_property_readonly("readonly", &ExecuTorchResult::read_only)
      .def_property_readonly("nbytes", &ExecuTorchResult::nbytes)
      .def("__dlpack_device__", [](const ExecuTorchResult& r) {
        return py::make_tuple(r.device().is_cpu() ? dl::kCPU : dl::kCUDA, r.device().is_cpu() ? 0 : r.device().index);
      })
      .def(
          "__dlpack__",
          [](const ExecuTorchResult& r, py::object stream, py::object max_version, py::object dl_device,
             py::object copy) -> py::capsule {
            (void)stream;
            bool versioned = false;
            if (!max_version.is_none()) versioned = max_version.cast<py::tuple>()[0].cast<int>() >= 1;
            if (!dl_device.is_none()) {
              auto d = dl_device.cast<py::tuple>();
              const int type = d[0].cast<int>();
              if ((type == dl::kCPU) != r.device().is_cpu())
                throw py::buffer_error("__dlpack__: cross-device export is not supported; use to_host()");
            }
            const bool want_copy = !copy.is_none() && copy.cast<bool>();
            const bool no_copy = !copy.is_none() && !copy.cast<bool>();
            if (r.read_only()) {
              if (no_copy && !versioned)
                throw py::buffer_error("a read-only result can be shared without a copy only through DLPack 1.0");
              if (no_copy) return to_dlpack_capsule(r, true, dl::kFlagReadOnly);
              return to_dlpack_capsule(r.copy(), versioned, dl::kFlagIsCopied);
            }
            if (want_copy) return to_dlpack_capsule(r.copy(), versioned, dl::kFlagIsCopied);
            return to_dlpack_capsule(r, versioned, 0);
          },
          py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("to_host", [](const ExecuTorchResult& r) { return r.device().is_cpu() ? r : r.copy(); })
      .def_static(
          "from_host",
          [](py::object, int) -> ExecuTorchResult {
            throw std::runtime_error(
                "ExecuTorchResult.from_host copies to a CUDA device and needs CUDA-enabled bindings; this build is "
                "CPU only");
          },
          py::arg("buffer"), py::arg("device_index") = 0)
      .def("numpy", [](py::object self) { return py::module_::import("numpy").attr("asarray")(self); })
      .def("__repr__", [](const ExecuTorchResult& r) {
        return cat("ExecuTorchResult(shape=", shape_str(r.sizes()), ", dtype=", numpy_name(r.dtype()), ", device='",
                   r.device().str(), "'", r.read_only() ? ", readonly=True" : "", ")");
      });

  py::class_<PyTensorInfo>(m, "TensorInfo")
      .def("sizes", &PyTensorInfo::sizes)
      .def("dtype", &PyTensorInfo::dtype)
      .def("is_memory_planned", &PyTensorInfo::is_memory_planned)
      .def("nbytes", &PyTensorInfo::nbytes)
      .def("dim_order", &PyTensorInfo::dim_order)
      .def("device", &PyTensorInfo::device)
      .def("name", &PyTensorInfo::name)
      .def("__repr__", &PyTensorInfo::repr);

  py::class_<PyMethodMeta>(m, "MethodMeta")
      .def("name", [](const PyMethodMeta& mm) { return mm.meta.name; })
      .def("num_inputs", [](const PyMethodMeta& mm) { return mm.meta.inputs.size(); })
      .def("num_outputs", [](const PyMethodMeta& mm) { return mm.meta.outputs.size(); })
      .def("num_attributes", [](const PyMethodMeta& mm) { return mm.meta.attributes.size(); })
      .def("input_tensor_meta", &PyMethodMeta::input_tensor_meta, py::arg("index"))
      .def("output_tensor_meta", &PyMethodMeta::output_tensor_meta, py::arg("index"))
      .def("attribute_tensor_meta", &PyMethodMeta::attribute_tensor_meta, py::arg("index"))
      .def("input_tag", [](const PyMethodMeta& mm, size_t i) {
        if (i >= mm.meta.inputs.size()) throw py::index_error(cat("Cannot get input tag at ", i));
        return std::string(tag_name(mm.meta.inputs[i].tag));
      })
      .def("output_tag", [](const PyMethodMeta& mm, size_t i) {
        if (i >= mm.meta.outputs.size()) throw py::index_error(cat("Cannot get output tag at ", i));
        return std::string(tag_name(mm.meta.outputs[i].tag));
      })
      .def("num_instructions", [](const PyMethodMeta& mm) { return mm.meta.num_instructions; })
      .def("memory_planned_buffer_sizes", [](const PyMethodMeta& mm) { return mm.meta.planned_buffer_sizes; })
      .def("backends", [](const PyMethodMeta& mm) { return mm.meta.backends; })
      .def("__repr__", &PyMethodMeta::repr);

  py::class_<PyMethod, std::shared_ptr<PyMethod>>(m, "ExecuTorchMethod")
      .def("set_inputs", &PyMethod::set_inputs, py::arg("inputs"))
      .def("execute", &PyMethod::execute)
      .def("get_outputs", &PyMethod::get_outputs, py::arg("clone_outputs") = true)
      .def("call", &PyMethod::call, py::arg("inputs") = py::list(), py::arg("clone_outputs") = true)
      .def("__call__", &PyMethod::call, py::arg("inputs") = py::list(), py::arg("clone_outputs") = true)
      .def("get_attribute", &PyMethod::get_attribute, py::arg("name"))
      .def("method_meta", &PyMethod::method_meta);

  py::class_<PyProgram, std::shared_ptr<PyProgram>>(m, "ExecuTorchProgram")
      .def("num_methods", &PyProgram::num_methods)
      .def("get_method_name", &PyProgram::get_method_name, py::arg("method_index"))
      .def("load_method", &PyProgram::load_method, py::arg("method_name"))
      .def("method_meta", &PyProgram::method_meta, py::arg("method_name"))
      .def("has_etdump", &PyProgram::has_etdump)
      .def("write_etdump_result_to_file",
           [](PyProgram& p, const std::string& path, py::object dbg) { write_etdump(*p.state(), path, dbg); },
           py::arg("path"), py::arg("debug_buffer_path") = py::none());

  py::class_<PyModule, std::shared_ptr<PyModule>>(m, "ExecuTorchModule")
      .def("run_method", &PyModule::run_method, py::arg("method_name"), py::arg("inputs") = py::list(),
           py::arg("clone_outputs") = true)
      .def("forward", [](PyModule& mod, py::handle in, bool c) { return mod.run_method("forward", in, c); },
           py::arg("inputs") = py::list(), py::arg("clone_outputs") = true)
      .def("__call__", [](PyModule& mod, py::handle in, bool c) { return mod.run_method("forward", in, c); },
           py::arg("inputs") = py::list(), py::arg("clone_outputs") = true)
      .def("plan_execute", &PyModule::plan_execute, py::arg("method_name"), py::arg("clone_outputs") = true)
      .def("method_meta", &PyModule::method_meta, py::arg("method_name"))
      .def("method_names", &PyModule::method_names)
      .def("has_etdump", &PyModule::has_etdump)
      .def("write_etdump_result_to_file",
           [](PyModule& p, const std::string& path, py::object dbg) { write_etdump(*p.state(), path, dbg); },
           py::arg("path"), py::arg("debug_buffer_path") = py::none());

  py::class_<PyBundledModule, std::shared_ptr<PyBundledModule>>(m, "BundledModule")
      .def("verify_result_with_bundled_expected_output", &PyBundledModule::verify, py::arg("method_name"),
           py::arg("testset_idx"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8);

  const auto verif_default = Verification::InternalConsistency;
  m.def(
      "_load_for_executorch",
      [kernels](const std::string& path, py::object data_path, bool etdump, size_t dbg, Verification v) {
        log_ignored_debug_buffer(dbg);
        auto data = data_path.is_none() ? nullptr : source_from_path(data_path.cast<std::string>());
        return std::make_shared<PyModule>(make_program_state(source_from_path(path), data, v, etdump, kernels));
      },
      py::arg("path"), py::arg("data_path") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0, py::arg("program_verification") = verif_default);
  m.def(
      "_load_for_executorch_from_buffer",
      [kernels](py::buffer buffer, py::object data_map_buffer, bool etdump, size_t dbg, Verification v) {
        log_ignored_debug_buffer(dbg);
        auto data = data_map_buffer.is_none() ? nullptr : source_from_bytes(data_map_buffer);
        return std::make_shared<PyModule>(make_program_state(source_from_bytes(buffer), data, v, etdump, kernels));
      },
      py::arg("buffer"), py::arg("data_map_buffer") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0, py::arg("program_verification") = verif_default);
  m.def(
      "_load_program",
      [kernels](const std::string& path, bool etdump, size_t dbg, Verification v, py::object data_path) {
        log_ignored_debug_buffer(dbg);
        auto data = data_path.is_none() ? nullptr : source_from_path(data_path.cast<std::string>());
        return std::make_shared<PyProgram>(make_program_state(source_from_path(path), data, v, etdump, kernels));
      },
      py::arg("path"), py::arg("enable_etdump") = false, py::arg("debug_buffer_size") = 0,
      py::arg("program_verification") = Verification::Minimal, py::arg("data_path") = py::none());
  m.def(
      "_load_program_from_buffer",
      [kernels](py::buffer buffer, bool etdump, size_t dbg, Verification v, py::object data_path) {
        log_ignored_debug_buffer(dbg);
        auto data = data_path.is_none() ? nullptr : source_from_path(data_path.cast<std::string>());
        return std::make_shared<PyProgram>(make_program_state(source_from_bytes(buffer), data, v, etdump, kernels));
      },
      py::arg("buffer"), py::arg("enable_etdump") = false, py::arg("debug_buffer_size") = 0,
      py::arg("program_verification") = Verification::Minimal, py::arg("data_path") = py::none());
  m.def(
      "_load_bundled_program_from_buffer",
      [kernels](py::buffer buffer, size_t) {
        auto src = source_from_bytes(buffer);
        auto bp = check(BundledProgram::load(src));
        auto ps = make_program_state(bp->program_source(), nullptr, Verification::InternalConsistency, false, kernels);
        return std::make_shared<PyBundledModule>(std::move(bp), std::move(ps));
      },
      py::arg("buffer"), py::arg("non_const_pool_size") = 16 * 1024);
  m.def(
      "_load_for_executorch_from_bundled_program",
      [kernels](PyBundledModule& b, py::object data_map_buffer, bool etdump, size_t) {
        auto data = data_map_buffer.is_none() ? nullptr : source_from_bytes(data_map_buffer);
        return std::make_shared<PyModule>(make_program_state(b.bundle()->program_source(), data,
                                                             Verification::InternalConsistency, etdump, kernels));
      },
      py::arg("ptr"), py::arg("data_map_buffer") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0);
  m.def("_get_operator_names", [kernels]() {
    std::vector<std::string> names;
    for (const auto& k : kernels) names.emplace_back(k.name);
    return names;
  });
  m.def("_get_registered_backend_names", []() { return std::vector<std::string>{}; });
  m.def("_is_available", [](const std::string&) { return false; }, py::arg("backend_name"));
  m.def("_create_profile_block", [](const std::string&) {}, py::arg("name"));
  m.def("_dump_profile_results", []() { return py::bytes(""); });
  m.def("_reset_profile_results", []() {});
  m.def("_threadpool_get_thread_count", []() { return 1; });
  m.def("_unsafe_reset_threadpool", [](int) {}, py::arg("num_threads"));
}

}  // namespace etrt::python
