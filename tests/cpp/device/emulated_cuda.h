// What the device tests share: the CUDA fixtures' folder and a host-emulated CUDA device with the CUDA delegate
// (host kernels) registered, as LoadOptions for Method::load.
#pragma once

#include "../test_support.h"
#include "etrt/backends/cuda/cuda_backend.h"
#include "etrt/backends/cuda/host_ops.h"
#include "etrt/device/host_emulated_device.h"

namespace etrt::test {

/// tests/fixtures/cuda (ETRT_CUDA_FIXTURE_DIR overrides).
inline std::filesystem::path cuda_fixture_dir() {
  return env_dir("ETRT_CUDA_FIXTURE_DIR", ETRT_DEFAULT_CUDA_FIXTURE_DIR);
}

struct EmulatedCuda {
  HostEmulatedDevice dev{DeviceType::CUDA, 1};
  cuda::CudaDelegate<cuda::HostOps> delegate{dev};
  BackendEntry entry{cuda::kCudaBackendId, &delegate};
  LoadOptions options() { return LoadOptions{kernel_table(), {&entry, 1}, nullptr, &dev}; }
};

}  // namespace etrt::test
