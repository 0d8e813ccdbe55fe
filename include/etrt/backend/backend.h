// Backends (delegates): a DelegateCall hands its arguments to the backend registered under the delegate's id.
//
// Registries are plain spans of entries passed to Method::load; there is no global registration (no static
// constructors with side effects).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "etrt/core/evalue.h"

namespace etrt {

struct CompileSpec {
  std::string_view key;
  std::span<const uint8_t> value;
};

class BackendInterface {
 public:
  virtual ~BackendInterface() = default;
  virtual bool is_available() const = 0;
  /// Prepares a payload; the returned handle is passed to execute and released with the Method.
  virtual Result<std::shared_ptr<void>> init(std::span<const uint8_t> payload,
                                             std::span<const CompileSpec> compile_specs) const = 0;
  /// Resolves a key of the program's named data (constants a delegate stores outside its payload).
  using NamedDataFn = std::function<Result<std::span<const uint8_t>>(std::string_view key)>;
  /// init for delegates whose payload refers to the program's named data (the XNNPACK payload does); the Method
  /// calls this one. `named` may be empty. Delegates that never read named data keep the default.
  virtual Result<std::shared_ptr<void>> init_with_named_data(std::span<const uint8_t> payload,
                                                             std::span<const CompileSpec> compile_specs,
                                                             const NamedDataFn& /*named*/) const {
    return init(payload, compile_specs);
  }
  /// init with the Method's memory limit for this payload (LoadOptions::max_planned_bytes, Note [arena sizes]): a
  /// delegate that allocates on the payload's say checks what it would allocate against `max_bytes` (0: no limit
  /// beyond the delegate's own) before allocating. The Method calls this one.
  virtual Result<std::shared_ptr<void>> init_with_limit(std::span<const uint8_t> payload,
                                                        std::span<const CompileSpec> compile_specs,
                                                        const NamedDataFn& named, uint64_t /*max_bytes*/) const {
    return init_with_named_data(payload, compile_specs, named);
  }
  /// Runs the delegate over its arguments (inputs then outputs, as the exporter ordered them).
  virtual Status execute(void* handle, std::span<EValue* const> args) const = 0;
};

struct BackendEntry {
  std::string_view name;
  const BackendInterface* backend;
};

}  // namespace etrt
