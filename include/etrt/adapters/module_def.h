// The Python module `portable_lib` (compiled as executorch.extension.pybindings._C): classes and loaders with the
// upstream names, signatures and defaults (../shared/reference/upstream-api.md), on top of the header-only runtime.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>

#include "etrt/adapters/py_program.h"
#include "etrt/core/log.h"
#include "etrt/kernels/util/parallel.h"

namespace etrt::python {

namespace py = pybind11;

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
  m.def("_threadpool_get_thread_count", []() { return kernels::thread_count().load(); });
  m.def(
      "_unsafe_reset_threadpool",
      [](int n) {
        if (n < 1) throw std::runtime_error(cat("num_threads must be at least 1, got ", n));
        kernels::thread_count().store(n);
      },
      py::arg("num_threads"));
}

}  // namespace etrt::python
