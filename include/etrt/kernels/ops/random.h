// Random sampling: rand (uniform [0, 1)), randn (standard normal) and native_dropout.
//
// Note [random streams]: each call draws from its own generator (std::mt19937_64), seeded by mixing a process-wide
// base seed with a call counter. Successive calls therefore differ, a process run is reproducible from its seed, and
// no generator state is shared between threads running methods concurrently. set_random_seed() restarts the
// sequence (the role torch.manual_seed plays); the values themselves are not torch's, whose generators are not
// reproduced.
#pragma once

#include <atomic>
#include <cmath>
#include <numbers>
#include <random>

#include "etrt/kernels/util/movement_util.h"
#include "etrt/kernels/util/pointwise_util.h"

namespace etrt::kernels {

namespace random_detail {
struct StreamState {
  std::atomic<uint64_t> seed{0x853c49e6748fea9bull};
  std::atomic<uint64_t> calls{0};
};
inline StreamState& stream_state() {
  static StreamState s;
  return s;
}

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The generator for one kernel call (Note [random streams]).
inline std::mt19937_64 call_generator() {
  StreamState& s = stream_state();
  const uint64_t n = s.calls.fetch_add(1, std::memory_order_relaxed);
  return std::mt19937_64(splitmix64(s.seed.load(std::memory_order_relaxed) ^ splitmix64(n)));
}

/// A uniform value in [0, 1) with as many random bits as T's significand holds, so that rounding to T can never
/// produce 1 (a float sample rounded to Half could).
template <class T>
inline T uniform01(std::mt19937_64& g) {
  constexpr int kBits = std::is_same_v<T, double>  ? 53
                        : std::is_same_v<T, float> ? 24
                        : std::is_same_v<T, Half>  ? 11
                                                   : 8;  // BFloat16
  const uint64_t r = g() >> (64 - kBits);
  return convert<T>(static_cast<double>(r) * std::ldexp(1.0, -kBits));
}

/// Uniform in [0, 1) with 53 bits, for Bernoulli draws compared against a double probability.
inline double uniform01_double(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }
}  // namespace random_detail

/// Restarts the random sequence of rand/randn/native_dropout from `seed` (Note [random streams]).
inline void set_random_seed(uint64_t seed) {
  random_detail::stream_state().seed.store(seed, std::memory_order_relaxed);
  random_detail::stream_state().calls.store(0, std::memory_order_relaxed);
}

namespace random_detail {
inline Status resize_to_size(std::string_view op, KernelContext& ctx, std::span<const int64_t> size, Tensor& out) {
  for (int64_t s : size)
    if (s < 0) return fail(Error::InvalidArgument, op, ": size ", shape_str(size), " has a negative dimension");
  if (checked_numel(size) < 0) return fail(Error::InvalidArgument, op, ": size ", shape_str(size), " is too large");
  return ctx.resize(op, out, size);
}
}  // namespace random_detail

/// rand.out: independent uniform samples in [0, 1). The samples are i.i.d., so the storage is filled in memory
/// order whatever the dim order.
template <class Dtypes>
Status rand_out(KernelContext& ctx, std::span<const int64_t> size, Tensor& out) {
  constexpr std::string_view op = "rand.out";
  ETRT_CHECK_OK(random_detail::resize_to_size(op, ctx, size, out));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    std::mt19937_64 g = random_detail::call_generator();
    T* o = out.data_as<T>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = random_detail::uniform01<T>(g);
    return {};
  });
}

/// randn.out: independent standard normal samples (Box-Muller in double, two samples per pair of uniforms).
template <class Dtypes>
Status randn_out(KernelContext& ctx, std::span<const int64_t> size, Tensor& out) {
  constexpr std::string_view op = "randn.out";
  ETRT_CHECK_OK(random_detail::resize_to_size(op, ctx, size, out));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    std::mt19937_64 g = random_detail::call_generator();
    T* o = out.data_as<T>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; i += 2) {
      const double u1 = 1.0 - random_detail::uniform01_double(g);  // (0, 1]: log(u1) is finite
      const double u2 = random_detail::uniform01_double(g);
      const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * std::numbers::pi * u2;
      o[i] = convert<T>(r * std::cos(a));
      if (i + 1 < n) o[i + 1] = convert<T>(r * std::sin(a));
    }
    return {};
  });
}

/// native_dropout.out: in training (train None or true) each element is kept with probability 1 - p and scaled by
/// 1 / (1 - p) (0 when p == 1); out0 = input * mask * scale, so a dropped NaN or inf still gives NaN, as in torch.
/// out1 is the Bool keep mask. Outside training out0 is a copy of the input and the mask is all true.
template <class Dtypes>
Status native_dropout_out(KernelContext& ctx, const Tensor& input, double p, std::optional<bool> train, Tensor& out0,
                          Tensor& out1) {
  constexpr std::string_view op = "native_dropout.out";
  const bool training = train.value_or(true);
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, input, out0));
  if (out1.dtype() != ScalarType::Bool)
    return fail(Error::InvalidArgument, op, ": the mask output must be Bool, got ", name(out1.dtype()));
  if (training && !is_floating(input.dtype()))
    return fail(Error::InvalidArgument, op, ": training dropout needs a floating input, got ", name(input.dtype()));
  if (training && !(p >= 0.0 && p <= 1.0))
    return fail(Error::InvalidArgument, op, ": dropout probability must be in [0, 1], got ", p);
  ETRT_CHECK_OK(ctx.resize(op, out0, input.sizes()));
  ETRT_CHECK_OK(ctx.resize(op, out1, input.sizes()));
  const int64_t n = input.numel();
  if (n == 0) return {};
  bool* mask = out1.data_as<bool>();
  if (!training) {
    std::fill(mask, mask + n, true);  // a constant fill suits any dim order
    return copy_convert<Dtypes>(op, input, out0);
  }
  return visit(out0.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    if constexpr (std::is_floating_point_v<C>) {
      const double keep = 1.0 - p;
      const C scale = keep == 0.0 ? C(0) : static_cast<C>(1.0 / keep);
      std::mt19937_64 g = random_detail::call_generator();
      const T* x = input.data_as<const T>();
      T* y = out0.data_as<T>();
      const std::array<std::array<int64_t, kMaxDims>, 3> st{strides_array(input), strides_array(out0),
                                                              strides_array(out1)};
      for_each_offset<3>(shape_of(input.sizes()), st, [&](const std::array<int64_t, 3>& off) {
        const bool k = random_detail::uniform01_double(g) < keep;
        mask[off[2]] = k;
        y[off[1]] = static_cast<T>(static_cast<C>(x[off[0]]) * C(k ? 1 : 0) * scale);
      });
      return {};
    } else {
      return fail(Error::InvalidArgument, op, ": training dropout needs a floating input, got ", name(input.dtype()));
    }
  });
}

}  // namespace etrt::kernels
