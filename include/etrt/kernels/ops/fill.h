// Factories and fills: full, full_like, fill, zeros, ones, arange, empty.
#pragma once

#include <cmath>

#include "etrt/kernels/util/pointwise_util.h"

namespace etrt::kernels {

namespace detail {
/// Sets every element of `out` (whatever its layout: all numel elements are written) to `v`.
template <class Dtypes>
Status fill_value(std::string_view op, Tensor& out, const Scalar& v) {
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T x = convert<T>(scalar_as<compute_t<T>>(v));
    T* o = out.data_as<T>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = x;
    return {};
  });
}

inline Status check_sizes(std::string_view op, std::span<const int64_t> size) {
  for (int64_t s : size)
    if (s < 0) return fail(Error::InvalidArgument, op, ": negative size in ", shape_str(size));
  return {};
}

/// full, zeros and ones: `out` resized to `size` and filled with `v`.
template <class Dtypes>
Status full(std::string_view op, KernelContext& ctx, std::span<const int64_t> size, const Scalar& v, Tensor& out) {
  ETRT_CHECK_OK(check_sizes(op, size));
  ETRT_CHECK_OK(ctx.resize(op, out, size));
  return fill_value<Dtypes>(op, out, v);
}
}  // namespace detail

template <class Dtypes>
Status full_out(KernelContext& ctx, std::span<const int64_t> size, const Scalar& fill_value, Tensor& out) {
  return detail::full<Dtypes>("full.out", ctx, size, fill_value, out);
}

template <class Dtypes>
Status full_like_out(KernelContext& ctx, const Tensor& self, const Scalar& fill_value, const EValue& /*memory_format*/,
                     Tensor& out) {
  constexpr std::string_view op = "full_like.out";
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return detail::fill_value<Dtypes>(op, out, fill_value);
}

template <class Dtypes>
Status fill_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& value, Tensor& out) {
  constexpr std::string_view op = "fill.Scalar_out";
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return detail::fill_value<Dtypes>(op, out, value);
}

template <class Dtypes>
Status fill_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& value, Tensor& out) {
  constexpr std::string_view op = "fill.Tensor_out";
  if (value.dim() != 0)
    return fail(Error::InvalidArgument, op, ": value must be a 0-dimensional tensor, got ", value.dim(),
                " dimensions");
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  Scalar s;
  if (value.dtype() == ScalarType::Bool) {
    s.v = *static_cast<const uint8_t*>(value.data()) != 0;
  } else if (is_floating(value.dtype())) {
    const auto load = loader_for<double>(value.dtype());
    s.v = load(value.data(), 0);
  } else if (is_integral(value.dtype(), false)) {
    const auto load = loader_for<int64_t>(value.dtype());
    s.v = load(value.data(), 0);
  } else {
    return fail(Error::InvalidArgument, op, ": unsupported value dtype ", name(value.dtype()));
  }
  return detail::fill_value<Dtypes>(op, out, s);
}

template <class Dtypes>
Status zeros_out(KernelContext& ctx, std::span<const int64_t> size, Tensor& out) {
  return detail::full<Dtypes>("zeros.out", ctx, size, Scalar{int64_t{0}}, out);
}

template <class Dtypes>
Status ones_out(KernelContext& ctx, std::span<const int64_t> size, Tensor& out) {
  return detail::full<Dtypes>("ones.out", ctx, size, Scalar{int64_t{1}}, out);
}

template <class Dtypes>
Status empty_out(KernelContext& ctx, std::span<const int64_t> size, const EValue& /*memory_format*/, Tensor& out) {
  constexpr std::string_view op = "empty.out";
  ETRT_CHECK_OK(detail::check_sizes(op, size));
  return ctx.resize(op, out, size);
}

template <class Dtypes>
Status arange_start_out(KernelContext& ctx, const Scalar& start, const Scalar& end, const Scalar& step, Tensor& out) {
  constexpr std::string_view op = "arange.start_out";
  if (out.dim() != 1) return fail(Error::InvalidArgument, op, ": output must have rank 1, got rank ", out.dim());
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (!std::isfinite(s) || !std::isfinite(e))
    return fail(Error::InvalidArgument, op, ": start and end must be finite, got ", s, " and ", e);
  if (st == 0 || std::isnan(st)) return fail(Error::InvalidArgument, op, ": step must be nonzero");
  if ((st > 0 && e < s) || (st < 0 && e > s))
    return fail(Error::InvalidArgument, op, ": upper bound and lower bound are inconsistent with step sign (start ",
                s, ", end ", e, ", step ", st, ")");
  int64_t n;
  if (!start.is_floating() && !end.is_floating() && !step.is_floating()) {
    // In 128 bits: end - start spans up to 2^64 - 1, and rounding up adds step to it.
    const __int128 a = start.to_int(), b = end.to_int(), c = step.to_int();
    const __int128 span = b - a;
    const __int128 count = c > 0 ? (span + c - 1) / c : (span + c + 1) / c;
    if (count > std::numeric_limits<int64_t>::max())
      return fail(Error::InvalidArgument, op, ": too many elements (start ", start.to_int(), ", end ", end.to_int(),
                  ", step ", step.to_int(), ")");
    n = static_cast<int64_t>(count);
  } else {
    const double nd = std::ceil((e - s) / st);
    if (!(nd < 9.0e18)) return fail(Error::InvalidArgument, op, ": too many elements (", nd, ")");
    n = static_cast<int64_t>(nd);
  }
  if (n < 0) n = 0;
  const int64_t size[1] = {n};
  ETRT_CHECK_OK(ctx.resize(op, out, size));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    T* o = out.data_as<T>();
    using C = compute_t<T>;
    if constexpr (std::is_integral_v<C>) {
      if (!start.is_floating() && !step.is_floating()) {
        // start + i * step wraps as torch's int64 arithmetic does (a floating end can put it beyond int64).
        const uint64_t a = static_cast<uint64_t>(start.to_int()), c = static_cast<uint64_t>(step.to_int());
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(static_cast<int64_t>(a + static_cast<uint64_t>(i) * c));
        return {};
      }
    }
    for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(s + static_cast<double>(i) * st);
    return {};
  });
}

template <class Dtypes>
Status arange_out(KernelContext& ctx, const Scalar& end, Tensor& out) {
  return arange_start_out<Dtypes>(ctx, Scalar{int64_t{0}}, end, Scalar{int64_t{1}}, out);
}

}  // namespace etrt::kernels
