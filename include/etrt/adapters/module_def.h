// The Python module `portable_lib` (compiled as executorch.extension.pybindings._C): classes and loaders with the
// upstream names, signatures and defaults (those of upstream's executorch.extension.pybindings), on top of the header-only runtime.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>

#include "etrt/adapters/data_loader.h"
#include "etrt/adapters/py_program.h"
#include "etrt/core/log.h"
#include "etrt/kernels/util/parallel.h"

// The CUDA-enabled build (meson -Dcuda=enabled) defines ETRT_WITH_CUDA=1 for this translation unit only.
#if defined(ETRT_WITH_CUDA) && ETRT_WITH_CUDA
#define ETRT_ADAPTERS_CUDA 1
#include "etrt/backends/cuda/cuda_device.h"  // cuda_runtime.h: the CUDA build's device layer
#if __has_include("etrt/backends/cuda/cuda_delegate_entry.h")
#include "etrt/backends/cuda/cuda_delegate_entry.h"  // etrt::cuda::cuda_delegate, defined in the nvcc TU
#define ETRT_ADAPTERS_CUDA_DELEGATE 1
#endif
#else
#define ETRT_ADAPTERS_CUDA 0
#endif
#ifndef ETRT_ADAPTERS_CUDA_DELEGATE
#define ETRT_ADAPTERS_CUDA_DELEGATE 0
#endif

#include "etrt/backends/xnnpack/xnnpack_backend.h"  // the XnnpackBackend delegate, registered in every build

// The CUDA delegate with host kernels, for the _testing_emulate_cuda hook.
#if __has_include("etrt/backends/cuda/cuda_backend.h") && __has_include("etrt/backends/cuda/host_ops.h")
#include "etrt/backends/cuda/cuda_backend.h"
#include "etrt/backends/cuda/host_ops.h"
#define ETRT_ADAPTERS_HOST_CUDA_DELEGATE 1
#else
#define ETRT_ADAPTERS_HOST_CUDA_DELEGATE 0
#endif

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
    // Results are always capsules: torch's capsule consumer (what torch.from_dlpack calls for a capsule, after a
    // protocol probe that costs more than the call) when this torch has it, else the public function.
    py::object consume = torch.attr("from_dlpack");
    if (py::object c = py::getattr(torch.attr("_C"), "_from_dlpack", py::none()); !c.is_none() && PyCallable_Check(c.ptr()))
      consume = c;
    cfg.torch_from_dlpack = consume.release().ptr();
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

// ---- devices ------------------------------------------------------------------------------------------------

/// Installs the CUDA-enabled build's device layer and delegate (a no-op in a build without CUDA).
inline void init_device_runtime() {
  // Every build: programs lowered with upstream's XnnpackPartitioner run their subgraphs on the portable kernels.
  device_runtime().register_backend(::etrt::xnnpack::kXnnpackBackendId, &::etrt::xnnpack::xnnpack_delegate());
#if ETRT_ADAPTERS_CUDA
  DeviceRuntime& rt = device_runtime();
  const auto& dev = ::etrt::cuda::cuda_device();
  rt.install_cuda(dev, [&dev] { return dev.unavailable_reason(); });
#if ETRT_ADAPTERS_CUDA_DELEGATE
  rt.register_backend(kCudaBackendId, &::etrt::cuda::cuda_delegate(dev));
#endif  // else: the delegate entry header (cuda_delegate_entry.h) is not there yet; programs using it fail to load
#endif
}

/// `__dlpack__` of a result (Note [device waits]: one wait for a CUDA result unless the consumer passes stream=-1).
inline py::capsule export_dlpack(const ExecuTorchResult& r, py::object stream, py::object max_version,
                                 py::object dl_device, py::object copy) {
  bool versioned = false;
  if (!max_version.is_none()) versioned = max_version.cast<py::tuple>()[0].cast<int>() >= 1;
  std::optional<bool> want_copy;
  if (!copy.is_none()) want_copy = copy.cast<bool>();
  bool skip_wait = false;
  if (!stream.is_none()) {
    if (!PyLong_Check(stream.ptr())) throw py::type_error("__dlpack__: stream must be an integer or None");
    skip_wait = stream.cast<long long>() == -1;
  }
  Device target = r.device();
  if (!dl_device.is_none()) {
    auto d = dl_device.cast<py::tuple>();
    const int type = d[0].cast<int>();
    if (type == dl::kCPU)
      target = Device{};
    else if (type == dl::kCUDA)
      target = Device{DeviceType::CUDA, static_cast<int8_t>(d[1].cast<int>())};
    else
      throw py::buffer_error(cat("__dlpack__: cannot export to DLPack device type ", type, "; this result is on ",
                                 r.device().str()));
  }
  if (r.device().is_cpu() && !target.is_cpu())
    throw py::buffer_error(cat("__dlpack__: this result is on the CPU and cannot be exported to ", target.str(),
                               "; use ExecuTorchResult.from_host(x, device_index=", static_cast<int>(target.index),
                               ")"));
  if (!r.device().is_cpu() && target.is_cpu()) {
    if (want_copy == false)
      throw py::buffer_error(cat("__dlpack__: this result is on ", r.device().str(),
                                 "; exporting it to the CPU needs a copy, and copy=False was passed"));
    if (!skip_wait) device_runtime().wait(r.device().index);
    return to_dlpack_capsule(r.to_host(/*wait=*/false), versioned, dl::kFlagIsCopied);
  }
  if (target != r.device())
    throw py::buffer_error(cat("__dlpack__: this result is on ", r.device().str(), ", not on ", target.str(),
                               "; copy it with the consumer's library"));
  ExecuTorchResult src = r;
  uint64_t flags = 0;
  if (r.read_only() && want_copy == false) {  // shared without a copy only when the consumer can see the flag
    if (!versioned) throw py::buffer_error("a read-only result can be shared without a copy only through DLPack 1.0");
    versioned = true;
    flags = dl::kFlagReadOnly;
  } else if (r.read_only() || want_copy == true) {
    src = r.copy(/*wait=*/false);
    flags = dl::kFlagIsCopied;
  }
  if (!r.device().is_cpu() && !skip_wait) device_runtime().wait(r.device().index);
  return to_dlpack_capsule(src, versioned, flags);
}

inline py::dict emulated_counters() {
  const HostEmulatedDevice* dev = device_runtime().emulated();
  if (!dev) throw std::runtime_error("_testing_emulated_counters: _testing_emulate_cuda was not called");
  py::dict d;
  d["allocations"] = dev->allocations.load();
  d["live_allocations"] = dev->live_allocations.load();
  d["waits"] = dev->waits.load();
  d["host_to_device"] = dev->copies[static_cast<int>(CopyKind::HostToDevice)].load();
  d["device_to_host"] = dev->copies[static_cast<int>(CopyKind::DeviceToHost)].load();
  d["device_to_device"] = dev->copies[static_cast<int>(CopyKind::DeviceToDevice)].load();
  d["device_count"] = dev->device_count();
  d["delegate"] = ETRT_ADAPTERS_HOST_CUDA_DELEGATE == 1;
  return d;
}

inline void emulate_cuda(int device_count) {
  DeviceRuntime& rt = device_runtime();
  if (rt.locked())
    throw std::runtime_error("_testing_emulate_cuda must be called before any program is loaded (or device memory "
                             "is allocated) in this process");
  if (output_config().mode == OutputMode::Torch)
    throw std::runtime_error("_testing_emulate_cuda needs EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=executorch: torch would "
                             "read the host memory of emulated CUDA results as device memory");
  if (device_count < 0 || device_count > 64)
    throw std::runtime_error(cat("_testing_emulate_cuda: device_count must be in [0, 64], got ", device_count));
  [[maybe_unused]] const HostEmulatedDevice& dev = rt.emulate(device_count);
#if ETRT_ADAPTERS_HOST_CUDA_DELEGATE
  // Leaked like the device: methods loaded afterwards keep pointers to it for the life of the process.
  rt.register_backend(kCudaBackendId, new ::etrt::cuda::CudaDelegate<::etrt::cuda::HostOps>(dev));
#endif  // HOOK: without cuda_backend.h / host_ops.h only the device layer is emulated (no delegate registered)
}

inline constexpr const char* kEmulateCudaDoc =
    "_testing_emulate_cuda(device_count=1)\n\n"
    "Test hook: replaces the CUDA device layer by host memory labelled 'cuda:N' (counting allocations, copies and "
    "waits) and registers the CUDA delegate with host kernels under 'EtrtCudaBackend', for programs loaded "
    "afterwards. Call it before any program is loaded in the process (it raises otherwise), in "
    "EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=executorch mode. Results are host memory labelled CUDA: never hand them to "
    "a real CUDA consumer (torch, CuPy). Use it in a separate process: it cannot be undone.";

inline void define_module(py::module_& m, std::span<const KernelEntry> kernels) {
  init_output_mode();
  init_device_runtime();
  set_log_sink(&python_log_sink);
  m.doc() = "ExecuTorch portable runtime bindings (header-only runtime, no ATen / libtorch).";
  m.attr("_output_mode") = output_config().mode == OutputMode::Torch ? "torch" : "executorch";
  m.attr("ExecuTorchFileNotFoundError") = missing_file_error_type();
  m.def(
      "_set_log_level",
      [](const std::string& level) {
        static constexpr std::pair<std::string_view, LogLevel> kLevels[] = {
            {"debug", LogLevel::Debug}, {"info", LogLevel::Info}, {"error", LogLevel::Error}, {"off", LogLevel::Off}};
        for (const auto& [name, value] : kLevels)
          if (level == name) return set_log_level(value);
        throw py::value_error(cat("log level must be one of debug, info, error, off; got '", level, "'"));
      },
      py::arg("level"),
      "Sets the least severe runtime log level written to sys.stderr: 'debug', 'info' (the default), 'error' or "
      "'off'. The environment variable ETRT_LOG_LEVEL sets the initial level.");

  define_data_loader(m);  // Note [one registration] (data_loader.h)

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
      .def("__dlpack__", &export_dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("to_host", [](const ExecuTorchResult& r) { return r.to_host(); },
           "This result in host memory: itself on the CPU, else a device-to-host copy after one device wait.")
      .def_static("from_host", &result_from_host, py::arg("buffer"), py::arg("device_index") = 0,
                  "A copy of a CPU tensor (buffer, DLPack or torch) on CUDA device `device_index`, contiguous in its "
                  "own dim order. Needs CUDA-enabled bindings.")
      .def("_data_ptr", [](const ExecuTorchResult& r) { return reinterpret_cast<uintptr_t>(r.data()); })
      .def("numpy", [](py::object self) { return py::module_::import("numpy").attr("asarray")(self); })
      // NumPy reads a CPU result through the buffer protocol and reaches __array__ only when that fails: without it,
      // a CUDA result would silently become a 0-d object array.
      .def(
          "__array__",
          [](py::object self, py::object dtype, py::object copy) -> py::object {
            const auto& r = self.cast<const ExecuTorchResult&>();
            if (!r.device().is_cpu())
              throw py::buffer_error(cat("this ExecuTorchResult is on ", r.device().str(),
                                         "; NumPy reads host memory only: copy it first with to_host() or "
                                         "np.from_dlpack(result, device='cpu')"));
            py::object np = py::module_::import("numpy");
            py::object arr = np.attr("asarray")(py::memoryview(self), dtype);
            if (!copy.is_none() && copy.cast<bool>()) arr = arr.attr("copy")();
            return arr;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
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
      }, py::arg("index"))
      .def("output_tag", [](const PyMethodMeta& mm, size_t i) {
        if (i >= mm.meta.outputs.size()) throw py::index_error(cat("Cannot get output tag at ", i));
        return std::string(tag_name(mm.meta.outputs[i].tag));
      }, py::arg("index"))
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
           py::arg("testset_idx"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8)
      .def(
          "_test_case_counts",
          [](const PyBundledModule& b) {
            py::dict counts;
            for (const auto& suite : b.bundle()->suites()) counts[to_py_str(suite.method_name)] = suite.cases.size();
            return counts;
          },
          "{method name: number of test cases} of the bundle (an addition; upstream's BundledModule has none).");

  const auto verif_default = Verification::InternalConsistency;
  m.def(
      "_load_for_executorch",
      [kernels](py::object path, py::object data_path, bool etdump, size_t dbg, Verification v,
                std::optional<bool> mmap, uint64_t max_planned) {
        auto data = data_path.is_none() ? nullptr : source_from_path(path_from_python(data_path, "data_path"), mmap);
        return std::make_shared<PyModule>(
            make_program_state(source_from_path(path_from_python(path, "path"), mmap), data, v, etdump, dbg, kernels, max_planned));
      },
      py::arg("path"), py::arg("data_path") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0, py::arg("program_verification") = verif_default, py::kw_only(),
      py::arg("mmap") = py::none(), py::arg("max_planned_bytes") = 0);
  m.def(
      "_load_for_executorch_from_buffer",
      [kernels](py::buffer buffer, py::object data_map_buffer, bool etdump, size_t dbg, Verification v,
                uint64_t max_planned) {
        auto data = data_map_buffer.is_none() ? nullptr : source_from_bytes(data_map_buffer);
        auto src = source_from_bytes(buffer);
        return std::make_shared<PyModule>(make_program_state(src, data, v, etdump, dbg, kernels, max_planned));
      },
      py::arg("buffer"), py::arg("data_map_buffer") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0, py::arg("program_verification") = verif_default, py::kw_only(),
      py::arg("max_planned_bytes") = 0);
  m.def(
      "_load_for_executorch_from_data_loader",
      [kernels](std::shared_ptr<PyDataLoader> loader, py::object data_path, bool etdump, size_t dbg) {
        auto data = data_path.is_none() ? nullptr : source_from_path(path_from_python(data_path, "data_path"));
        auto src = check(loader->open());
        // Upstream has no program_verification here; the Module loaders' default applies.
        auto ps = make_program_state(std::move(src), std::move(data), verif_default, etdump, dbg, kernels);
        return std::make_shared<PyModule>(std::move(ps), std::move(loader));
      },
      py::arg("loader").none(false), py::arg("data_path") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0);
  m.def(
      "_load_program",
      [kernels](py::object path, bool etdump, size_t dbg, Verification v, py::object data_path,
                std::optional<bool> mmap, uint64_t max_planned) {
        auto data = data_path.is_none() ? nullptr : source_from_path(path_from_python(data_path, "data_path"), mmap);
        return std::make_shared<PyProgram>(
            make_program_state(source_from_path(path_from_python(path, "path"), mmap), data, v, etdump, dbg, kernels, max_planned));
      },
      py::arg("path"), py::arg("enable_etdump") = false, py::arg("debug_buffer_size") = 0,
      py::arg("program_verification") = Verification::Minimal, py::arg("data_path") = py::none(), py::kw_only(),
      py::arg("mmap") = py::none(), py::arg("max_planned_bytes") = 0);
  m.def(
      "_load_program_from_buffer",
      [kernels](py::buffer buffer, bool etdump, size_t dbg, Verification v, py::object data_path,
                uint64_t max_planned) {
        auto data = data_path.is_none() ? nullptr : source_from_path(path_from_python(data_path, "data_path"));
        auto src = source_from_bytes(buffer);
        return std::make_shared<PyProgram>(make_program_state(src, data, v, etdump, dbg, kernels, max_planned));
      },
      py::arg("buffer"), py::arg("enable_etdump") = false, py::arg("debug_buffer_size") = 0,
      py::arg("program_verification") = Verification::Minimal, py::arg("data_path") = py::none(), py::kw_only(),
      py::arg("max_planned_bytes") = 0);
  m.def(
      "_load_bundled_program_from_buffer",
      [kernels](py::buffer buffer, size_t) {
        auto src = source_from_bytes(buffer);
        auto bp = check(BundledProgram::load(src));
        auto ps = make_program_state(bp->program_source(), nullptr, Verification::InternalConsistency, false, 0,
                                     kernels);
        return std::make_shared<PyBundledModule>(std::move(bp), std::move(ps));
      },
      py::arg("buffer"), py::arg("non_const_pool_size") = 16 * 1024);
  m.def(
      "_load_for_executorch_from_bundled_program",
      [kernels](PyBundledModule& b, py::object data_map_buffer, bool etdump, size_t dbg) {
        // As upstream: the external data as bytes-like, or the path of a .ptd file (str or os.PathLike).
        std::shared_ptr<const DataSource> data;
        if (py::isinstance<py::str>(data_map_buffer) || py::hasattr(data_map_buffer, "__fspath__"))
          data = source_from_path(path_from_python(data_map_buffer, "data_map_buffer"));
        else if (!data_map_buffer.is_none())
          data = source_from_bytes(data_map_buffer);
        return std::make_shared<PyModule>(make_program_state(b.bundle()->program_source(), data,
                                                             Verification::InternalConsistency, etdump, dbg, kernels));
      },
      py::arg("ptr"), py::arg("data_map_buffer") = py::none(), py::arg("enable_etdump") = false,
      py::arg("debug_buffer_size") = 0);
  m.def("_get_operator_names", [kernels]() {
    std::vector<std::string> names;
    for (const auto& k : kernels) names.emplace_back(k.name);
    return names;
  });
  m.def("_get_registered_backend_names", []() {
    std::vector<std::string> names;
    for (const auto& e : device_runtime().backends()) names.emplace_back(e.name);
    return names;
  });
  m.def(
      "_is_available",
      [](const std::string& name) {
        for (const auto& e : device_runtime().backends())
          if (e.name == name) return e.backend->is_available();
        return false;
      },
      py::arg("backend_name"));
  m.def("_cuda_enabled", []() { return device_runtime().cuda_build(); },
        "True when these bindings were built with CUDA support.");
  m.def("_device_wait_count", []() { return device_runtime().wait_count(); },
        "How many device waits these bindings have made (emulated ones included); for tests.");
  m.def("_testing_emulate_cuda", &emulate_cuda, py::arg("device_count") = 1, kEmulateCudaDoc);
  m.def("_testing_emulated_counters", &emulated_counters,
        "The emulated device's counters: allocations, live_allocations, waits (its own, including the delegate's), "
        "host_to_device, device_to_host, device_to_device, device_count, delegate (host-kernel delegate registered).");
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
