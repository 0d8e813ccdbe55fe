// Activations: relu, gelu, hardtanh, leaky_relu, elu, glu, silu, hardswish, hardsigmoid, logit.
#pragma once

#include <algorithm>
#include <cmath>

#include "etrt/kernels/util/functors.h"  // relu/gelu shared with the CUDA delegate's host and device paths
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/pointwise_util.h"
#include "etrt/kernels/util/vec.h"

namespace etrt::kernels {

template <class Dtypes>
Status relu_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return unary_map<Dtypes>("relu.out", ctx, self, out, [](auto x) { return fn::relu(x); });
}

/// Elements from which the float GELU splits across the worker pool (about 20 us of work on one core).
inline constexpr int64_t kGeluParallelElements = int64_t{1} << 15;

template <class Dtypes>
Status gelu_out(KernelContext& ctx, const Tensor& self, std::string_view approximate, Tensor& out) {
  constexpr std::string_view op = "gelu.out";
  if (approximate == "none" && self.dtype() == ScalarType::Float && out.dtype() == ScalarType::Float) {
    ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
    if (same_dense_layout(out, self)) {  // vectorized erf (vec::erf), split across the pool when large
      const float* x = self.data_as<float>();
      float* y = out.data_as<float>();
      const auto run = [&](int64_t i0, int64_t i1) {
        isa::dispatch_lanes([&]<int L>() ETRT_ISA_INLINE {  // Note [vector lanes per level]
          using V = vec::Vec<L>;
          int64_t i = i0;
          for (; i + L <= i1; i += L) {
            V v, g;
            vec::load(v, x + i);
            vec::gelu_erf(g, v);
            vec::store(y + i, g);
          }
          if (i == i1) return;
          // The tail as one more block on a padded copy: a scalar tail rounds differently from the blocks once the
          // compiler fuses their multiply-adds (GCC does from -O2 on where the target has FMA), and the same x
          // would give results an ulp apart by where it sits.
          float xt[L] = {}, yt[L];
          std::copy(x + i, x + i1, xt);
          V v, g;
          vec::load(v, xt);
          vec::gelu_erf(g, v);
          vec::store(yt, g);
          std::copy(yt, yt + (i1 - i), y + i);
        });
      };
      const int64_t n = out.numel();
      if (n >= kGeluParallelElements) parallel_for(n, 1024, run);
      else run(0, n);
      return {};
    }
  }
  if (approximate == "none")
    return unary_map<Dtypes>(op, ctx, self, out, [](auto x) { return fn::gelu_erf(x); });
  if (approximate == "tanh")
    return unary_map<Dtypes>(op, ctx, self, out, [](auto x) { return fn::gelu_tanh(x); });
  return fail(Error::InvalidArgument, op, ": approximate must be 'none' or 'tanh', got '", approximate, "'");
}

template <class Dtypes>
Status hardtanh_out(KernelContext& ctx, const Tensor& self, const Scalar& min_val, const Scalar& max_val,
                    Tensor& out) {
  constexpr std::string_view op = "hardtanh.out";
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    const C lo = scalar_as<C>(min_val), hi = scalar_as<C>(max_val);
    return map_elementwise<C, C>(op, out, [lo, hi](C x) {
      const C y = x < lo ? lo : x;
      return y > hi ? hi : y;
    }, self);
  });
}

template <class Dtypes>
Status leaky_relu_out(KernelContext& ctx, const Tensor& self, const Scalar& negative_slope, Tensor& out) {
  constexpr std::string_view op = "leaky_relu.out";
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    const C s = scalar_as<C>(negative_slope);
    return map_elementwise<C, C>(op, out, [s](C x) { return x > C(0) ? x : x * s; }, self);
  });
}

template <class Dtypes>
Status elu_out(KernelContext& ctx, const Tensor& self, const Scalar& alpha, const Scalar& scale,
               const Scalar& input_scale, Tensor& out) {
  constexpr std::string_view op = "elu.out";
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    const C neg = static_cast<C>(alpha.to_double() * scale.to_double()), pos = scalar_as<C>(scale),
            in = scalar_as<C>(input_scale);
    return map_elementwise<C, C>(op, out, [=](C x) {
      return x <= C(0) ? static_cast<C>(std::expm1(x * in) * neg) : x * pos;
    }, self);
  });
}

template <class Dtypes>
Status silu_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return unary_map<Dtypes>("silu.out", ctx, self, out, [](auto x) {
    using C = decltype(x);
    return static_cast<C>(x / (C(1) + std::exp(-x)));
  });
}

namespace detail {
/// x + 3 clamped to [0, 6] (NaN stays NaN): the ramp that hardswish and hardsigmoid scale.
template <class C>
C hard_ramp(C x) {
  const C r = x + C(3);
  return r < C(0) ? C(0) : (r > C(6) ? C(6) : r);
}
}  // namespace detail

template <class Dtypes>
Status hardswish_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return unary_map<Dtypes>("hardswish.out", ctx, self, out, [](auto x) {
    using C = decltype(x);
    return static_cast<C>(x * detail::hard_ramp(x) / C(6));
  });
}

template <class Dtypes>
Status hardsigmoid_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return unary_map<Dtypes>("hardsigmoid.out", ctx, self, out, [](auto x) {
    using C = decltype(x);
    return static_cast<C>(detail::hard_ramp(x) / C(6));
  });
}

template <class Dtypes>
Status logit_out(KernelContext& ctx, const Tensor& self, std::optional<double> eps, Tensor& out) {
  constexpr std::string_view op = "logit.out";
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    if (eps) {
      const C lo = static_cast<C>(*eps), hi = static_cast<C>(1.0 - *eps);
      return map_elementwise<C, C>(op, out, [lo, hi](C x) {
        const C z = x < lo ? lo : (x > hi ? hi : x);
        return static_cast<C>(std::log(z / (C(1) - z)));
      }, self);
    }
    return map_elementwise<C, C>(op, out, [](C x) { return static_cast<C>(std::log(x / (C(1) - x))); }, self);
  });
}

/// glu(self, dim): the first half along `dim` times the sigmoid of the second half.
template <class Dtypes>
Status glu_out(KernelContext& ctx, const Tensor& self, int64_t dim, Tensor& out) {
  constexpr std::string_view op = "glu.out";
  if (self.dim() == 0) return fail(Error::InvalidArgument, op, ": glu does not support 0-dimensional tensors");
  ETRT_TRY(const int d, wrap_dim(op, dim, self.dim()));
  if (self.size(d) % 2 != 0)
    return fail(Error::InvalidArgument, op, ": halving dimension must be even, but dimension ", d, " is size ",
                self.size(d));
  Shape shape = shape_of(self.sizes());
  shape.sizes[d] /= 2;
  ETRT_CHECK_OK(ctx.resize(op, out, shape.span()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, self));
    const int64_t half_off = shape.sizes[d] * in.strides[d];
    T* o = out.data_as<T>();
    const T* a = in.data;
    const T* b = in.data + half_off;
    const std::array<std::array<int64_t, kMaxDims>, 2> strides{strides_array(out), in.strides};
    for_each_offset<2>(shape, strides, [&](const std::array<int64_t, 2>& off) {
      const C x = static_cast<C>(a[off[1]]), g = static_cast<C>(b[off[1]]);
      o[off[0]] = static_cast<T>(x / (C(1) + std::exp(-g)));
    });
    return {};
  });
}

}  // namespace etrt::kernels
