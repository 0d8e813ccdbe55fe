// cuBLAS, loaded lazily with dlopen so neither the build nor the installed package needs it.
//
// The delegate only needs single-precision GEMM, and torch wheels already ship (and often have loaded) a cuBLAS.
// Names tried, in order: $ETRT_CUBLAS_LIBRARY if set, libcublas.so.13, libcublas.so.12, libcublas.so. A first pass
// with RTLD_NOLOAD reuses a copy already in the process (torch's) instead of loading a second one. Failing to load
// is not an error of the delegate: it is reported once in a log line and the built-in SGEMM kernel is used.
//
// The few declarations below are the public cuBLAS API's (cublas_api.h), spelled in our namespace so no cuBLAS
// header is needed; enums are passed as int, which is how the C ABI passes them.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "etrt/core/log.h"
#include "etrt/core/result.h"

namespace etrt::cuda {

struct CublasContext;  // cuBLAS's opaque cublasContext

struct CublasApi {
  using Handle = CublasContext*;
  // cublasStatus_t cublasCreate_v2(cublasHandle_t*) and cublasDestroy_v2(cublasHandle_t)
  int (*create)(Handle*) = nullptr;
  int (*destroy)(Handle) = nullptr;
  // cublasSgemm_v2(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc): column-major.
  int (*sgemm)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*,
               float*, int) = nullptr;
  // cublasSgemmStridedBatched(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C,
  //                           ldc, strideC, batchCount)
  int (*sgemm_strided_batched)(Handle, int, int, int, int, int, const float*, const float*, int, long long,
                               const float*, int, long long, const float*, float*, int, long long, int) = nullptr;
  std::string library;  // the name that loaded
};

inline constexpr int kCublasStatusSuccess = 0;
inline constexpr int kCublasOpN = 0;  // CUBLAS_OP_N
inline constexpr int kCublasOpT = 1;  // CUBLAS_OP_T

/// cublasStatus_t's name, for messages.
constexpr std::string_view cublas_status_name(int s) {
  switch (s) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

namespace cublas_detail {

template <class Fn>
bool resolve(void* lib, const char* name, Fn& fn, std::string& missing) {
  void* sym = dlsym(lib, name);
  if (!sym) missing += cat(missing.empty() ? "" : ", ", name);
  fn = reinterpret_cast<Fn>(sym);
  return sym != nullptr;
}

inline Result<CublasApi> load() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("ETRT_CUBLAS_LIBRARY"); env && *env) names.emplace_back(env);
  for (const char* n : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) names.emplace_back(n);
  void* lib = nullptr;
  std::string chosen, errors;
  for (const std::string& n : names)
    if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD))) {
      chosen = n;
      break;
    }
  if (!lib)
    for (const std::string& n : names) {
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        chosen = n;
        break;
      }
      const char* e = dlerror();
      errors += cat(errors.empty() ? "" : "; ", e ? e : n.c_str());
    }
  if (!lib) return fail(Error::NotFound, "cuBLAS could not be loaded (", errors, ")");
  CublasApi api;
  api.library = chosen;
  std::string missing;
  resolve(lib, "cublasCreate_v2", api.create, missing);
  resolve(lib, "cublasDestroy_v2", api.destroy, missing);
  resolve(lib, "cublasSgemm_v2", api.sgemm, missing);
  resolve(lib, "cublasSgemmStridedBatched", api.sgemm_strided_batched, missing);
  if (!missing.empty()) {
    dlclose(lib);
    return fail(Error::NotFound, chosen, " lacks ", missing);
  }
  // The library stays loaded for the process: handles created from it may live until exit.
  return api;
}

}  // namespace cublas_detail

/// The process's cuBLAS, loaded on first use (thread-safe). The first failure is logged; later calls return it
/// without trying again.
inline const Result<CublasApi>& cublas() {
  static const Result<CublasApi> api = [] {
    Result<CublasApi> r = cublas_detail::load();
    if (!r)
      log(LogLevel::Info, cat("EtrtCudaBackend: ", r.error().what, "; matrix products use the built-in kernel"));
    return r;
  }();
  return api;
}

}  // namespace etrt::cuda
