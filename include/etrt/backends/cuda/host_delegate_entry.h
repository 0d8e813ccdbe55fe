// The CUDA delegate on the host-emulated device (the _testing_emulate_cuda hook), for code that registers it
// without compiling it: defined out of line in etrt/adapters/module_backends.h, like xnnpack_entry.h's entry.
#pragma once

namespace etrt {
class BackendInterface;
class HostEmulatedDevice;
}  // namespace etrt

namespace etrt::cuda {

/// A new CUDA delegate running its kernels through the host policy on `dev`'s memory. The caller keeps it for the
/// life of the process (methods loaded afterwards point at it).
const BackendInterface* new_host_cuda_delegate(const HostEmulatedDevice& dev);

}  // namespace etrt::cuda
