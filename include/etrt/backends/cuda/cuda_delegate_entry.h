// The CUDA delegate's entry point, defined in bindings/cuda_delegate.cu (built only with CUDA: ETRT_WITH_CUDA).
//
// Host-compiled code (the Python bindings) includes only this declaration, so it never sees CUDA headers.
#pragma once

namespace etrt {
class BackendInterface;
class DeviceInterface;
}  // namespace etrt

namespace etrt::cuda {

/// The delegate registered as "EtrtCudaBackend" (kCudaBackendId), running its kernels on the GPUs of `dev`.
/// One instance per process: the first call's `dev` is kept, and it must live until exit (the CUDA device layer's
/// own instance does). Creating it touches no CUDA API; is_available() asks `dev` for its device count.
const BackendInterface& cuda_delegate(const DeviceInterface& dev);

}  // namespace etrt::cuda
