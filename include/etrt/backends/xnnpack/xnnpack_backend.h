// XnnpackDelegate: the BackendInterface registered as "XnnpackBackend", so programs lowered with upstream's
// XnnpackPartitioner load. It reads the delegate payload exactly as the exporter writes it (payload.h) and runs the
// subgraph with this project's portable kernels (executor.h); the XNNPACK library is not linked.
#pragma once

#include <memory>
#include <span>

#include "etrt/backend/backend.h"
#include "etrt/backends/xnnpack/executor.h"
#include "etrt/backends/xnnpack/payload.h"

namespace etrt::xnnpack {

class XnnpackDelegate final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<std::shared_ptr<void>> init(std::span<const uint8_t> payload,
                                     std::span<const CompileSpec> compile_specs) const override {
    return init_with_named_data(payload, compile_specs, nullptr);
  }

  Result<std::shared_ptr<void>> init_with_named_data(std::span<const uint8_t> payload,
                                                     std::span<const CompileSpec> compile_specs,
                                                     const NamedDataFn& named) const override {
    return init_with_limit(payload, compile_specs, named, 0);
  }

  Result<std::shared_ptr<void>> init_with_limit(std::span<const uint8_t> payload,
                                                std::span<const CompileSpec> /*compile_specs*/,
                                                const NamedDataFn& named, uint64_t max_bytes) const override {
    ETRT_TRY(Graph g, parse_payload(payload, named));
    ETRT_TRY(auto exec, Executor::create(std::move(g), max_bytes));
    return std::shared_ptr<void>(std::shared_ptr<Executor>(std::move(exec)));
  }

  Status execute(void* handle, std::span<EValue* const> args) const override {
    if (!handle) return fail(Error::DelegateInvalidHandle, "XnnpackBackend: execute without an initialized handle");
    return static_cast<Executor*>(handle)->execute(args);
  }
};

/// The process-wide instance the Python module registers.
inline const XnnpackDelegate& xnnpack_delegate() {
  static const XnnpackDelegate d;
  return d;
}

}  // namespace etrt::xnnpack
