// TensorInfo and MethodMeta as Python sees them, with upstream's reprs.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "etrt/adapters/conversions.h"
#include "etrt/adapters/state.h"

namespace etrt::python {

namespace py = pybind11;

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
  py::str name() const { return to_py_str(meta.fqn); }
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
  const std::string& name() const { return meta.name; }
  size_t num_inputs() const { return meta.inputs.size(); }
  size_t num_outputs() const { return meta.outputs.size(); }
  size_t num_attributes() const { return meta.attributes.size(); }
  size_t num_instructions() const { return meta.num_instructions; }
  const std::vector<int64_t>& memory_planned_buffer_sizes() const { return meta.planned_buffer_sizes; }
  const std::vector<std::string>& backends() const { return meta.backends; }
  std::string input_tag(size_t i) const {
    if (i >= meta.inputs.size()) throw py::index_error(cat("Cannot get input tag at ", i));
    return std::string(tag_name(meta.inputs[i].tag));
  }
  std::string output_tag(size_t i) const {
    if (i >= meta.outputs.size()) throw py::index_error(cat("Cannot get output tag at ", i));
    return std::string(tag_name(meta.outputs[i].tag));
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
        s += '\'';
        s += v[i].tensor ? PyTensorInfo{*v[i].tensor, nullptr}.repr() : std::string(tag_name(v[i].tag));
        s += '\'';
      }
      return s + "]";
    };
    return cat("MethodMeta(name='", meta.name, "', num_inputs=", meta.inputs.size(), ", input_tensor_meta=",
               list(meta.inputs), ", num_outputs=", meta.outputs.size(), ", output_tensor_meta=", list(meta.outputs),
               ")");
  }
};

}  // namespace etrt::python
