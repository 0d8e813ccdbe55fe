// The kernel calling convention.
//
// A KernelCall hands its kernel every schema argument in declaration order followed by one return slot, as value
// indices into the method's value table. The generated wrapper for each operator checks the count and the tags, then calls the
// typed kernel template instantiated with the dtypes listed for it in gen/ops/*.toml.
#pragma once

#include <span>
#include <string_view>

#include "etrt/core/evalue.h"

namespace etrt {

class DeviceInterface;

/// Per-call context handed to kernels. Kernels report failures by returning a Failure; the interpreter prefixes
/// the instruction index and operator name.
class KernelContext {
 public:
  /// Resizes an output to `sizes`, failing with a message naming the operator when the tensor cannot take it.
  Status resize(std::string_view op, Tensor& out, std::span<const int64_t> sizes) {
    if (auto s = out.resize(sizes); !s) return fail(s.error().code, op, ": output ", s.error().what);
    return {};
  }
  /// The device layer for device-aware kernels (et_copy); null in a build without CUDA.
  const DeviceInterface* device = nullptr;
};

using KernelFn = Status (*)(KernelContext&, std::span<EValue* const>);

/// One registered operator: "aten::add.out", its number of argument slots (schema arguments + 1 return slot).
struct KernelEntry {
  std::string_view name;
  int num_slots;
  KernelFn fn;
  uint64_t mutable_slots = 0;  // bit i: argument slot i is written (a Tensor(a!) in the schema)
  bool device_aware = false;   // may receive device tensors (host/device copies); others only see host memory
};

}  // namespace etrt
