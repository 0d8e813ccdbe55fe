// Elementwise math: unary functions, rounding, sign, logical_not, bitwise_not, isnan/isinf, pow (Tensor and Scalar
// bases), clamp, maximum/minimum, remainder, fmod, floor_divide, atan2.
//
// All compute in the output dtype (Half/BFloat16 in float); inputs of another dtype are converted on load.
#pragma once

#include <cmath>
#include <type_traits>

#include "etrt/kernels/util/functors.h"  // functions the CUDA delegate also computes: one definition for both
#include "etrt/kernels/util/pointwise_util.h"
#include "etrt/kernels/util/sigmoid.h"

namespace etrt::kernels {

// ---- floating unary functions --------------------------------------------------------------------------------

#define ETRT_UNARY_FLOAT_OP(NAME, EXPR)                                                             \
  template <class Dtypes>                                                                           \
  Status NAME##_out(KernelContext& ctx, const Tensor& self, Tensor& out) {                          \
    return unary_map<Dtypes>(#NAME ".out", ctx, self, out, [](auto x) {                             \
      using C = decltype(x);                                                                        \
      return static_cast<C>(EXPR);                                                                  \
    });                                                                                             \
  }

ETRT_UNARY_FLOAT_OP(exp, fn::exp(x))
ETRT_UNARY_FLOAT_OP(expm1, std::expm1(x))
ETRT_UNARY_FLOAT_OP(log, std::log(x))
ETRT_UNARY_FLOAT_OP(log1p, std::log1p(x))
ETRT_UNARY_FLOAT_OP(log2, std::log2(x))
ETRT_UNARY_FLOAT_OP(log10, std::log10(x))
ETRT_UNARY_FLOAT_OP(sqrt, fn::sqrt(x))
ETRT_UNARY_FLOAT_OP(rsqrt, fn::rsqrt(x))
ETRT_UNARY_FLOAT_OP(reciprocal, C(1) / x)
ETRT_UNARY_FLOAT_OP(sin, std::sin(x))
ETRT_UNARY_FLOAT_OP(cos, std::cos(x))
ETRT_UNARY_FLOAT_OP(tan, std::tan(x))
ETRT_UNARY_FLOAT_OP(asin, std::asin(x))
ETRT_UNARY_FLOAT_OP(acos, std::acos(x))
ETRT_UNARY_FLOAT_OP(atan, std::atan(x))
ETRT_UNARY_FLOAT_OP(sinh, std::sinh(x))
ETRT_UNARY_FLOAT_OP(cosh, std::cosh(x))
ETRT_UNARY_FLOAT_OP(tanh, fn::tanh(x))
ETRT_UNARY_FLOAT_OP(acosh, std::acosh(x))
ETRT_UNARY_FLOAT_OP(asinh, std::asinh(x))
ETRT_UNARY_FLOAT_OP(atanh, std::atanh(x))
ETRT_UNARY_FLOAT_OP(erf, std::erf(x))
#undef ETRT_UNARY_FLOAT_OP

/// sigmoid: a dense float tensor into a float output of the same layout takes the vector loop (util/sigmoid.h: the
/// vector exp, within 2 ulp of libm's, as torch's own vectorized sigmoid is within an ulp or two of the scalar one):
/// a libm call per element made this the slowest small node of an LLM's feed-forward gate. Other dtypes and layouts
/// take the scalar form.
template <class Dtypes>
Status sigmoid_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  if (self.dtype() == ScalarType::Float && out.dtype() == ScalarType::Float) {
    ETRT_CHECK_OK(ctx.resize("sigmoid.out", out, self.sizes()));
    if (same_dense_layout(out, self)) {
      const float* x = self.data_as<float>();
      float* y = out.data_as<float>();
      const int64_t n = out.numel();
      sigmoid_all(x, y, n, [](const auto& v) ETRT_ISA_INLINE { return v; });
      return {};
    }
  }
  return unary_map<Dtypes>("sigmoid.out", ctx, self, out, [](auto x) {
    using C = decltype(x);
    return static_cast<C>(fn::sigmoid(x));
  });
}

// ---- real unary functions (integers pass through where the function is the identity on them) -----------------

template <class Dtypes>
Status neg_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return unary_map<Dtypes>("neg.out", ctx, self, out, [](auto x) { return fn::neg(x); });
}

template <class Dtypes>
Status abs_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return unary_map<Dtypes>("abs.out", ctx, self, out, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_unsigned_v<C>) return x;
    else if constexpr (std::is_floating_point_v<C>) return std::fabs(x);
    else return static_cast<C>(x < 0 ? -x : x);
  });
}

#define ETRT_ROUNDING_OP(NAME, FN)                                                \
  template <class Dtypes>                                                         \
  Status NAME##_out(KernelContext& ctx, const Tensor& self, Tensor& out) {        \
    return unary_map<Dtypes>(#NAME ".out", ctx, self, out, [](auto x) {           \
      using C = decltype(x);                                                      \
      if constexpr (std::is_floating_point_v<C>) return static_cast<C>(FN(x));    \
      else return x;                                                              \
    });                                                                           \
  }
ETRT_ROUNDING_OP(floor, std::floor)
ETRT_ROUNDING_OP(ceil, std::ceil)
ETRT_ROUNDING_OP(trunc, std::trunc)
ETRT_ROUNDING_OP(round, std::nearbyint)  // half to even, as torch.round
#undef ETRT_ROUNDING_OP

/// sign: -1, 0 or 1; NaN gives 0 as torch's CPU kernel does.
template <class Dtypes>
Status sign_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return unary_map<Dtypes>("sign.out", ctx, self, out, [](auto x) {
    using C = decltype(x);
    return static_cast<C>(static_cast<int>(C(0) < x) - static_cast<int>(x < C(0)));
  });
}

template <class Dtypes>
Status logical_not_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  constexpr std::string_view op = "logical_not.out";
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  if (!contains(Dtypes{}, out.dtype()))
    return fail(Error::InvalidArgument, op, ": unsupported output dtype ", name(out.dtype()));
  return map_mixed<bool>(op, out, types<bool>{}, [](bool x) { return !x; }, self);
}

template <class Dtypes>
Status bitwise_not_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return unary_map<Dtypes>("bitwise_not.out", ctx, self, out, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_same_v<C, bool>) return !x;
    else return static_cast<C>(~x);
  });
}

namespace detail {
template <class Dtypes, class F>
Status float_predicate(std::string_view op, KernelContext& ctx, const Tensor& self, Tensor& out, F&& f) {
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  if (out.dtype() != ScalarType::Bool)
    return fail(Error::InvalidArgument, op, ": output dtype must be Bool, got ", name(out.dtype()));
  return visit(self.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    return map_mixed<bool>(op, out, types<T>{}, [&](T x) {
      if constexpr (std::is_integral_v<T>) return false;
      else return static_cast<bool>(f(static_cast<compute_t<T>>(x)));
    }, self);
  });
}
}  // namespace detail

template <class Dtypes>
Status isnan_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::float_predicate<Dtypes>("isnan.out", ctx, self, out, [](auto x) { return std::isnan(x); });
}
template <class Dtypes>
Status isinf_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return detail::float_predicate<Dtypes>("isinf.out", ctx, self, out, [](auto x) { return std::isinf(x); });
}

// ---- pow ---------------------------------------------------------------------------------------------------------

namespace detail {
/// Integer power by squaring; a negative exponent gives 0 except for bases 1 and -1 (torch's rule).
template <class C>
C ipow(C base, C exp) {
  if constexpr (std::is_same_v<C, bool>) {
    return base || !exp;
  } else {
    if constexpr (std::is_signed_v<C>) {
      if (exp < 0) {
        if (base == 1) return 1;
        if (base == -1) return (exp % 2 == 0) ? 1 : -1;
        return 0;
      }
    }
    // Products wrap like torch's; multiplying in uint64 keeps the wrap defined (signed overflow is UB, and
    // uint16 * uint16 would promote to a signed int that can overflow).
    auto mul = [](C a, C b) { return static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); };
    C result = 1;
    while (exp) {
      if (exp & 1) result = mul(result, base);
      exp = static_cast<C>(exp >> 1);
      base = mul(base, base);
    }
    return result;
  }
}
}  // namespace detail

template <class Dtypes>
Status pow_tensor_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& exponent, Tensor& out) {
  constexpr std::string_view op = "pow.Tensor_Scalar_out";
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    if constexpr (std::is_integral_v<C>) {
      if (exponent.is_floating())
        return fail(Error::InvalidArgument, op, ": a floating exponent needs a floating output, got ",
                    name(out.dtype()));
      if constexpr (std::is_signed_v<C>) {
        if (exponent.to_int() < 0)
          return fail(Error::InvalidArgument, op, ": integers to negative integer powers are not allowed");
      }
      const C e = scalar_as<C>(exponent);
      return map_elementwise<C, C>(op, out, [e](C x) { return detail::ipow<C>(x, e); }, self);
    } else {
      const C e = scalar_as<C>(exponent);
      if (e == C(2)) return map_elementwise<C, C>(op, out, [](C x) { return x * x; }, self);
      if (e == C(0.5)) return map_elementwise<C, C>(op, out, [](C x) { return std::sqrt(x); }, self);
      if (e == C(1)) return map_elementwise<C, C>(op, out, [](C x) { return x; }, self);
      return map_elementwise<C, C>(op, out, [e](C x) { return static_cast<C>(std::pow(x, e)); }, self);
    }
  });
}

/// pow.Scalar_out: a Scalar base raised to a tensor of exponents. The computation runs in torch's result type for
/// (wrapped number, tensor): the exponent's dtype, Long for a Bool exponent under an integral base, Float for an
/// integral exponent under a floating base; the result is then stored into out's dtype. A floating result cannot
/// go into an integral output (torch refuses that cast too).
template <class Dtypes>
Status pow_scalar_out(KernelContext& ctx, const Scalar& self, const Tensor& exponent, Tensor& out) {
  constexpr std::string_view op = "pow.Scalar_out";
  const ScalarType common = result_type_with_scalar(exponent.dtype(), self.is_floating(), self.is_bool());
  if (!contains(Dtypes{}, common))
    return fail(Error::InvalidArgument, op, ": pow is not implemented for a ", self.is_bool() ? "bool" : "number",
                " base with a ", name(exponent.dtype()), " exponent (result type ", name(common), ")");
  if (!contains(Dtypes{}, out.dtype()))
    return fail(Error::InvalidArgument, op, ": unsupported output dtype ", name(out.dtype()));
  if (is_floating(common) && !is_floating(out.dtype()))
    return fail(Error::InvalidArgument, op, ": result type ", name(common), " can't be cast to the output dtype ",
                name(out.dtype()));
  ETRT_CHECK_OK(ctx.resize(op, out, exponent.sizes()));
  return visit(common, Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    const C base = scalar_as<C>(self);
    if constexpr (std::is_integral_v<C>)
      return map_mixed<C>(op, out, types<C>{}, [base](C e) { return detail::ipow<C>(base, e); }, exponent);
    else
      return map_mixed<C>(op, out, types<C>{}, [base](C e) { return static_cast<C>(std::pow(base, e)); }, exponent);
  });
}

template <class Dtypes>
Status pow_tensor_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& exponent, Tensor& out) {
  return binary_arith<Dtypes>("pow.Tensor_Tensor_out", ctx, self, exponent, out, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_integral_v<C>) return detail::ipow<C>(x, y);
    else return static_cast<C>(std::pow(x, y));
  });
}

// ---- clamp, maximum, minimum -------------------------------------------------------------------------------------

namespace detail {
template <class C>
inline C clamp_lo(C x, C lo) {
  return x < lo ? lo : x;  // NaN x stays NaN
}
template <class C>
inline C clamp_hi(C x, C hi) {
  return x > hi ? hi : x;
}
template <class C>
inline C nan_max(C x, C y) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(x)) return x;
    if (std::isnan(y)) return y;
  }
  return x > y ? x : y;
}
template <class C>
inline C nan_min(C x, C y) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(x)) return x;
    if (std::isnan(y)) return y;
  }
  return x < y ? x : y;
}
}  // namespace detail

template <class Dtypes>
Status clamp_out(KernelContext& ctx, const Tensor& self, const std::optional<Scalar>& min,
                 const std::optional<Scalar>& max, Tensor& out) {
  constexpr std::string_view op = "clamp.out";
  if (!min && !max) return fail(Error::InvalidArgument, op, ": at least one of 'min' or 'max' must not be None");
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    if (min && max) {
      const C lo = scalar_as<C>(*min), hi = scalar_as<C>(*max);
      return map_elementwise<C, C>(op, out, [lo, hi](C x) { return detail::clamp_hi(detail::clamp_lo(x, lo), hi); },
                                   self);
    }
    if (min) {
      const C lo = scalar_as<C>(*min);
      return map_elementwise<C, C>(op, out, [lo](C x) { return detail::clamp_lo(x, lo); }, self);
    }
    const C hi = scalar_as<C>(*max);
    return map_elementwise<C, C>(op, out, [hi](C x) { return detail::clamp_hi(x, hi); }, self);
  });
}

template <class Dtypes>
Status clamp_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor* min, const Tensor* max, Tensor& out) {
  constexpr std::string_view op = "clamp.Tensor_out";
  if (!min && !max) return fail(Error::InvalidArgument, op, ": at least one of 'min' or 'max' must not be None");
  Shape shape = shape_of(self.sizes());
  if (min) {
    ETRT_TRY(shape, broadcast_shapes(op, shape.span(), min->sizes()));
  }
  if (max) {
    ETRT_TRY(shape, broadcast_shapes(op, shape.span(), max->sizes()));
  }
  ETRT_CHECK_OK(ctx.resize(op, out, shape.span()));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    if (min && max)
      return map_elementwise<C, C>(
          op, out, [](C x, C lo, C hi) { return detail::clamp_hi(detail::clamp_lo(x, lo), hi); }, self, *min, *max);
    if (min) return map_elementwise<C, C>(op, out, [](C x, C lo) { return detail::clamp_lo(x, lo); }, self, *min);
    return map_elementwise<C, C>(op, out, [](C x, C hi) { return detail::clamp_hi(x, hi); }, self, *max);
  });
}

template <class Dtypes>
Status maximum_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return binary_arith<Dtypes>("maximum.out", ctx, self, other, out,
                              [](auto x, auto y) { return detail::nan_max(x, y); });
}
template <class Dtypes>
Status minimum_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return binary_arith<Dtypes>("minimum.out", ctx, self, other, out,
                              [](auto x, auto y) { return detail::nan_min(x, y); });
}

// ---- remainder, fmod, floor_divide, atan2 ------------------------------------------------------------------------

namespace detail {
/// Runs an integer-capable binary op and reports integer division by zero (which has no value to store).
template <class Dtypes, class F>
Status int_checked_binary(std::string_view op, KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out,
                          F&& f) {
  bool div_by_zero = false;
  ETRT_CHECK_OK(binary_arith<Dtypes>(op, ctx, a, b, out, [&](auto x, auto y) { return f(x, y, div_by_zero); }));
  if (div_by_zero) return fail(Error::InvalidArgument, op, ": integer division by zero");
  return {};
}
/// The Scalar overload: `b` as a rank-0 tensor of out's dtype.
template <class Dtypes, class F>
Status int_checked_binary_scalar(std::string_view op, KernelContext& ctx, const Tensor& a, const Scalar& b,
                                 Tensor& out, F&& f) {
  return with_scalar_as<Dtypes>(op, b, out.dtype(),
                                [&](const Tensor& bt) { return int_checked_binary<Dtypes>(op, ctx, a, bt, out, f); });
}

/// Integer x / y (Quotient) or x % y without C++'s undefined cases: y == 0 sets `dz` (there is no value to store)
/// and y == -1, which overflows for the most negative x, gives torch's wrapped -x or 0. `rest` handles other y.
template <bool Quotient, class C, class F>
C guarded_int_div(C x, C y, bool& dz, F rest) {
  if (y == 0) {
    dz = true;
    return 0;
  }
  if constexpr (std::is_signed_v<C>) {
    if (y == -1) return Quotient ? static_cast<C>(-static_cast<std::make_unsigned_t<C>>(x)) : C(0);
  }
  return rest(x, y);
}

struct RemainderFn {
  template <class C>
  C operator()(C x, C y, bool& dz) const {
    if constexpr (std::is_integral_v<C>) {
      return guarded_int_div<false>(x, y, dz, [](C a, C b) {
        C r = static_cast<C>(a % b);
        if constexpr (std::is_signed_v<C>) {
          if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
        }
        return r;
      });
    } else {
      C r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
  }
};

struct FmodFn {
  template <class C>
  C operator()(C x, C y, bool& dz) const {
    if constexpr (std::is_integral_v<C>) {
      return guarded_int_div<false>(x, y, dz, [](C a, C b) { return static_cast<C>(a % b); });
    } else {
      return std::fmod(x, y);
    }
  }
};

struct FloorDivFn {
  template <class C>
  C operator()(C x, C y, bool& dz) const {
    if constexpr (std::is_integral_v<C>) {
      return guarded_int_div<true>(x, y, dz, [](C a, C b) {
        C q = static_cast<C>(a / b);
        if constexpr (std::is_signed_v<C>) {
          if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        }
        return q;
      });
    } else {
      if (y == 0) return x / y;
      const C mod = std::fmod(x, y);
      C div = (x - mod) / y;
      if (mod != 0 && ((y < 0) != (mod < 0))) div -= C(1);
      C fl;
      if (div != 0) {
        fl = std::floor(div);
        if (div - fl > C(0.5)) fl += C(1);
      } else {
        fl = std::copysign(C(0), x / y);
      }
      return fl;
    }
  }
};
}  // namespace detail

template <class Dtypes>
Status remainder_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return detail::int_checked_binary<Dtypes>("remainder.Tensor_out", ctx, self, other, out, detail::RemainderFn{});
}
template <class Dtypes>
Status remainder_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& other, Tensor& out) {
  return detail::int_checked_binary_scalar<Dtypes>("remainder.Scalar_out", ctx, self, other, out, detail::RemainderFn{});
}
template <class Dtypes>
Status fmod_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return detail::int_checked_binary<Dtypes>("fmod.Tensor_out", ctx, self, other, out, detail::FmodFn{});
}
template <class Dtypes>
Status fmod_scalar_out(KernelContext& ctx, const Tensor& self, const Scalar& other, Tensor& out) {
  return detail::int_checked_binary_scalar<Dtypes>("fmod.Scalar_out", ctx, self, other, out, detail::FmodFn{});
}
template <class Dtypes>
Status floor_divide_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return detail::int_checked_binary<Dtypes>("floor_divide.out", ctx, self, other, out, detail::FloorDivFn{});
}
template <class Dtypes>
Status atan2_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return binary_arith<Dtypes>("atan2.out", ctx, self, other, out, [](auto x, auto y) { return std::atan2(x, y); });
}

}  // namespace etrt::kernels
