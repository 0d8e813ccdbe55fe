// CudaDelegate: the BackendInterface registered as "EtrtCudaBackend".
//
// init parses and validates the payload, picks the device from the CompileSpec "target_device" (b"cuda:N", the
// spec the exporter's PropagateDevicePass also reads) and builds a GraphExecutor whose handle the Method keeps.
// The Ops policy is a template parameter so the same delegate runs CUDA kernels (CudaOps, in the one nvcc
// translation unit) or host loops over a host-emulated device (HostOps, in the tests).
#pragma once

#include <charconv>
#include <memory>
#include <span>
#include <string_view>

#include "etrt/backend/backend.h"
#include "etrt/backends/cuda/backend_id.h"
#include "etrt/backends/cuda/graph_executor.h"
#include "etrt/backends/cuda/payload.h"
#include "etrt/device/device_interface.h"

namespace etrt::cuda {

/// The device index named by the CompileSpec "target_device": "cuda" or "cuda:N"; 0 when the spec is absent.
inline Result<int> target_device_index(std::span<const CompileSpec> specs) {
  for (const CompileSpec& s : specs) {
    if (s.key != "target_device") continue;
    const std::string_view v(reinterpret_cast<const char*>(s.value.data()), s.value.size());
    if (v == "cuda") return 0;
    if (!v.starts_with("cuda:")) {
      const std::string_view type = v.substr(0, v.find(':'));
      return fail(Error::NotSupported, "EtrtCudaBackend: CompileSpec target_device '", v,
                  "' names device type '", type, "'; this delegate runs on cuda only");
    }
    const std::string_view digits = v.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    const bool ok = ec == std::errc() && end == digits.data() + digits.size() && !digits.starts_with('-');
    if (!ok || index < 0 || index > 127)  // Device::index is an int8_t
      return fail(Error::InvalidProgram, "EtrtCudaBackend: CompileSpec target_device '", v,
                  "' is not 'cuda:N' with N in 0..127");
    return index;
  }
  return 0;
}

template <class Ops>
class CudaDelegate final : public BackendInterface {
 public:
  /// `dev` must outlive the delegate and every handle it returns (executors release their memory through it).
  explicit CudaDelegate(const DeviceInterface& dev) : dev_(dev) {}

  bool is_available() const override { return dev_.type() == DeviceType::CUDA && dev_.device_count() > 0; }

  Result<std::shared_ptr<void>> init(std::span<const uint8_t> payload,
                                     std::span<const CompileSpec> compile_specs) const override {
    return init_with_limit(payload, compile_specs, nullptr, 0);
  }

  Result<std::shared_ptr<void>> init_with_limit(std::span<const uint8_t> payload,
                                                std::span<const CompileSpec> compile_specs, const NamedDataFn& /*named*/,
                                                uint64_t max_bytes) const override {
    ETRT_TRY(const int index, target_device_index(compile_specs));
    if (dev_.type() != DeviceType::CUDA)
      return fail(Error::NotSupported, "EtrtCudaBackend: the device layer it was given is not a CUDA device");
    const int count = dev_.device_count();
    if (count <= 0) return fail(Error::NotFound, "EtrtCudaBackend: no CUDA device is present (needs cuda:", index, ")");
    if (index >= count)
      return fail(Error::NotFound, "EtrtCudaBackend: target_device is cuda:", index, " but only ", count,
                  " CUDA device", count == 1 ? " is" : "s are", " present");
    ETRT_TRY(Payload p, parse_payload(payload));
    ETRT_TRY(auto exec, GraphExecutor<Ops>::create(std::move(p), dev_, index, max_bytes));
    return std::shared_ptr<void>(std::shared_ptr<GraphExecutor<Ops>>(std::move(exec)));
  }

  Status execute(void* handle, std::span<EValue* const> args) const override {
    if (!handle) return fail(Error::DelegateInvalidHandle, "EtrtCudaBackend: execute without an initialized handle");
    return static_cast<GraphExecutor<Ops>*>(handle)->execute(args);
  }

 private:
  const DeviceInterface& dev_;
};

}  // namespace etrt::cuda
