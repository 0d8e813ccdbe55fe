// The CUDA delegate's backend id, the name its payloads are stored under in a program (PAYLOAD.md). Kept apart so
// code that only names the backend (error messages, registries) does not pull in the executor.
#pragma once

#include <string_view>

namespace etrt::cuda {

inline constexpr std::string_view kCudaBackendId = "EtrtCudaBackend";

}  // namespace etrt::cuda
