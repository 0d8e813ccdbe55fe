// Python-boundary plumbing shared by the binding classes: the output mode fixed at load, Failure -> exception,
// the per-method lock and the conversion of runtime values to Python objects.
//
// Locking (Note [lock order]): a call takes the method's mutex without the GIL when it has to wait for it, and
// releases the GIL again only around execute(). A thread that waits for the mutex never holds the GIL, so two
// threads can't deadlock on the pair.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <mutex>

#include "etrt/adapters/result.h"
#include "etrt/core/evalue.h"

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

}  // namespace etrt::python
