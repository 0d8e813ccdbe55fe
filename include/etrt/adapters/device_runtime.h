// The bindings' device layer: the DeviceInterface CUDA memory goes through (the CUDA runtime in a CUDA-enabled
// build, a host-emulated device under the test hook, none otherwise), the delegates registered with every program,
// and the device waits.
//
// Note [device waits]: execution is synchronous at the Python boundary, and every wait is for the whole device.
//  - before a call: one wait per device holding a non-empty CUDA input or output;
//  - after it: one wait per device holding a CUDA input or output (the method may update an input in place);
//  - one per cloned CUDA output (for its device-to-device copy);
//  - one before torch copies a torch CUDA input in another layout into the exported one;
//  - one per __dlpack__ export of a CUDA result (none when the consumer passes stream=-1) and per to_host() read.
// A CUDA-enabled build waits with cudaDeviceSynchronize and keeps the GIL (other Python threads pause; a queued CUDA
// host callback that needs the GIL hangs the wait). A build without CUDA waits through torch.cuda.synchronize, which
// releases the GIL, and so reads CUDA inputs only while torch is loaded. Every wait is counted
// (_device_wait_count()), emulated ones included, so tests can check the rules above exactly.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "etrt/backend/backend.h"
#include "etrt/backends/cuda/backend_id.h"
#include "etrt/core/utf8.h"
#include "etrt/device/device_interface.h"
#include "etrt/device/host_emulated_device.h"

namespace etrt::python {

namespace py = pybind11;

using ::etrt::cuda::kCudaBackendId;

class DeviceRuntime {
 public:
  /// The CUDA-enabled build's device layer; `unavailable_reason` explains a zero device count in messages.
  void install_cuda(const DeviceInterface& dev, std::function<std::string()> unavailable_reason) {
    cuda_ = &dev;
    cuda_build_ = true;
    unavailable_reason_ = std::move(unavailable_reason);
  }
  /// Registers (or replaces) the backend under `name` for programs loaded afterwards; `name` must be static.
  void register_backend(std::string_view name, const BackendInterface* backend) {
    for (auto& e : backends_)
      if (e.name == name) {
        e.backend = backend;
        return;
      }
    backends_.push_back(BackendEntry{name, backend});
  }

  /// The device layer for CUDA memory: null in a build without CUDA (unless emulated).
  const DeviceInterface* cuda() const { return cuda_; }
  bool cuda_build() const { return cuda_build_; }
  const HostEmulatedDevice* emulated() const { return emulated_; }
  /// The registered delegates. The vector does not change once a program is loaded (see lock()), so a span of it
  /// stays valid for every ProgramState.
  std::span<const BackendEntry> backends() const { return backends_; }

  /// Called when a program loads or device memory is first allocated: the device layer is fixed from then on.
  void lock() { locked_ = true; }
  bool locked() const { return locked_; }

  /// Replaces the device layer by host memory labelled CUDA (the _testing_emulate_cuda hook). The device is never
  /// freed, so results made on it stay valid for the life of the process.
  const HostEmulatedDevice& emulate(int device_count) {
    emulated_ = new HostEmulatedDevice(DeviceType::CUDA, device_count);
    cuda_ = emulated_;
    unavailable_reason_ = [] { return std::string("the emulated CUDA layer has no devices"); };
    return *emulated_;
  }

  /// "" when CUDA device `index` can hold memory, else why not, as "cuda:N ...".
  std::string device_problem(int index) const {
    const std::string name = cat("cuda:", index);
    if (!cuda_)
      return cat(name, " is unavailable: these bindings are built without CUDA; install the CUDA-enabled build "
                       "(./install_executorch.sh --cuda)");
    const int n = cuda_->device_count();
    if (n == 0)
      return cat(name, " is unavailable: ", unavailable_reason_ ? unavailable_reason_() : "no CUDA device is present");
    if (index < 0 || index >= n)
      return cat(name, " is out of range: this machine has ", n, " CUDA device", n == 1 ? "" : "s");
    return {};
  }

  /// True when a wait can run: a device layer, or torch loaded (sys.modules) in a build without CUDA.
  bool can_wait() const { return cuda_ || torch_module(); }
  /// Raises when no wait can run; `what` says what needed one.
  void require_waits(std::string_view what) const {
    if (!can_wait())
      throw std::runtime_error(sanitize_utf8(
          cat(what, ": CUDA tensors need CUDA-enabled bindings, or torch loaded so that these bindings can "
                    "synchronize the device through torch.cuda.synchronize (import torch first)")));
  }

  /// Waits for all work queued on CUDA device `index` (Note [device waits]). Call with the GIL held.
  void wait(int index) {
    if (cuda_) {
      ++waits_;
      if (auto s = cuda_->synchronize(index); !s) throw std::runtime_error(sanitize_utf8(s.error().describe()));
      return;
    }
    py::object torch = torch_module();
    if (!torch)
      throw std::runtime_error(
          "waiting for a CUDA device needs CUDA-enabled bindings, or torch loaded to call torch.cuda.synchronize");
    ++waits_;
    torch.attr("cuda").attr("synchronize")(index);  // releases the GIL while it waits
  }
  int64_t wait_count() const { return waits_.load(); }

 private:
  /// torch when it is already imported, else null (a blocked import leaves None in sys.modules).
  static py::object torch_module() {
    PyObject* t = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
    if (!t || t == Py_None) return py::object();
    return py::reinterpret_borrow<py::object>(t);
  }

  const DeviceInterface* cuda_ = nullptr;
  bool cuda_build_ = false;
  bool locked_ = false;
  HostEmulatedDevice* emulated_ = nullptr;  // owned for the process lifetime (never freed, see emulate())
  std::function<std::string()> unavailable_reason_;
  std::vector<BackendEntry> backends_;
  std::atomic<int64_t> waits_{0};
};

/// The process's device runtime (a function-local static: nothing runs before first use).
inline DeviceRuntime& device_runtime() {
  static DeviceRuntime r;
  return r;
}

/// The CUDA device indices a set of tensors lives on, each once, in first-seen order.
class DeviceSet {
 public:
  void add(Device d) {
    if (d.is_cpu()) return;
    for (int i : indices_)
      if (i == d.index) return;
    indices_.push_back(d.index);
  }
  bool empty() const { return indices_.empty(); }
  const std::vector<int>& indices() const { return indices_; }
  /// One wait per device (Note [device waits]).
  void wait_all() const {
    for (int i : indices_) device_runtime().wait(i);
  }

 private:
  std::vector<int> indices_;
};

}  // namespace etrt::python
