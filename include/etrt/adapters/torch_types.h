// What the torch-input path needs to know about torch, looked up once: the torch.Tensor type and the torch.dtype
// objects by identity. A torch input then costs a type check, pointer compares and five attribute reads, with no
// string conversion (torch is never linked: everything goes through its public Python attributes).
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <optional>
#include <utility>

#include "etrt/adapters/dtype_codes.h"
#include "etrt/core/scalar_type.h"

namespace etrt::python {

struct TorchTypes {
  PyObject* tensor_type = nullptr;                               // torch.Tensor
  std::array<std::pair<PyObject*, ScalarType>, kNumScalarTypes> dtypes{};  // torch.<dtype> -> ScalarType
  size_t num_dtypes = 0;
  // Interned attribute names (compared by pointer in the attribute lookup's fast path).
  PyObject* is_cpu = nullptr;
  PyObject* dtype = nullptr;
  PyObject* shape = nullptr;
  PyObject* stride = nullptr;
  PyObject* is_contiguous = nullptr;
  PyObject* data_ptr = nullptr;

  std::optional<ScalarType> scalar_type(PyObject* torch_dtype) const {
    for (size_t i = 0; i < num_dtypes; ++i)
      if (dtypes[i].first == torch_dtype) return dtypes[i].second;
    return std::nullopt;
  }
};

/// The cached torch identities, or null while torch is not imported (the bindings never import it for inputs).
/// Called with the GIL held; the references live as long as the process, as torch's module does.
inline const TorchTypes* torch_types() {
  static TorchTypes cache;
  static bool ready = false;
  if (ready) return &cache;
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
  if (!torch || torch == Py_None || !PyModule_Check(torch)) return nullptr;
  PyObject* tensor = PyObject_GetAttrString(torch, "Tensor");
  if (!tensor || !PyType_Check(tensor)) {  // a torch without Tensor: treat it as absent
    Py_XDECREF(tensor);
    PyErr_Clear();
    return nullptr;
  }
  cache.tensor_type = tensor;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto st = static_cast<ScalarType>(i);
    const std::string name(numpy_name(st));  // torch's attribute names for its dtypes are NumPy's
    PyObject* d = PyObject_GetAttrString(torch, name.c_str());
    if (!d) {
      PyErr_Clear();
      continue;
    }
    // Only real torch.dtype objects whose name maps back to this type (torch.float32 -> Float, ...).
    PyObject* text = PyObject_Str(d);
    const char* utf8 = text ? PyUnicode_AsUTF8(text) : nullptr;
    const bool same = utf8 && from_torch_dtype_name(utf8) == st;
    Py_XDECREF(text);
    PyErr_Clear();
    if (same && cache.num_dtypes < cache.dtypes.size())
      cache.dtypes[cache.num_dtypes++] = {d, st};
    else
      Py_DECREF(d);
  }
  cache.is_cpu = PyUnicode_InternFromString("is_cpu");
  cache.dtype = PyUnicode_InternFromString("dtype");
  cache.shape = PyUnicode_InternFromString("shape");
  cache.stride = PyUnicode_InternFromString("stride");
  cache.is_contiguous = PyUnicode_InternFromString("is_contiguous");
  cache.data_ptr = PyUnicode_InternFromString("data_ptr");
  ready = true;
  return &cache;
}

}  // namespace etrt::python
