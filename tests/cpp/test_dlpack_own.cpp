// A source install without <dlpack/dlpack.h>: dlpack_abi.h then declares the DLPack structs itself (forced here
// with ETRT_OWN_DLPACK). Its layout checks run at compile time; this executes the declarations once.
#define ETRT_OWN_DLPACK 1
#include "etrt/adapters/dlpack_abi.h"

#include <catch2/catch.hpp>

TEST_CASE("DLPack declared from the specification keeps the exchanged layouts", "[dlpack]") {
  int64_t shape[2] = {2, 3};
  DLManagedTensor legacy{};
  legacy.dl_tensor.device = DLDevice{kDLCPU, 0};
  legacy.dl_tensor.ndim = 2;
  legacy.dl_tensor.shape = shape;
  legacy.dl_tensor.dtype = DLDataType{2, 32, 1};
  etrt::dl::ManagedVersioned versioned{};
  versioned.version = {etrt::dl::kMajor, etrt::dl::kMinor};
  versioned.dl_tensor = legacy.dl_tensor;
  CHECK(sizeof(DLManagedTensor) == 64);
  CHECK(sizeof(etrt::dl::ManagedVersioned) == 80);
  CHECK(versioned.dl_tensor.shape[1] == 3);
  CHECK(static_cast<int>(versioned.dl_tensor.device.device_type) == etrt::dl::kCPU);
}
