// _softmax, _log_softmax, softmax.int: numerically stable (max-subtracted), any dim, any layout.
//
// Rows along `dim` that are contiguous run as tight loops; for a non-innermost dim of a contiguous tensor the
// "column" path handles `inner` rows at once so every pass reads memory sequentially.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "etrt/kernels/util/fast_math.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/pointwise_util.h"

namespace etrt::kernels {

namespace detail {

template <class T, bool Log>
void softmax_row(const T* x, int64_t xs, T* y, int64_t ys, int64_t n) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, float> && !Log) {
    if (xs == 1 && ys == 1) {  // the common case: vectorized max, exp and sum
      float m = max_lanes(x, n);
      if (m == -std::numeric_limits<float>::infinity()) m = 0.0f;
      const float inv = 1.0f / exp_shift_sum(x, y, n, m);
      for (int64_t i = 0; i < n; ++i) y[i] *= inv;
      return;
    }
  }
  C m = -std::numeric_limits<C>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const C v = static_cast<C>(x[i * xs]);
    m = v > m ? v : m;
  }
  if (m == -std::numeric_limits<C>::infinity()) m = C(0);  // an all -inf row gives NaN as in torch
  C sum = 0;
  if constexpr (Log) {
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<C>(x[i * xs]) - m);
    const C lse = m + std::log(sum);
    for (int64_t i = 0; i < n; ++i) y[i * ys] = static_cast<T>(static_cast<C>(x[i * xs]) - lse);
  } else {
    if (xs == 1 && ys == 1 && std::is_same_v<T, C>) {
      for (int64_t i = 0; i < n; ++i) {
        const C e = std::exp(static_cast<C>(x[i]) - m);
        y[i] = static_cast<T>(e);
        sum += e;
      }
      const C inv = C(1) / sum;
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(static_cast<C>(y[i]) * inv);
      return;
    }
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<C>(x[i * xs]) - m);
    const C inv = C(1) / sum;
    for (int64_t i = 0; i < n; ++i) y[i * ys] = static_cast<T>(std::exp(static_cast<C>(x[i * xs]) - m) * inv);
  }
}

/// Column path: x and y contiguous [outer, n, inner]; the softmax runs along n for every inner index at once.
template <class T, bool Log>
void softmax_columns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using C = compute_t<T>;
  std::vector<C> mx(static_cast<size_t>(inner)), sum(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const T* xb = x + o * n * inner;
    T* yb = y + o * n * inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<C>::infinity());
    std::fill(sum.begin(), sum.end(), C(0));
    for (int64_t i = 0; i < n; ++i) {
      const T* r = xb + i * inner;
      for (int64_t j = 0; j < inner; ++j) {
        const C v = static_cast<C>(r[j]);
        mx[j] = v > mx[j] ? v : mx[j];
      }
    }
    for (int64_t j = 0; j < inner; ++j)
      if (std::isinf(mx[j]) && mx[j] < 0) mx[j] = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T* r = xb + i * inner;
      for (int64_t j = 0; j < inner; ++j) sum[j] += std::exp(static_cast<C>(r[j]) - mx[j]);
    }
    if constexpr (Log) {
      for (int64_t j = 0; j < inner; ++j) sum[j] = mx[j] + std::log(sum[j]);  // log-sum-exp
      for (int64_t i = 0; i < n; ++i) {
        const T* r = xb + i * inner;
        T* w = yb + i * inner;
        for (int64_t j = 0; j < inner; ++j) w[j] = static_cast<T>(static_cast<C>(r[j]) - sum[j]);
      }
    } else {
      for (int64_t j = 0; j < inner; ++j) sum[j] = C(1) / sum[j];
      for (int64_t i = 0; i < n; ++i) {
        const T* r = xb + i * inner;
        T* w = yb + i * inner;
        for (int64_t j = 0; j < inner; ++j) w[j] = static_cast<T>(std::exp(static_cast<C>(r[j]) - mx[j]) * sum[j]);
      }
    }
  }
}

template <class Dtypes, bool Log>
Status softmax_impl(std::string_view op, KernelContext& ctx, const Tensor& self, int64_t dim, bool allow_convert,
                    Tensor& out) {
  if (!allow_convert && self.dtype() != out.dtype())
    return fail(Error::InvalidArgument, op, ": output dtype ", name(out.dtype()), " must equal input dtype ",
                name(self.dtype()));
  ETRT_TRY(const int d, wrap_dim(op, dim, self.dim()));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if (out.numel() == 0) return {};
    ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, self));
    T* y = out.data_as<T>();
    if (self.dim() == 0) {
      y[0] = static_cast<T>(Log ? 0.0f : 1.0f);
      return {};
    }
    const int64_t n = self.size(d);
    const auto ost = strides_array(out);
    // Column path: identical identity layouts and a non-innermost dim.
    const bool identity = out.is_contiguous_order() && in.strides == ost;
    if (identity && d != self.dim() - 1) {
      int64_t outer = 1, inner = 1;
      for (int i = 0; i < d; ++i) outer *= self.size(i);
      for (int i = d + 1; i < self.dim(); ++i) inner *= self.size(i);
      if (inner > 1) {
        softmax_columns<T, Log>(in.data, y, outer, n, inner);
        return {};
      }
    }
    if (identity && d == self.dim() - 1) {  // contiguous rows: split across the pool when there is enough work
      const int64_t rows = out.numel() / n;
      const auto run = [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) softmax_row<T, Log>(in.data + r * n, 1, y + r * n, 1, n);
      };
      constexpr int64_t kCost = 16;  // an element's exp and passes, in multiply-adds
      if (rows > 1 && rows * n * kCost >= min_parallel_work()) parallel_for(rows, 1, run);
      else run(0, rows);
      return {};
    }
    Shape walk = shape_of(self.sizes());
    walk.sizes[d] = 1;
    const std::array<std::array<int64_t, kMaxDims>, 2> st{in.strides, ost};
    const int64_t xs = in.strides[d], ys = ost[d];
    for_each_offset<2>(walk, st, [&](const std::array<int64_t, 2>& off) {
      softmax_row<T, Log>(in.data + off[0], xs, y + off[1], ys, n);
    });
    return {};
  });
}

}  // namespace detail

template <class Dtypes>
Status softmax_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  if (half_to_float && out.dtype() != ScalarType::Float)
    return fail(Error::InvalidArgument, "_softmax.out: half_to_float needs a Float output, got ", name(out.dtype()));
  return detail::softmax_impl<Dtypes, false>("_softmax.out", ctx, self, dim, half_to_float, out);
}

template <class Dtypes>
Status log_softmax_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  if (half_to_float && out.dtype() != ScalarType::Float)
    return fail(Error::InvalidArgument, "_log_softmax.out: half_to_float needs a Float output, got ",
                name(out.dtype()));
  return detail::softmax_impl<Dtypes, true>("_log_softmax.out", ctx, self, dim, half_to_float, out);
}

template <class Dtypes>
Status softmax_int_out(KernelContext& ctx, const Tensor& self, int64_t dim, std::optional<ScalarType> dtype,
                       Tensor& out) {
  ETRT_CHECK_OK(check_dtype_arg("softmax.int_out", dtype, out));
  return detail::softmax_impl<Dtypes, false>("softmax.int_out", ctx, self, dim, dtype.has_value(), out);
}

}  // namespace etrt::kernels
