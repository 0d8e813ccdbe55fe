// The whole C++ runtime: include this and a kernel table, then load and run a .pte. Nothing to link.
//
//   #include <etrt/runtime.h>
//   #include <etrt_generated/portable_kernels.h>
//   auto src = etrt::DataSource::from_file("add.pte");
//   auto program = etrt::Program::load(*src);
//   etrt::LoadOptions opts{etrt::generated::portable_kernels()};
//   auto method = etrt::Method::load(*program, "forward", opts);
//
// CUDA (programs with device-planned memory or the EtrtCudaBackend delegate): compile one .cu file with nvcc that
// includes <etrt/backends/cuda/cuda_backend.h> and <etrt/backends/cuda/cuda_ops.cuh>, link the CUDA runtime, and
// pass `&etrt::cuda::cuda_device()` as LoadOptions::cuda plus the delegate in LoadOptions::backends.
#pragma once

#include "etrt/backend/backend.h"
#include "etrt/bundled/bundled_program.h"
#include "etrt/device/device_interface.h"
#include "etrt/method/method.h"
#include "etrt/program/flat_tensor.h"
#include "etrt/program/program.h"
