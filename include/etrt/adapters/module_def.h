// The Python module `portable_lib` (compiled as executorch.extension.pybindings._C): classes and loaders with the
// upstream names, signatures and defaults (those of upstream's executorch.extension.pybindings), on top of the header-only runtime.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>

#include "etrt/adapters/data_loader.h"
#include "etrt/adapters/py_program.h"
#include "etrt/core/log.h"
#include "etrt/kernels/util/isa.h"
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

// The delegates registered in every build, compiled in their own translation unit (module_backends.h).
#include "etrt/backends/cuda/host_delegate_entry.h"  // the CUDA delegate on host kernels: _testing_emulate_cuda
#include "etrt/backends/xnnpack/xnnpack_entry.h"      // XnnpackBackend

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
  device_runtime().register_backend(::etrt::xnnpack::kXnnpackBackendId, &::etrt::xnnpack::xnnpack_delegate_entry());
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
  d["delegate"] = true;
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
  const HostEmulatedDevice& dev = rt.emulate(device_count);
  // Leaked like the device: methods loaded afterwards keep pointers to it for the life of the process.
  rt.register_backend(kCudaBackendId, ::etrt::cuda::new_host_cuda_delegate(dev));
}

// ---- what the surface calls (gen/surface.toml names these) -------------------------------------------------------

/// The kernel table the module was built with (one per process: the module is imported once).
inline std::span<const KernelEntry>& module_kernels() {
  static std::span<const KernelEntry> kernels;
  return kernels;
}

inline const char* output_mode_name() { return output_config().mode == OutputMode::Torch ? "torch" : "executorch"; }

inline void set_log_level_by_name(const std::string& level) {
  static constexpr std::pair<std::string_view, LogLevel> kLevels[] = {
      {"debug", LogLevel::Debug}, {"info", LogLevel::Info}, {"error", LogLevel::Error}, {"off", LogLevel::Off}};
  for (const auto& [name, value] : kLevels)
    if (level == name) return set_log_level(value);
  throw py::value_error(cat("log level must be one of debug, info, error, off; got '", level, "'"));
}

// ExecuTorchResult
inline py::buffer_info result_buffer(ExecuTorchResult& r) {
  if (!r.device().is_cpu()) throw py::buffer_error("a CUDA result has no buffer protocol; use DLPack or to_host()");
  return r.buffer(false);
}
inline py::tuple result_shape(const ExecuTorchResult& r) { return int_tuple(r.sizes()); }
inline py::tuple result_strides(const ExecuTorchResult& r) {
  Dims bytes(r.strides_elems());
  for (int64_t& s : bytes) s *= static_cast<int64_t>(element_size(r.dtype()));
  return int_tuple(bytes);
}
inline std::string result_dtype_name(const ExecuTorchResult& r) { return std::string(numpy_name(r.dtype())); }
inline int result_dtype(const ExecuTorchResult& r) { return static_cast<int>(r.dtype()); }
inline std::string result_device(const ExecuTorchResult& r) { return r.device().str(); }
inline py::tuple result_dlpack_device(const ExecuTorchResult& r) {
  return py::make_tuple(r.device().is_cpu() ? dl::kCPU : dl::kCUDA, r.device().is_cpu() ? 0 : r.device().index);
}
inline ExecuTorchResult result_to_host(const ExecuTorchResult& r) { return r.to_host(); }
inline uintptr_t result_data_ptr(const ExecuTorchResult& r) { return reinterpret_cast<uintptr_t>(r.data()); }
inline py::object result_numpy(py::object self) { return py::module_::import("numpy").attr("asarray")(self); }
// NumPy reads a CPU result through the buffer protocol and reaches __array__ only when that fails: without it, a
// CUDA result would silently become a 0-d object array.
inline py::object result_array(py::object self, py::object dtype, py::object copy) {
  const auto& r = self.cast<const ExecuTorchResult&>();
  if (!r.device().is_cpu())
    throw py::buffer_error(cat("this ExecuTorchResult is on ", r.device().str(),
                               "; NumPy reads host memory only: copy it first with to_host() or "
                               "np.from_dlpack(result, device='cpu')"));
  py::object arr = py::module_::import("numpy").attr("asarray")(py::memoryview(self), dtype);
  if (!copy.is_none() && copy.cast<bool>()) arr = arr.attr("copy")();
  return arr;
}
inline std::string result_repr(const ExecuTorchResult& r) {
  return cat("ExecuTorchResult(shape=", shape_str(r.sizes()), ", dtype=", numpy_name(r.dtype()), ", device='",
             r.device().str(), "'", r.read_only() ? ", readonly=True" : "", ")");
}

// ExecuTorchProgram / ExecuTorchModule
/// write_etdump_result_to_file of either (anything with the ProgramState its methods share).
template <class Loaded>
void write_etdump_of(Loaded& loaded, py::handle path, py::handle debug_buffer_path) {
  std::optional<std::string> dbg;
  if (!debug_buffer_path.is_none()) dbg = path_from_python(debug_buffer_path, "debug_buffer_path");
  write_etdump(*loaded.state(), path_from_python(path, "path"), std::move(dbg));
}
inline py::list module_forward(PyModule& m, py::handle inputs, bool clone) { return m.run_method("forward", inputs, clone); }

// loaders
inline std::shared_ptr<const DataSource> data_from_path(py::handle data_path, std::optional<bool> mmap = std::nullopt) {
  return data_path.is_none() ? nullptr : source_from_path(path_from_python(data_path, "data_path"), mmap);
}

/// The loaded program behind _load_for_executorch and _load_program (the data file is opened first, as before).
inline std::shared_ptr<ProgramState> state_from_file(py::handle path, py::handle data_path, bool etdump, size_t dbg,
                                                     Verification v, std::optional<bool> mmap, uint64_t max_planned) {
  auto data = data_from_path(data_path, mmap);
  auto src = source_from_path(path_from_python(path, "path"), mmap);
  return make_program_state(src, data, v, etdump, dbg, module_kernels(), max_planned);
}

inline std::shared_ptr<PyModule> load_for_executorch(py::handle path, py::handle data_path, bool etdump, size_t dbg,
                                                     Verification v, std::optional<bool> mmap, uint64_t max_planned) {
  return std::make_shared<PyModule>(state_from_file(path, data_path, etdump, dbg, v, mmap, max_planned));
}

inline std::shared_ptr<PyModule> load_for_executorch_from_buffer(py::buffer buffer, py::handle data_map_buffer,
                                                                 bool etdump, size_t dbg, Verification v,
                                                                 uint64_t max_planned) {
  auto data = data_map_buffer.is_none() ? nullptr : source_from_bytes(data_map_buffer);
  auto src = source_from_bytes(buffer);
  return std::make_shared<PyModule>(make_program_state(src, data, v, etdump, dbg, module_kernels(), max_planned));
}

inline std::shared_ptr<PyModule> load_for_executorch_from_data_loader(std::shared_ptr<PyDataLoader> loader,
                                                                      py::handle data_path, bool etdump, size_t dbg) {
  auto data = data_from_path(data_path);
  auto src = check(loader->open());
  // Upstream has no program_verification here; the Module loaders' default applies.
  auto ps = make_program_state(std::move(src), std::move(data), Verification::InternalConsistency, etdump, dbg,
                               module_kernels());
  return std::make_shared<PyModule>(std::move(ps), std::move(loader));
}

inline std::shared_ptr<PyProgram> load_program(py::handle path, bool etdump, size_t dbg, Verification v,
                                               py::handle data_path, std::optional<bool> mmap, uint64_t max_planned) {
  return std::make_shared<PyProgram>(state_from_file(path, data_path, etdump, dbg, v, mmap, max_planned));
}

inline std::shared_ptr<PyProgram> load_program_from_buffer(py::buffer buffer, bool etdump, size_t dbg, Verification v,
                                                           py::handle data_path, uint64_t max_planned) {
  auto data = data_from_path(data_path);
  auto src = source_from_bytes(buffer);
  return std::make_shared<PyProgram>(make_program_state(src, data, v, etdump, dbg, module_kernels(), max_planned));
}

inline std::shared_ptr<PyBundledModule> load_bundled_program_from_buffer(py::buffer buffer, size_t) {
  auto src = source_from_bytes(buffer);
  auto bp = check(BundledProgram::load(src));
  auto ps = make_program_state(bp->program_source(), nullptr, Verification::InternalConsistency, false, 0,
                               module_kernels());
  return std::make_shared<PyBundledModule>(std::move(bp), std::move(ps));
}

inline std::shared_ptr<PyModule> load_for_executorch_from_bundled_program(PyBundledModule& b,
                                                                          py::handle data_map_buffer, bool etdump,
                                                                          size_t dbg) {
  // As upstream: the external data as bytes-like, or the path of a .ptd file (str or os.PathLike).
  std::shared_ptr<const DataSource> data;
  if (py::isinstance<py::str>(data_map_buffer) || py::hasattr(data_map_buffer, "__fspath__"))
    data = source_from_path(path_from_python(data_map_buffer, "data_map_buffer"));
  else if (!data_map_buffer.is_none())
    data = source_from_bytes(data_map_buffer);
  return std::make_shared<PyModule>(make_program_state(b.bundle()->program_source(), data,
                                                       Verification::InternalConsistency, etdump, dbg,
                                                       module_kernels()));
}

// registries, devices, threads
inline std::vector<std::string> operator_names() {
  std::vector<std::string> names;
  for (const auto& k : module_kernels()) names.emplace_back(k.name);
  return names;
}
inline std::vector<std::string> registered_backend_names() {
  std::vector<std::string> names;
  for (const auto& e : device_runtime().backends()) names.emplace_back(e.name);
  return names;
}
inline bool backend_is_available(const std::string& name) {
  for (const auto& e : device_runtime().backends())
    if (e.name == name) return e.backend->is_available();
  return false;
}
inline bool cuda_enabled() { return device_runtime().cuda_build(); }
inline int64_t device_wait_count() { return device_runtime().wait_count(); }
inline void create_profile_block(const std::string&) {}
inline py::bytes dump_profile_results() { return py::bytes(""); }
inline void reset_profile_results() {}
inline int threadpool_thread_count() { return kernels::thread_count().load(); }
inline std::string cpu_isa() { return std::string(kernels::isa::level_name(kernels::isa::level())); }
inline void reset_threadpool(int n) {
  if (n < 1) throw std::runtime_error(cat("num_threads must be at least 1, got ", n));
  kernels::thread_count().store(n);
}

/// What the module does once at import, before etrt::python::define_surface (gen/surface.toml) registers its
/// classes and functions.
inline void init_module(py::module_& m, std::span<const KernelEntry> kernels) {
  module_kernels() = kernels;
  init_output_mode();
  init_device_runtime();
  set_log_sink(&python_log_sink);
  m.doc() = "ExecuTorch portable runtime bindings (header-only runtime, no ATen / libtorch).";
}

}  // namespace etrt::python
