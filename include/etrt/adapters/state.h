// Shared C++ state behind the Python objects. No Python objects live here: results keep these alive through
// shared_ptrs that any thread (e.g. a DLPack consumer) may release without the GIL.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "etrt/adapters/result.h"
#include "etrt/bundled/bundled_program.h"
#include "etrt/devtools/etdump_recorder.h"
#include "etrt/method/method.h"

namespace etrt::python {

struct ProgramState {
  std::shared_ptr<const DataSource> source;
  std::shared_ptr<const Program> program;
  std::shared_ptr<const FlatTensorData> data_map;
  // Why the external data (.ptd) could not be read, if it could not: as upstream, a program loads without reading
  // its data file, and the first method load reports the problem.
  std::optional<Failure> data_error;
  std::span<const KernelEntry> kernels;
  std::span<const BackendEntry> backends;  // device_runtime().backends(), fixed once a program is loaded
  const DeviceInterface* cuda = nullptr;  // device_runtime().cuda(): null in a build without CUDA
  bool enable_etdump = false;
  std::shared_ptr<etdump::ETDumpRecorder> etdump;  // set when enable_etdump; owns the debug buffer, if any
  std::shared_ptr<const DataSource> data_source;   // the .ptd the data map reads, if any
  uint64_t max_planned_bytes = 0;                   // LoadOptions::max_planned_bytes

  LoadOptions options() const { return LoadOptions{kernels, backends, data_map.get(), cuda, max_planned_bytes}; }
  /// Fails when a file the program reads in place changed on disk since it was loaded (Note [mapped files]).
  Status check_files() const {
    ETRT_CHECK_OK(source->check_unchanged());
    if (data_source) ETRT_CHECK_OK(data_source->check_unchanged());
    return {};
  }
};

/// One loaded Method plus the storage the bindings give its unplanned outputs.
///
/// Each unplanned output has two buffers that take turns: an execution writes the buffer it used last unless a
/// result still holds it, else the other one, else new memory (which then takes the older one's turn). A Method
/// handed out by a Module allocates new device memory for every call instead (`fresh_device_outputs`).
struct MethodState {
  std::shared_ptr<ProgramState> program;  // outlives `method`
  std::unique_ptr<Method> method;
  std::mutex mu;                          // serialises every call on this method
  std::vector<std::shared_ptr<Storage>> output_storage;  // per output: the buffer of the current execution
  std::vector<std::shared_ptr<Storage>> spare_storage;   // per output: the other turn
  bool fresh_device_outputs = false;      // a Module's method: new device memory for unplanned outputs each call
  uint64_t execution = 0;                 // incremented by each successful execute
  bool outputs_visible = false;           // false after set_inputs until the next execute

  /// Binds storage on the output's own device to each unplanned output (see above).
  Status prepare_outputs() {
    output_storage.resize(method->num_outputs());
    spare_storage.resize(method->num_outputs());
    for (size_t i = 0; i < method->num_outputs(); ++i) {
      if (!method->output_needs_storage(i)) continue;
      const Tensor& t = method->output(i).tensor_unchecked();
      const size_t need = t.capacity_nbytes();
      const Device dev = t.device();
      auto& cur = output_storage[i];
      auto& spare = spare_storage[i];
      const auto free_fit = [&](const std::shared_ptr<Storage>& s) {
        return s && s.use_count() == 1 && s->size >= need && s->device == dev;
      };
      if (!dev.is_cpu() && fresh_device_outputs) {
        cur.reset();
        spare.reset();
      } else if (free_fit(cur)) {
      } else if (free_fit(spare)) {
        std::swap(cur, spare);
      } else {
        spare = std::move(cur);
        cur.reset();
      }
      if (!cur) {
        if (!dev.is_cpu() && !method->device_api())
          return fail(Error::NotSupported, "method '", method->name(), "': output ", i, " lives on ", dev.str(),
                      " and is not memory planned (alloc_graph_output=False), so the bindings allocate CUDA memory "
                      "for it, which needs CUDA-enabled bindings");
        auto s = Storage::try_allocate_on(dev, need, method->device_api());
        if (!s)
          return fail(Error::MemoryAllocationFailed, "method '", method->name(), "': cannot allocate ", need,
                      " bytes on ", dev.str(), " for output ", i, ": ", s.error().what);
        cur = std::move(*s);
      }
      ETRT_CHECK_OK(method->set_output_data_ptr(i, cur->data(), cur->size));
    }
    return {};
  }
};

}  // namespace etrt::python
