// Per-element code shared by the CUDA delegate's host and device paths and by the portable kernels.
//
// One definition of each function means the CPU path the tests check and the kernels the GPU runs compute the
// same expression; only the libm underneath differs (glibc vs CUDA's, a few ulps apart for exp/erf/tanh, while
// sqrt and division are correctly rounded on both because nvcc's defaults keep -prec-div/-prec-sqrt on).
//
// Also here: the N-operand strided index walk that the elementwise, copy, permute and expand kernels share.
#pragma once

#include <math.h>  // ::expf, ::erff, ... : the float overloads that both glibc and CUDA's device library provide

#include <cstdint>

#include "etrt/core/tensor.h"

#ifdef __CUDACC__
#define ETRT_HD __host__ __device__
#else
#define ETRT_HD
#endif

namespace etrt::fn {

namespace detail {
// Named float/double overloads instead of std::: device code cannot call std::exp(float) everywhere, and the
// host side resolves to the same libm entry points std:: would.
ETRT_HD inline float exp_(float x) { return ::expf(x); }
ETRT_HD inline double exp_(double x) { return ::exp(x); }
ETRT_HD inline float erf_(float x) { return ::erff(x); }
ETRT_HD inline double erf_(double x) { return ::erf(x); }
ETRT_HD inline float tanh_(float x) { return ::tanhf(x); }
ETRT_HD inline double tanh_(double x) { return ::tanh(x); }
ETRT_HD inline float sqrt_(float x) { return ::sqrtf(x); }
ETRT_HD inline double sqrt_(double x) { return ::sqrt(x); }
}  // namespace detail

// T is float or double for the transcendental functions; relu and neg also serve the portable integer kernels.

template <class T>
ETRT_HD inline T relu(T x) {
  return x < T(0) ? T(0) : x;  // NaN stays NaN (the comparison is false)
}
template <class T>
ETRT_HD inline T gelu_erf(T x) {
  return T(0.5) * x * (T(1) + detail::erf_(x * T(0.70710678118654752440)));
}
template <class T>
ETRT_HD inline T gelu_tanh(T x) {
  const T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + detail::tanh_(inner));
}
template <class T>
ETRT_HD inline T sigmoid(T x) {
  return T(1) / (T(1) + detail::exp_(-x));
}
template <class T>
ETRT_HD inline T tanh(T x) {
  return detail::tanh_(x);
}
template <class T>
ETRT_HD inline T exp(T x) {
  return detail::exp_(x);
}
template <class T>
ETRT_HD inline T neg(T x) {
  return static_cast<T>(-x);  // the cast keeps small integer types from widening
}
template <class T>
ETRT_HD inline T sqrt(T x) {
  return detail::sqrt_(x);
}
template <class T>
ETRT_HD inline T rsqrt(T x) {
  // Not rsqrtf: CUDA's is approximate, and the host has none. 1/sqrt is correctly rounded twice on both sides.
  return T(1) / detail::sqrt_(x);
}

// ---- the delegate's op set as functor types (kernels are templates over these) --------------------------------

enum class UnaryKind : uint8_t { Relu, GeluErf, GeluTanh, Sigmoid, Tanh, Exp, Neg, Sqrt, Rsqrt, AddScalar, MulScalar };
enum class BinaryKind : uint8_t { Add, Sub, Mul, Div };

struct ReluFn { ETRT_HD float operator()(float x) const { return relu(x); } };
struct GeluErfFn { ETRT_HD float operator()(float x) const { return gelu_erf(x); } };
struct GeluTanhFn { ETRT_HD float operator()(float x) const { return gelu_tanh(x); } };
struct SigmoidFn { ETRT_HD float operator()(float x) const { return sigmoid(x); } };
struct TanhFn { ETRT_HD float operator()(float x) const { return fn::tanh(x); } };
struct ExpFn { ETRT_HD float operator()(float x) const { return fn::exp(x); } };
struct NegFn { ETRT_HD float operator()(float x) const { return neg(x); } };
struct SqrtFn { ETRT_HD float operator()(float x) const { return fn::sqrt(x); } };
struct RsqrtFn { ETRT_HD float operator()(float x) const { return rsqrt(x); } };
struct AddScalarFn {
  float s;
  ETRT_HD float operator()(float x) const { return x + s; }
};
struct MulScalarFn {
  float s;
  ETRT_HD float operator()(float x) const { return x * s; }
};

// torch computes float32 add/sub with alpha as a + alpha * b in float.
struct AddFn {
  float alpha;
  ETRT_HD float operator()(float a, float b) const { return a + alpha * b; }
};
struct SubFn {
  float alpha;
  ETRT_HD float operator()(float a, float b) const { return a - alpha * b; }
};
struct MulFn { ETRT_HD float operator()(float a, float b) const { return a * b; } };
struct DivFn { ETRT_HD float operator()(float a, float b) const { return a / b; } };

// The mask ops: bool elements are one byte; any nonzero byte reads as true, results are 0 or 1.
struct EqScalarFn {
  float s;
  ETRT_HD uint8_t operator()(float x) const { return x == s; }  // NaN is equal to nothing, -inf equals -inf
};
struct LogicalNotFn { ETRT_HD uint8_t operator()(uint8_t x) const { return x == 0; } };
ETRT_HD inline float select_where(uint8_t cond, float a, float b) { return cond ? a : b; }

/// Calls `f(functor)` with the functor for `kind` (`param`: the scalar of ADD_SCALAR / MUL_SCALAR), so each path
/// instantiates its loop or kernel once per op instead of switching per element.
template <class F>
inline auto visit_unary(UnaryKind kind, float param, F&& f) {
  switch (kind) {
    case UnaryKind::Relu: return f(ReluFn{});
    case UnaryKind::GeluErf: return f(GeluErfFn{});
    case UnaryKind::GeluTanh: return f(GeluTanhFn{});
    case UnaryKind::Sigmoid: return f(SigmoidFn{});
    case UnaryKind::Tanh: return f(TanhFn{});
    case UnaryKind::Exp: return f(ExpFn{});
    case UnaryKind::Neg: return f(NegFn{});
    case UnaryKind::Sqrt: return f(SqrtFn{});
    case UnaryKind::Rsqrt: return f(RsqrtFn{});
    case UnaryKind::AddScalar: return f(AddScalarFn{param});
    case UnaryKind::MulScalar: break;
  }
  return f(MulScalarFn{param});
}

template <class F>
inline auto visit_binary(BinaryKind kind, float alpha, F&& f) {
  switch (kind) {
    case BinaryKind::Add: return f(AddFn{alpha});
    case BinaryKind::Sub: return f(SubFn{alpha});
    case BinaryKind::Mul: return f(MulFn{});
    case BinaryKind::Div: break;
  }
  return f(DivFn{});
}

// ---- strided walks ----------------------------------------------------------------------------------------------

/// N operands walked together over one shape: element `i` (row-major over `sizes`) of operand k lives at
/// `strides[k] . coords(i)` elements from its base. Strides may be 0 (broadcast) or permuted. Passed by value to
/// kernels, so it stays a plain aggregate.
template <int N>
struct Strided {
  int32_t rank = 0;
  int64_t numel = 1;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  ETRT_HD void offsets(int64_t i, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t c = i % sizes[d];
      i /= sizes[d];
      for (int k = 0; k < N; ++k) off[k] += c * strides[k][d];
    }
  }
};

/// Drops size-1 dimensions and merges neighbours that every operand walks as one, so same-layout operands become
/// rank 1 and the per-element index arithmetic (a 64-bit division per dimension) mostly disappears.
template <int N>
inline void coalesce(Strided<N>& s) {
  int r = 0;
  for (int d = 0; d < s.rank; ++d) {
    if (s.sizes[d] == 1) continue;
    bool merge = r > 0;
    for (int k = 0; merge && k < N; ++k) merge = s.strides[k][r - 1] == s.strides[k][d] * s.sizes[d];
    if (merge) {
      s.sizes[r - 1] *= s.sizes[d];
      for (int k = 0; k < N; ++k) s.strides[k][r - 1] = s.strides[k][d];
    } else {
      s.sizes[r] = s.sizes[d];
      for (int k = 0; k < N; ++k) s.strides[k][r] = s.strides[k][d];
      ++r;
    }
  }
  for (int d = r; d < kMaxDims; ++d) {
    s.sizes[d] = 0;
    for (int k = 0; k < N; ++k) s.strides[k][d] = 0;
  }
  s.rank = r;
}

}  // namespace etrt::fn
