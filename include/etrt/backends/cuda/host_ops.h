// HostOps: the GraphExecutor's Ops policy over host memory (a HostEmulatedDevice's "device" buffers).
//
// It runs the delegate's graphs on machines without a GPU, so every code path of the executor (planning,
// boundary conversions, each op's parameters) is tested on the CPU. The per-element math is the same functors the
// CUDA kernels use; reductions follow the same algorithms (max-subtracted softmax, two-pass layer norm) in float.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "etrt/kernels/util/functors.h"
#include "etrt/backends/cuda/graph_executor.h"
#include "etrt/kernels/util/gemm.h"

namespace etrt::cuda {

class HostOps {
 public:
  struct Guard {};  // host memory needs no current device

  static Result<HostOps> create(int /*device_index*/) { return HostOps{}; }
  Result<Guard> activate() const { return Guard{}; }

  Status unary(fn::UnaryKind kind, float param, const float* x, float* y, int64_t n) const {
    fn::visit_unary(kind, param, [&](auto f) {
      for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
    });
    return {};
  }

  Status binary(fn::BinaryKind kind, float alpha, const fn::Strided<3>& w, const float* a, const float* b,
                float* y) const {
    fn::visit_binary(kind, alpha, [&](auto f) {
      int64_t off[3];
      for (int64_t i = 0; i < w.numel; ++i) {
        w.offsets(i, off);
        y[off[0]] = f(a[off[1]], b[off[2]]);
      }
    });
    return {};
  }

  template <class T>
  Status copy(const fn::Strided<2>& w, const T* src, T* dst) const {
    int64_t off[2];
    for (int64_t i = 0; i < w.numel; ++i) {
      w.offsets(i, off);
      dst[off[0]] = src[off[1]];
    }
    return {};
  }

  Status eq_scalar(float s, const float* x, uint8_t* y, int64_t n) const {
    const fn::EqScalarFn f{s};
    for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
    return {};
  }

  Status logical_not(const uint8_t* x, uint8_t* y, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) y[i] = fn::LogicalNotFn{}(x[i]);
    return {};
  }

  Status any(const uint8_t* x, uint8_t* y, int64_t outer, int64_t len, int64_t inner) const {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        const uint8_t* xr = x + o * len * inner + j;
        uint8_t r = 0;
        for (int64_t k = 0; k < len && !r; ++k) r = xr[k * inner] != 0;
        y[o * inner + j] = r;
      }
    return {};
  }

  template <class T>
  Status fill(T value, T* y, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) y[i] = value;
    return {};
  }

  Status where(const fn::Strided<4>& w, const uint8_t* c, const float* a, const float* b, float* y) const {
    int64_t off[4];
    for (int64_t i = 0; i < w.numel; ++i) {
      w.offsets(i, off);
      y[off[0]] = fn::select_where(c[off[1]], a[off[2]], b[off[3]]);
    }
    return {};
  }

  Status gemm(const GemmShape& g, float alpha, const float* a, const float* b, float beta, float* c) const {
    using ::etrt::kernels::gemm::MatRef;
    for (int64_t i = 0; i < g.batch; ++i)
      ::etrt::kernels::gemm::gemm<float>(g.m, g.n, g.k, alpha, MatRef<float>{a + i * g.m * g.k, g.k, 1},
                                 MatRef<float>{b + i * g.k * g.n, g.n, 1}, beta, c + i * g.m * g.n, g.n, 1);
    return {};
  }

  Status softmax(const float* x, float* y, int64_t outer, int64_t len, int64_t inner) const {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        const float* xr = x + o * len * inner + j;
        float* yr = y + o * len * inner + j;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t k = 0; k < len; ++k) mx = std::fmax(mx, xr[k * inner]);  // fmax skips NaN; the sum keeps it
        float sum = 0.f;
        for (int64_t k = 0; k < len; ++k) sum += fn::exp(xr[k * inner] - mx);
        for (int64_t k = 0; k < len; ++k) yr[k * inner] = fn::exp(xr[k * inner] - mx) / sum;
      }
    return {};
  }

  Status layer_norm(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                    int64_t rows, int64_t cols, float eps) const {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      float sum = 0.f;
      for (int64_t k = 0; k < cols; ++k) sum += xr[k];
      const float mu = sum / static_cast<float>(cols);
      float sq = 0.f;  // second pass over the deviations: no cancellation for rows with a large mean
      for (int64_t k = 0; k < cols; ++k) sq += (xr[k] - mu) * (xr[k] - mu);
      const float rs = fn::rsqrt(sq / static_cast<float>(cols) + eps);
      for (int64_t k = 0; k < cols; ++k) {
        float v = (xr[k] - mu) * rs;
        if (w) v *= w[k];
        if (b) v += b[k];
        yr[k] = v;
      }
      mean[r] = mu;
      rstd[r] = rs;
    }
    return {};
  }
};

}  // namespace etrt::cuda
