// Python-boundary plumbing shared by the binding classes: the output mode fixed at load, Failure -> exception,
// the per-method lock and the conversion of runtime values to Python objects.
//
// Locking (Note [lock order]): a call takes the method's mutex without the GIL when it has to wait for it, and
// releases the GIL again only around execute(). A thread that waits for the mutex never holds the GIL, so two
// threads can't deadlock on the pair.
#pragma once

#include <pybind11/gil_safe_call_once.h>
#include <pybind11/pybind11.h>

#include <cerrno>
#include <span>
#include <mutex>

#include "etrt/adapters/result.h"
#include "etrt/core/evalue.h"
#include "etrt/core/log.h"
#include "etrt/core/utf8.h"

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

/// Raises RuntimeError; the message is made valid UTF-8 since it may quote bytes of a corrupt file.
[[noreturn]] inline void raise(const Failure& f) { throw std::runtime_error(sanitize_utf8(f.describe())); }

/// Raises RuntimeError after logging the message (a failed load, a missing operator or backend): upstream's runtime
/// logs these, so scripts that watch stderr see them; ETRT_LOG_LEVEL=off or _set_log_level("off") silences them.
[[noreturn]] inline void raise_logged(const Failure& f) {
  log(LogLevel::Error, sanitize_utf8(f.describe()));
  raise(f);
}

/// The class raised for a file that does not exist: a RuntimeError as upstream raises, and a FileNotFoundError so
/// that `except FileNotFoundError` / `except OSError` catch it. Created once, with the module.
inline py::handle missing_file_error_type() {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::object> storage;
  return storage
      .call_once_and_store_result([] {
        py::tuple bases = py::make_tuple(py::handle(PyExc_FileNotFoundError), py::handle(PyExc_RuntimeError));
        PyObject* t = PyErr_NewException("executorch_portable_lib._C.ExecuTorchFileNotFoundError", bases.ptr(), nullptr);
        if (!t) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(t);
      })
      .get_stored();
}

/// Raises ExecuTorchFileNotFoundError(ENOENT, message) with `filename` set, after logging it.
[[noreturn]] inline void raise_missing_file(const std::string& path, const Failure& f) {
  const std::string message = sanitize_utf8(f.describe());
  log(LogLevel::Error, message);
  py::object err = missing_file_error_type()(ENOENT, message);
  err.attr("filename") = path;
  PyErr_SetObject(missing_file_error_type().ptr(), err.ptr());
  throw py::error_already_set();
}

/// A Python str from bytes that should be UTF-8 (invalid bytes become U+FFFD instead of raising).
inline py::str to_py_str(std::string_view s) {
  return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}
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

/// A tuple of Python ints (shapes, strides).
inline py::tuple int_tuple(std::span<const int64_t> v) {
  py::tuple t(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    PyObject* item = PyLong_FromLongLong(v[i]);
    if (!item) throw py::error_already_set();
    PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), item);
  }
  return t;
}

/// Whether `obj` is an ExecuTorchResult: a type check against the registered class, looked up once (the class is
/// registered when the module is imported, before any call can reach here).
inline bool is_result(py::handle obj) {
  static PyTypeObject* const type = reinterpret_cast<PyTypeObject*>(py::type::of<ExecuTorchResult>().ptr());
  return PyObject_TypeCheck(obj.ptr(), type);
}

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

/// `tensor(const Tensor&) -> py::object` converts the tensors.
template <class TensorFn>
py::object value_to_python(const EValue& v, TensorFn&& tensor) {
  switch (v.tag()) {
    case Tag::None: return py::none();
    case Tag::Int: return py::int_(v.int_unchecked());
    case Tag::Double: return py::float_(v.double_unchecked());
    case Tag::Bool: return py::bool_(v.bool_unchecked());
    case Tag::String: return to_py_str(v.string_unchecked());
    case Tag::Tensor: return tensor(v.tensor_unchecked());
    // Each list is read into a named Result first: ranging over `*temporary` would keep only a reference into the
    // destroyed temporary.
    case Tag::ListInt: {
      auto items = v.to_int_list("output");
      if (!items) raise(items.error());
      py::list l;
      for (int64_t x : *items) l.append(x);
      return l;
    }
    case Tag::ListDouble: {
      auto items = v.to_double_list("output");
      if (!items) raise(items.error());
      py::list l;
      for (double x : *items) l.append(x);
      return l;
    }
    case Tag::ListBool: {
      auto items = v.to_bool_list("output");
      if (!items) raise(items.error());
      py::list l;
      for (bool x : **items) l.append(x);
      return l;
    }
    case Tag::ListTensor:
    case Tag::ListOptionalTensor: {
      auto items = v.to_optional_tensor_list("output");
      if (!items) raise(items.error());
      py::list l;
      for (Tensor* t : *items) l.append(t ? tensor(*t) : py::none());
      return l;
    }
    default: throw std::runtime_error("unsupported output type " + std::string(tag_name(v.tag())));
  }
}

}  // namespace etrt::python
