// DLPack ABI: the system <dlpack/dlpack.h> for DLTensor / DLManagedTensor, plus the DLPack 1.0 versioned struct
// when the installed header predates it (Debian ships 0.6). Without the header (a source install on a machine
// without libdlpack-dev), or with ETRT_OWN_DLPACK defined, the C structs are declared here from the DLPack
// specification; the layout checks at the end hold for either.
#pragma once

#include <cstddef>
#include <cstdint>

#if __has_include(<dlpack/dlpack.h>) && !defined(ETRT_OWN_DLPACK)
#include <dlpack/dlpack.h>
#else
extern "C" {
typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 } DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;
}
#endif

namespace etrt::dl {

#ifdef DLPACK_MAJOR_VERSION
using Version = DLPackVersion;
using ManagedVersioned = DLManagedTensorVersioned;
#else
struct Version {
  uint32_t major;
  uint32_t minor;
};
struct ManagedVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};
#endif

inline constexpr uint64_t kFlagReadOnly = 1ull << 0;
inline constexpr uint64_t kFlagIsCopied = 1ull << 1;
inline constexpr uint32_t kMajor = 1;
inline constexpr uint32_t kMinor = 0;

// Device type codes from the DLPack spec.
inline constexpr int kCPU = 1;
inline constexpr int kCUDA = 2;
inline constexpr int kCUDAHost = 3;
inline constexpr int kCUDAManaged = 13;

// Frozen layouts: this file contains checks, not code, for the structs we exchange with other libraries.
static_assert(sizeof(DLDevice) == 8);
static_assert(offsetof(DLTensor, data) == 0 && offsetof(DLTensor, device) == 8 && offsetof(DLTensor, ndim) == 16);
static_assert(offsetof(DLTensor, dtype) == 20 && offsetof(DLTensor, shape) == 24 && offsetof(DLTensor, strides) == 32);
static_assert(offsetof(DLTensor, byte_offset) == 40 && sizeof(DLTensor) == 48);
static_assert(offsetof(DLManagedTensor, dl_tensor) == 0 && sizeof(DLManagedTensor) == 64);
static_assert(offsetof(ManagedVersioned, dl_tensor) == 32 && sizeof(ManagedVersioned) == 80);

}  // namespace etrt::dl
