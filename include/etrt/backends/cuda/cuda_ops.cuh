// CudaOps: the GraphExecutor's Ops policy on a GPU (compiled by nvcc only, in bindings/cuda_delegate.cu).
//
// Every launch goes to the legacy default stream, so the delegate's work is ordered with the device copies the
// runtime makes around it (cudaMemcpy) and with torch's default stream, without any synchronisation of its own.
// Every CUDA call and launch is checked; failures come back as values carrying cudaGetErrorString's text. Kernel
// faults surface asynchronously, at the next checked call or synchronisation.
//
// Kernels: grid-stride loops over 64-bit indices; elementwise ops walk broadcast/permuted operands through the
// precomputed strides of fn::Strided (WHERE included); the mask ops work on one-byte bools; softmax and layer norm
// reduce one row per block (warp shuffles, then one shared slot per warp), ANY loops per output; matrix products
// use cuBLAS when it loads and a tiled shared-memory SGEMM otherwise.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "etrt/backends/cuda/cublas_loader.h"
#include "etrt/kernels/util/functors.h"
#include "etrt/backends/cuda/graph_executor.h"

namespace etrt::cuda {

namespace gpu {

// Non-template kernels are static: this header is meant for one nvcc translation unit, and internal linkage keeps a
// second includer from clashing at link time.
inline constexpr int kBlock = 256;
inline constexpr int kTile = 16;  // SGEMM fallback: 16 x 16 outputs per block, one per thread

/// Blocks for a grid-stride loop over n elements: enough to fill any current GPU, never above the x-dimension
/// limit.
inline unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kBlock - 1) / kBlock, 1, int64_t{1} << 16));
}

__device__ inline int64_t global_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

template <int N>
__device__ inline void offsets(const fn::Strided<N>& w, int64_t i, int64_t (&off)[N]) {
  if (w.rank <= 1) {  // coalesced same-layout operands: no division
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = i * w.strides[k][0];
  } else {
    w.offsets(i, off);
  }
}

template <class F>
__global__ void unary_kernel(F f, const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = f(x[i]);
}

template <class F>
__global__ void binary_kernel(F f, fn::Strided<3> w, const float* __restrict__ a, const float* __restrict__ b,
                              float* __restrict__ y) {
  for (int64_t i = global_index(); i < w.numel; i += grid_stride()) {
    int64_t off[3];
    offsets(w, i, off);
    y[off[0]] = f(a[off[1]], b[off[2]]);
  }
}

template <class T>
__global__ void copy_kernel(fn::Strided<2> w, const T* __restrict__ src, T* __restrict__ dst) {
  for (int64_t i = global_index(); i < w.numel; i += grid_stride()) {
    int64_t off[2];
    offsets(w, i, off);
    dst[off[0]] = src[off[1]];
  }
}

/// Elementwise with distinct input and output types (the mask ops: float -> bool, bool -> bool).
template <class F, class In, class Out>
__global__ void map_kernel(F f, const In* __restrict__ x, Out* __restrict__ y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = f(x[i]);
}

template <class T>
__global__ void fill_kernel(T value, T* __restrict__ y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = value;
}

static __global__ void where_kernel(fn::Strided<4> w, const uint8_t* __restrict__ c, const float* __restrict__ a,
                                    const float* __restrict__ b, float* __restrict__ y) {
  for (int64_t i = global_index(); i < w.numel; i += grid_stride()) {
    int64_t off[4];
    offsets(w, i, off);
    y[off[0]] = fn::select_where(c[off[1]], a[off[2]], b[off[3]]);
  }
}

/// Any over `len` elements `inner` apart, one thread per output: the masks reduced here are short rows (attention
/// weights), so a per-output loop with an early exit beats a block reduction's synchronisation.
static __global__ void any_kernel(const uint8_t* __restrict__ x, uint8_t* __restrict__ y, int64_t outer, int64_t len,
                                  int64_t inner) {
  for (int64_t c = global_index(); c < outer * inner; c += grid_stride()) {
    const uint8_t* xr = x + (c / inner) * len * inner + c % inner;
    uint8_t r = 0;
    for (int64_t k = 0; k < len && !r; ++k) r = xr[k * inner] != 0;
    y[c] = r;
  }
}

/// Sum (or max) over the block; every thread gets the result. All threads of the block must call it, and
/// blockDim.x must be a multiple of 32 (at most 1024).
template <bool Max>
__device__ float block_reduce(float v, float* smem) {
  const auto combine = [](float a, float b) { return Max ? fmaxf(a, b) : a + b; };
  const float identity = Max ? -INFINITY : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? smem[lane] : identity;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) smem[0] = v;
  }
  __syncthreads();
  v = smem[0];
  __syncthreads();  // smem is reused by the next reduction
  return v;
}

/// Softmax over contiguous rows (the reduced dim is the innermost): one block per row.
static __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t len) {
  __shared__ float smem[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * len;
    float* yr = y + r * len;
    float mx = -INFINITY;
    for (int64_t k = threadIdx.x; k < len; k += blockDim.x) mx = fmaxf(mx, xr[k]);  // skips NaN; the sum keeps it
    mx = block_reduce<true>(mx, smem);
    float sum = 0.f;
    for (int64_t k = threadIdx.x; k < len; k += blockDim.x) sum += fn::exp(xr[k] - mx);
    sum = block_reduce<false>(sum, smem);
    for (int64_t k = threadIdx.x; k < len; k += blockDim.x) yr[k] = fn::exp(xr[k] - mx) / sum;
  }
}

/// Softmax over a non-innermost dim: one thread per (outer, inner) column; neighbouring threads read neighbouring
/// addresses.
static __global__ void softmax_columns(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t len,
                                int64_t inner) {
  for (int64_t c = global_index(); c < outer * inner; c += grid_stride()) {
    const int64_t base = (c / inner) * len * inner + c % inner;
    float mx = -INFINITY;
    for (int64_t k = 0; k < len; ++k) mx = fmaxf(mx, x[base + k * inner]);
    float sum = 0.f;
    for (int64_t k = 0; k < len; ++k) sum += fn::exp(x[base + k * inner] - mx);
    for (int64_t k = 0; k < len; ++k) y[base + k * inner] = fn::exp(x[base + k * inner] - mx) / sum;
  }
}

/// Layer norm of contiguous rows, two passes (mean, then the mean squared deviation: no cancellation when the mean
/// is large); one block per row.
static __global__ void layer_norm_rows(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                float* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd,
                                int64_t rows, int64_t cols, float eps) {
  __shared__ float smem[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) s += xr[k];
    const float mu = block_reduce<false>(s, smem) / static_cast<float>(cols);
    float q = 0.f;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) q += (xr[k] - mu) * (xr[k] - mu);
    const float rs = fn::rsqrt(block_reduce<false>(q, smem) / static_cast<float>(cols) + eps);
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
      float v = (xr[k] - mu) * rs;
      if (w) v *= w[k];
      if (b) v += b[k];
      yr[k] = v;
    }
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

/// Row-major batched C = alpha * A B + beta * C through 16 x 16 shared-memory tiles. Every loop bound is uniform
/// across the block, so the __syncthreads inside are reached by all threads.
static __global__ void sgemm_tiled(GemmShape g, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                            float beta, float* __restrict__ C) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile + 1];  // +1: the column reads of the inner loop hit distinct banks
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t tiles_m = (g.m + kTile - 1) / kTile, tiles_n = (g.n + kTile - 1) / kTile;
  for (int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const float* a = A + z * g.m * g.k;
    const float* b = B + z * g.k * g.n;
    float* c = C + z * g.m * g.n;
    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y)
      for (int64_t tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
        const int64_t row = tm * kTile + ty, col = tn * kTile + tx;
        float acc = 0.f;
        for (int64_t p0 = 0; p0 < g.k; p0 += kTile) {
          as[ty][tx] = (row < g.m && p0 + tx < g.k) ? a[row * g.k + p0 + tx] : 0.f;
          bs[ty][tx] = (p0 + ty < g.k && col < g.n) ? b[(p0 + ty) * g.n + col] : 0.f;
          __syncthreads();
#pragma unroll
          for (int q = 0; q < kTile; ++q) acc = fmaf(as[ty][q], bs[q][tx], acc);
          __syncthreads();
        }
        if (row < g.m && col < g.n) {
          float v = alpha * acc;
          if (beta != 0.f) v += beta * c[row * g.n + col];  // beta == 0 never reads C
          c[row * g.n + col] = v;
        }
      }
  }
}

}  // namespace gpu

class CudaOps {
 public:
  /// Restores the caller's current device when an execute ends.
  class Guard {
   public:
    Guard() = default;
    explicit Guard(int prev) : prev_(prev) {}
    Guard(Guard&& o) noexcept : prev_(o.prev_) { o.prev_ = -1; }
    Guard& operator=(Guard&&) = delete;
    Guard(const Guard&) = delete;
    ~Guard() {
      if (prev_ >= 0) cudaSetDevice(prev_);
    }

   private:
    int prev_ = -1;
  };

  /// Checks that device `index` exists and prepares cuBLAS on it (or the fallback kernel when cuBLAS is missing;
  /// `use_cublas` false forces the fallback, for tests that compare the two).
  static Result<CudaOps> create(int index, bool use_cublas = true) {
    int count = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it so later checks do not report it again
      return fail(Error::NotFound, "EtrtCudaBackend: no CUDA device (cudaGetDeviceCount: ", cudaGetErrorString(e),
                  ")");
    }
    if (count <= 0) return fail(Error::NotFound, "EtrtCudaBackend: no CUDA device (cudaGetDeviceCount reports 0)");
    if (index < 0 || index >= count)
      return fail(Error::NotFound, "EtrtCudaBackend: cuda:", index, " does not exist (", count, " CUDA devices)");
    CudaOps ops(index);
    ETRT_TRY([[maybe_unused]] Guard guard, ops.activate());
    const Result<CublasApi>* api = use_cublas ? &cublas() : nullptr;
    if (api && *api) {
      CublasApi::Handle h = nullptr;
      // A new handle's stream is the NULL stream, i.e. the legacy default stream the kernels use too.
      if (const int st = (*api)->create(&h); st == kCublasStatusSuccess) {
        ops.api_ = &api->value();
        ops.handle_ = h;
      } else {
        log(LogLevel::Info, cat("EtrtCudaBackend: cublasCreate_v2 on cuda:", index, " failed with ",
                                cublas_status_name(st), "; matrix products use the built-in kernel"));
      }
    }
    return Result<CudaOps>(std::move(ops));  // explicit: nvcc has no C++20 implicit move here
  }

  CudaOps(CudaOps&& o) noexcept : index_(o.index_), api_(o.api_), handle_(o.handle_) { o.handle_ = nullptr; }
  CudaOps& operator=(CudaOps&&) = delete;
  CudaOps(const CudaOps&) = delete;
  ~CudaOps() {
    if (handle_) api_->destroy(handle_);
  }

  bool uses_cublas() const { return handle_ != nullptr; }

  Result<Guard> activate() const {
    int prev = 0;
    ETRT_CHECK_OK(check(cudaGetDevice(&prev), "cudaGetDevice"));
    if (prev == index_) return Guard{};
    ETRT_CHECK_OK(check(cudaSetDevice(index_), "cudaSetDevice"));
    return Guard{prev};
  }

  Status unary(fn::UnaryKind kind, float param, const float* x, float* y, int64_t n) const {
    if (n <= 0) return {};
    return fn::visit_unary(kind, param, [&](auto f) -> Status {
      gpu::unary_kernel<<<gpu::grid_for(n), gpu::kBlock, 0, cudaStreamLegacy>>>(f, x, y, n);
      return check(cudaGetLastError(), "launching the unary kernel");
    });
  }

  Status binary(fn::BinaryKind kind, float alpha, const fn::Strided<3>& w, const float* a, const float* b,
                float* y) const {
    if (w.numel <= 0) return {};
    return fn::visit_binary(kind, alpha, [&](auto f) -> Status {
      gpu::binary_kernel<<<gpu::grid_for(w.numel), gpu::kBlock, 0, cudaStreamLegacy>>>(f, w, a, b, y);
      return check(cudaGetLastError(), "launching the binary kernel");
    });
  }

  template <class T>
  Status copy(const fn::Strided<2>& w, const T* src, T* dst) const {
    if (w.numel <= 0) return {};
    gpu::copy_kernel<T><<<gpu::grid_for(w.numel), gpu::kBlock, 0, cudaStreamLegacy>>>(w, src, dst);
    return check(cudaGetLastError(), "launching the strided copy kernel");
  }

  Status eq_scalar(float s, const float* x, uint8_t* y, int64_t n) const {
    if (n <= 0) return {};
    gpu::map_kernel<<<gpu::grid_for(n), gpu::kBlock, 0, cudaStreamLegacy>>>(fn::EqScalarFn{s}, x, y, n);
    return check(cudaGetLastError(), "launching the eq_scalar kernel");
  }

  Status logical_not(const uint8_t* x, uint8_t* y, int64_t n) const {
    if (n <= 0) return {};
    gpu::map_kernel<<<gpu::grid_for(n), gpu::kBlock, 0, cudaStreamLegacy>>>(fn::LogicalNotFn{}, x, y, n);
    return check(cudaGetLastError(), "launching the logical_not kernel");
  }

  Status any(const uint8_t* x, uint8_t* y, int64_t outer, int64_t len, int64_t inner) const {
    if (outer <= 0 || inner <= 0) return {};
    gpu::any_kernel<<<gpu::grid_for(outer * inner), gpu::kBlock, 0, cudaStreamLegacy>>>(x, y, outer, len, inner);
    return check(cudaGetLastError(), "launching the any kernel");
  }

  template <class T>
  Status fill(T value, T* y, int64_t n) const {
    if (n <= 0) return {};
    gpu::fill_kernel<T><<<gpu::grid_for(n), gpu::kBlock, 0, cudaStreamLegacy>>>(value, y, n);
    return check(cudaGetLastError(), "launching the fill kernel");
  }

  Status where(const fn::Strided<4>& w, const uint8_t* c, const float* a, const float* b, float* y) const {
    if (w.numel <= 0) return {};
    gpu::where_kernel<<<gpu::grid_for(w.numel), gpu::kBlock, 0, cudaStreamLegacy>>>(w, c, a, b, y);
    return check(cudaGetLastError(), "launching the where kernel");
  }

  Status gemm(const GemmShape& g, float alpha, const float* a, const float* b, float beta, float* c) const {
    if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return {};
    constexpr int64_t kInt = INT_MAX;
    // cuBLAS takes int sizes, and k == 0 is left to the kernel (C = beta * C) rather than to cuBLAS's reading.
    if (handle_ && g.k > 0 && g.m <= kInt && g.n <= kInt && g.k <= kInt && g.batch <= kInt) {
      // Row-major C = A B is column-major C^T = B^T A^T: the operands swap and m/n exchange; the leading
      // dimensions are the row-major row lengths.
      const int m = static_cast<int>(g.n), n = static_cast<int>(g.m), k = static_cast<int>(g.k);
      const int st =
          g.batch == 1
              ? api_->sgemm(handle_, kCublasOpN, kCublasOpN, m, n, k, &alpha, b, m, a, k, &beta, c, m)
              : api_->sgemm_strided_batched(handle_, kCublasOpN, kCublasOpN, m, n, k, &alpha, b, m, g.k * g.n, a, k,
                                            g.m * g.k, &beta, c, m, g.m * g.n, static_cast<int>(g.batch));
      if (st != kCublasStatusSuccess)
        return fail(Error::Internal, g.batch == 1 ? "cublasSgemm_v2" : "cublasSgemmStridedBatched", " failed with ",
                    cublas_status_name(st), " (m ", g.m, ", n ", g.n, ", k ", g.k, ", batch ", g.batch, ")");
      return {};
    }
    const dim3 block(gpu::kTile, gpu::kTile);
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((g.n + gpu::kTile - 1) / gpu::kTile, 65535)),
                    static_cast<unsigned>(std::min<int64_t>((g.m + gpu::kTile - 1) / gpu::kTile, 65535)),
                    static_cast<unsigned>(std::min<int64_t>(g.batch, 65535)));
    gpu::sgemm_tiled<<<grid, block, 0, cudaStreamLegacy>>>(g, alpha, a, b, beta, c);
    return check(cudaGetLastError(), "launching the SGEMM kernel");
  }

  Status softmax(const float* x, float* y, int64_t outer, int64_t len, int64_t inner) const {
    if (outer <= 0 || len <= 0 || inner <= 0) return {};
    if (inner == 1) {
      gpu::softmax_rows<<<rows_grid(outer), row_block(len), 0, cudaStreamLegacy>>>(x, y, outer, len);
      return check(cudaGetLastError(), "launching the softmax kernel");
    }
    gpu::softmax_columns<<<gpu::grid_for(outer * inner), gpu::kBlock, 0, cudaStreamLegacy>>>(
        x, y, outer, len, inner);
    return check(cudaGetLastError(), "launching the softmax kernel");
  }

  Status layer_norm(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                    int64_t rows, int64_t cols, float eps) const {
    if (rows <= 0) return {};
    gpu::layer_norm_rows<<<rows_grid(rows), row_block(cols), 0, cudaStreamLegacy>>>(x, w, b, y, mean, rstd,
                                                                                        rows, cols, eps);
    return check(cudaGetLastError(), "launching the layer norm kernel");
  }

 private:
  explicit CudaOps(int index) : index_(index) {}

  static Status check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return {};
    return fail(Error::Internal, "EtrtCudaBackend: ", what, " failed: ", cudaGetErrorName(e), " (",
                cudaGetErrorString(e), ")");
  }
  /// Threads for one row: a multiple of 32 (the block reduction needs whole warps), at most kBlock.
  static unsigned row_block(int64_t len) {
    return static_cast<unsigned>(std::clamp<int64_t>((len + 31) / 32 * 32, 32, gpu::kBlock));
  }
  static unsigned rows_grid(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }

  int index_ = 0;
  const CublasApi* api_ = nullptr;
  CublasApi::Handle handle_ = nullptr;
};

}  // namespace etrt::cuda
