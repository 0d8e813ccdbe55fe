// Shared C++ state behind the Python objects. No Python objects live here: results keep these alive through
// shared_ptrs that any thread (e.g. a DLPack consumer) may release without the GIL.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "etrt/adapters/etdump_recorder.h"
#include "etrt/adapters/result.h"
#include "etrt/bundled/bundled_program.h"
#include "etrt/method/method.h"

namespace etrt::python {

struct ProgramState {
  std::shared_ptr<const DataSource> source;
  std::shared_ptr<const Program> program;
  std::shared_ptr<const FlatTensorData> data_map;
  std::span<const KernelEntry> kernels;
  std::span<const BackendEntry> backends;
  bool enable_etdump = false;
  std::shared_ptr<ETDumpRecorder> etdump;  // set when enable_etdump

  LoadOptions options() const { return LoadOptions{kernels, backends, data_map.get()}; }
};

/// One loaded Method plus the storage the bindings give its unplanned outputs.
struct MethodState {
  std::shared_ptr<ProgramState> program;  // outlives `method`
  std::unique_ptr<Method> method;
  std::mutex mu;                          // serialises every call on this method
  std::vector<std::shared_ptr<HostStorage>> output_storage;
  uint64_t execution = 0;                 // incremented by each successful execute
  bool outputs_visible = false;           // false after set_inputs until the next execute

  /// Binds fresh storage to each unplanned output whose previous storage a result still holds.
  Status prepare_outputs() {
    output_storage.resize(method->num_outputs());
    for (size_t i = 0; i < method->num_outputs(); ++i) {
      if (!method->output_needs_storage(i)) continue;
      const Tensor& t = method->output(i).tensor_unchecked();
      auto& s = output_storage[i];
      if (!s || s.use_count() > 1 || s->size < t.capacity_nbytes()) {
        s = HostStorage::try_allocate(t.capacity_nbytes());
        if (!s)
          return fail(Error::MemoryAllocationFailed, "method '", method->name(), "': cannot allocate ",
                      t.capacity_nbytes(), " bytes for output ", i);
      }
      ETRT_CHECK_OK(method->set_output_data_ptr(i, s->bytes.get(), s->size));
    }
    return {};
  }
};

}  // namespace etrt::python
