// 2-D resampling: upsample_nearest2d / upsample_bilinear2d (.vec_out), _upsample_bilinear2d_aa, grid_sampler_2d and
// pixel_unshuffle (the inverse of shape.h's pixel_shuffle).
//
// Note [resample layouts]: inputs and outputs are [N, C, H, W] in any dim order; every access goes through the
// tensors' own strides, so NCHW and channels-last (or any other permutation) work unchanged.
//
// Note [torch index math]: source positions are computed in the precision torch uses (nearest: float whatever the
// dtype; bilinear: compute_t<T>; uint8 bilinear and antialiased filters: double weights turned into int16 fixed
// point), because a source index that lands on the other side of an integer changes the output pixel outright.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace upsample_detail {

using Strides4 = std::array<int64_t, 4>;

inline Strides4 strides4(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

struct Geometry {
  int64_t N, C, H, W, OH, OW;
  std::optional<double> scale_h, scale_w;  // the user's scale factors, when the output size came from them
};

/// torch's 2-D upsample checks: 4-D input, empty only in the batch dim, positive input and output spatial sizes.
inline Result<Geometry> check_geometry(std::string_view op, const Tensor& in, int64_t OH, int64_t OW,
                                       std::optional<double> sh, std::optional<double> sw) {
  if (in.dim() != 4)
    return fail(Error::InvalidArgument, op, ": expected a 4-D input (N, C, H, W), got ", in.describe());
  Geometry g{in.size(0), in.size(1), in.size(2), in.size(3), OH, OW, sh, sw};
  if (g.C == 0 || g.H == 0 || g.W == 0)
    return fail(Error::InvalidArgument, op, ": non-empty 4-D input expected (only the batch may be 0), got ",
                in.describe());
  if (OH <= 0 || OW <= 0)
    return fail(Error::InvalidArgument, op, ": input and output sizes should be greater than 0, got input (H: ", g.H,
                ", W: ", g.W, ") output (H: ", OH, ", W: ", OW, ")");
  return g;
}

/// Output size for a scale factor: torch truncates in * scale toward zero; a product outside int64 (or NaN) is an
/// error there too.
inline Result<int64_t> size_from_scale(std::string_view op, int64_t in, double scale) {
  const double v = static_cast<double>(in) * scale;
  if (!(v > -9.2e18 && v < 9.2e18))
    return fail(Error::InvalidArgument, op, ": scale factor ", scale, " on input size ", in,
                " gives an output size that is not representable");
  return static_cast<int64_t>(v);
}

/// The .vec overloads: exactly one of output_size and scale_factors, two values each.
inline Result<Geometry> vec_geometry(std::string_view op, const Tensor& in,
                                     std::optional<std::span<const int64_t>> output_size,
                                     std::optional<std::span<const double>> scale_factors) {
  if (in.dim() != 4)
    return fail(Error::InvalidArgument, op, ": expected a 4-D input (N, C, H, W), got ", in.describe());
  if (output_size.has_value() == scale_factors.has_value())
    return fail(Error::InvalidArgument, op, ": must specify exactly one of output_size and scale_factors (got ",
                output_size ? "both" : "neither", ")");
  if (output_size) {
    if (output_size->size() != 2)
      return fail(Error::InvalidArgument, op, ": output_size must have 2 values, got ", shape_str(*output_size));
    return check_geometry(op, in, (*output_size)[0], (*output_size)[1], std::nullopt, std::nullopt);
  }
  if (scale_factors->size() != 2)
    return fail(Error::InvalidArgument, op, ": scale_factors must have 2 values, got ", scale_factors->size());
  const double sh = (*scale_factors)[0], sw = (*scale_factors)[1];
  ETRT_TRY(int64_t OH, size_from_scale(op, in.size(2), sh));
  ETRT_TRY(int64_t OW, size_from_scale(op, in.size(3), sw));
  return check_geometry(op, in, OH, OW, sh, sw);
}

inline Status resize_out(std::string_view op, KernelContext& ctx, Tensor& out, const Geometry& g) {
  if (out.dim() != 4) return fail(Error::InvalidArgument, op, ": expected a 4-D out, got ", out.describe());
  const int64_t s[4] = {g.N, g.C, g.OH, g.OW};
  return ctx.resize(op, out, std::span<const int64_t>(s, 4));
}

/// How the .vec overloads start: dtypes checked, the geometry worked out, out resized to it.
template <class Dtypes>
inline Result<Geometry> vec_start(std::string_view op, KernelContext& ctx, const Tensor& in,
                                  std::optional<std::span<const int64_t>> output_size,
                                  std::optional<std::span<const double>> scale_factors, Tensor& out) {
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, in, out));
  ETRT_TRY(Geometry g, vec_geometry(op, in, output_size, scale_factors));
  ETRT_CHECK_OK(resize_out(op, ctx, out, g));
  return g;
}

/// A user scale counts only when positive (torch treats 0 and negatives as "not given").
template <class P>
inline P area_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<P>(in - 1) / static_cast<P>(out - 1) : P(0);
  if (scale && *scale > 0) return static_cast<P>(1.0 / *scale);
  return static_cast<P>(in) / static_cast<P>(out);
}

/// int64(v) truncated toward zero, clamped to [lo, hi] before the cast so huge or NaN values stay defined.
inline int64_t trunc_clamped(double v, int64_t lo, int64_t hi) {
  if (!(v > static_cast<double>(lo))) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return std::clamp(static_cast<int64_t>(v), lo, hi);
}

/// torch's legacy `nearest` rule, shortcuts included: they decide the index whenever the sizes are equal or
/// doubled, even when a user scale says otherwise.
inline std::vector<int64_t> nearest_table(int64_t in, int64_t out, std::optional<double> scale) {
  std::vector<int64_t> t(static_cast<size_t>(out));
  const float s = (scale && *scale > 0) ? static_cast<float>(1.0 / *scale)
                                        : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t d = 0; d < out; ++d) {
    if (out == in) t[d] = d;
    else if (out == 2 * in) t[d] = d >> 1;
    else t[d] = trunc_clamped(std::floor(static_cast<float>(d) * s), 0, in - 1);
  }
  return t;
}

template <class C>
struct Linear {
  int64_t i0, i1;
  C l0, l1;
};

/// Two-tap linear filter along one axis (torch's compute_source_index_and_lambda). Equal sizes copy, with a zero
/// weight on the same pixel: an inf there still becomes NaN as in torch.
template <class C>
inline std::vector<Linear<C>> linear_table(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  std::vector<Linear<C>> t(static_cast<size_t>(out));
  const C ratio = area_scale<C>(in, out, align_corners, scale);
  for (int64_t d = 0; d < out; ++d) {
    if (in == out) {
      t[d] = {d, d, C(1), C(0)};
      continue;
    }
    C src = align_corners ? ratio * static_cast<C>(d) : ratio * (static_cast<C>(d) + C(0.5)) - C(0.5);
    if (src < C(0)) src = C(0);
    const int64_t i0 = trunc_clamped(static_cast<double>(std::floor(src)), 0, in - 1);
    const C l1 = std::min(std::max(src - static_cast<C>(i0), C(0)), C(1));
    t[d] = {i0, i0 + (i0 < in - 1 ? 1 : 0), C(1) - l1, l1};
  }
  return t;
}

/// A separable filter along one axis: output position o reads `count[o]` inputs from `start[o]` with the weights
/// at w[first[o]...].
template <class P>
struct Taps {
  std::vector<int64_t> start, count, first;
  std::vector<P> w;
};

/// torch's antialiased triangle filter (also the uint8 bilinear one, with antialias = false): the support widens by
/// the downscale ratio and the weights are normalized to sum to 1. `delta` is torch's align_corners_delta (0.5 only
/// for uint8 bilinear with align_corners). The center and bounds are computed in double as in torch.
template <class P>
inline Result<Taps<P>> filter_taps(std::string_view op, int64_t in, int64_t out, bool align_corners,
                                   std::optional<double> scale, bool antialias, double delta) {
  const P ratio = area_scale<P>(in, out, align_corners, scale);
  const bool widen = antialias && ratio >= P(1);
  const P support = widen ? ratio : P(1);
  const P inv = widen ? P(1) / ratio : P(1);
  Taps<P> t;
  t.start.resize(static_cast<size_t>(out));
  t.count.resize(static_cast<size_t>(out));
  t.first.resize(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const P center = static_cast<P>(static_cast<double>(ratio) * (static_cast<double>(o) + 0.5 - delta));
    const int64_t lo = trunc_clamped(static_cast<double>(center) - support + 0.5 + delta, 0, in);
    const int64_t hi = trunc_clamped(static_cast<double>(center) + support + 0.5 + delta, 0, in);
    const int64_t n = std::max<int64_t>(hi - lo, 0);
    // A user scale far from in/out widens every filter to the whole input; refuse what would not fit in memory.
    if (static_cast<int64_t>(t.w.size()) > (int64_t{1} << 28) - n)
      return fail(Error::NotSupported, op, ": the scale gives a filter of ", n, " taps for each of ", out,
                  " outputs, too many to tabulate");
    t.start[o] = lo;
    t.count[o] = n;
    t.first[o] = static_cast<int64_t>(t.w.size());
    P total = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double x = (static_cast<double>(static_cast<P>(j + lo) - center) + 0.5 - delta) * inv;
      const P ax = static_cast<P>(std::fabs(x));
      const P v = ax < P(1) ? P(1) - ax : P(0);
      t.w.push_back(v);
      total += v;
    }
    if (total != P(0))
      for (int64_t j = 0; j < n; ++j) t.w[t.first[o] + j] /= total;
  }
  return t;
}

/// The uint8 weights: fixed point with as many fraction bits as keep the largest weight (doubled) under 2^15.
struct FixedTaps {
  std::vector<int32_t> w;
  int bits = 0;
};

inline FixedTaps to_fixed(const std::vector<double>& w) {
  double wmax = 0;
  for (double v : w) wmax = std::max(wmax, v);
  FixedTaps f;
  for (f.bits = 0; f.bits < 22; ++f.bits)
    if (static_cast<int64_t>(0.5 + wmax * static_cast<double>(int64_t{1} << (f.bits + 1))) >= (1 << 15)) break;
  const double one = static_cast<double>(int64_t{1} << f.bits);
  f.w.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const double v = w[i] * one;
    f.w[i] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);
  }
  return f;
}

/// One separable pass along `axis` (2 = H, 3 = W) from src (strides ss) into dst (strides ds, sizes dsz):
/// dst = finish(sum_j src[start + j] * w[first + j]), accumulated in Acc.
template <class Acc, class S, class D, class Wt, class Finish>
inline void filter_pass(const S* src, const Strides4& ss, D* dst, const Strides4& ds, const Strides4& dsz, int axis,
                        const std::vector<int64_t>& start, const std::vector<int64_t>& count,
                        const std::vector<int64_t>& first, const std::vector<Wt>& w, Acc init, Finish finish) {
  const int64_t step = ss[axis];
  for (int64_t n = 0; n < dsz[0]; ++n)
    for (int64_t c = 0; c < dsz[1]; ++c)
      for (int64_t h = 0; h < dsz[2]; ++h)
        for (int64_t x = 0; x < dsz[3]; ++x) {
          const int64_t o = axis == 2 ? h : x;
          const S* base = src + n * ss[0] + c * ss[1] + (axis == 2 ? 0 : h * ss[2]) + (axis == 3 ? 0 : x * ss[3]) +
                          start[o] * step;
          const Wt* wo = w.data() + first[o];
          Acc a = init;
          for (int64_t j = 0; j < count[o]; ++j) a += convert<Acc>(base[j * step]) * static_cast<Acc>(wo[j]);
          dst[n * ds[0] + c * ds[1] + h * ds[2] + x * ds[3]] = finish(a);
        }
}

inline Strides4 dense_strides(const Strides4& sz) {
  return {sz[1] * sz[2] * sz[3], sz[2] * sz[3], sz[3], 1};
}

inline Result<size_t> buffer_size(std::string_view op, const Strides4& sz) {
  const int64_t n = checked_numel(std::span<const int64_t>(sz.data(), 4));
  if (n < 0) return fail(Error::InvalidArgument, op, ": intermediate size ", shape_str(sz), " overflows");
  return static_cast<size_t>(n);
}

/// Separable resampling (horizontal pass first, then vertical, each skipped when that size is unchanged, as torch
/// does). uint8 rounds the intermediate row to uint8 exactly like torch's fixed-point path; the float types keep it
/// in T's compute type.
template <class T>
inline Status separable(std::string_view op, const Tensor& in, Tensor& out, const Geometry& g, bool align_corners,
                        bool antialias) {
  const bool do_w = g.OW != g.W, do_h = g.OH != g.H;
  if (!do_w && !do_h) {
    mv::copy_views(element_size(out.dtype()), mv::view_of(out), mv::view_of(in));
    return {};
  }
  const Strides4 is = strides4(in), os = strides4(out);
  const Strides4 mid_sz{g.N, g.C, g.H, g.OW};
  if constexpr (std::is_same_v<T, uint8_t>) {
    const double delta = (align_corners && !antialias) ? 0.5 : 0.0;
    auto fixed_pass = [&](const uint8_t* s, const Strides4& ss, uint8_t* d, const Strides4& dst_s,
                          const Strides4& dsz, int axis, const Taps<double>& t) {
      const FixedTaps f = to_fixed(t.w);
      const int bits = f.bits;
      const int64_t round = bits > 0 ? int64_t{1} << (bits - 1) : 0;
      filter_pass<int64_t>(s, ss, d, dst_s, dsz, axis, t.start, t.count, t.first, f.w, round, [bits](int64_t a) {
        return static_cast<uint8_t>(std::clamp<int64_t>(a >> bits, 0, 255));
      });
    };
    std::vector<uint8_t> mid;
    const uint8_t* hsrc = in.data_as<uint8_t>();
    Strides4 hs = is;
    if (do_w) {
      ETRT_TRY(auto tw, filter_taps<double>(op, g.W, g.OW, align_corners, g.scale_w, antialias, delta));
      if (!do_h) {
        fixed_pass(in.data_as<uint8_t>(), is, out.data_as<uint8_t>(), os, {g.N, g.C, g.OH, g.OW}, 3, tw);
        return {};
      }
      ETRT_TRY(size_t n, buffer_size(op, mid_sz));
      mid.resize(n);
      fixed_pass(in.data_as<uint8_t>(), is, mid.data(), dense_strides(mid_sz), mid_sz, 3, tw);
      hsrc = mid.data();
      hs = dense_strides(mid_sz);
    }
    ETRT_TRY(auto th, filter_taps<double>(op, g.H, g.OH, align_corners, g.scale_h, antialias, delta));
    fixed_pass(hsrc, hs, out.data_as<uint8_t>(), os, {g.N, g.C, g.OH, g.OW}, 2, th);
    return {};
  } else {
    using C = compute_t<T>;
    auto to_t = [](C a) { return convert<T>(a); };
    std::vector<C> mid;
    if (do_w) {
      ETRT_TRY(auto tw, filter_taps<C>(op, g.W, g.OW, align_corners, g.scale_w, antialias, 0.0));
      if (!do_h) {
        filter_pass<C>(in.data_as<T>(), is, out.data_as<T>(), os, {g.N, g.C, g.OH, g.OW}, 3, tw.start, tw.count,
                       tw.first, tw.w, C(0), to_t);
        return {};
      }
      ETRT_TRY(size_t n, buffer_size(op, mid_sz));
      mid.resize(n);
      filter_pass<C>(in.data_as<T>(), is, mid.data(), dense_strides(mid_sz), mid_sz, 3, tw.start, tw.count, tw.first,
                     tw.w, C(0), [](C a) { return a; });
    }
    ETRT_TRY(auto th, filter_taps<C>(op, g.H, g.OH, align_corners, g.scale_h, antialias, 0.0));
    if (do_w)
      filter_pass<C>(mid.data(), dense_strides(mid_sz), out.data_as<T>(), os, {g.N, g.C, g.OH, g.OW}, 2, th.start,
                     th.count, th.first, th.w, C(0), to_t);
    else
      filter_pass<C>(in.data_as<T>(), is, out.data_as<T>(), os, {g.N, g.C, g.OH, g.OW}, 2, th.start, th.count,
                     th.first, th.w, C(0), to_t);
    return {};
  }
}

/// Visits every output element as (n, c, oh, ow), channels innermost when they are innermost in out (NHWC).
template <class F>
inline void for_each_output(const Geometry& g, const Strides4& os, F&& f) {
  if (os[1] < os[3]) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t c = 0; c < g.C; ++c) f(n, c, oh, ow);
  } else {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow) f(n, c, oh, ow);
  }
}

// ---- grid_sampler_2d ------------------------------------------------------------------------------------------

enum class GridPad : int64_t { Zeros = 0, Border = 1, Reflection = 2 };

template <class C>
inline C grid_unnormalize(C v, int64_t size, bool align_corners) {
  if (align_corners) return (v + C(1)) / C(2) * static_cast<C>(size - 1);
  return ((v + C(1)) * static_cast<C>(size) - C(1)) / C(2);
}

/// Clamps to [0, size - 1]; NaN goes to 0, as torch's vectorized CPU kernel does.
template <class C>
inline C grid_clip(C v, int64_t size) {
  if (!(v > C(0))) return C(0);
  const C hi = static_cast<C>(size - 1);
  return v > hi ? hi : v;
}

/// Reflects v into [twice_lo / 2, twice_hi / 2] by folding it back and forth; the flip parity is taken in floating
/// point so coordinates beyond int range stay defined.
template <class C>
inline C grid_reflect(C v, int64_t twice_lo, int64_t twice_hi) {
  if (twice_lo == twice_hi) return C(0);
  const C lo = static_cast<C>(twice_lo) / C(2);
  const C span = static_cast<C>(twice_hi - twice_lo) / C(2);
  const C a = std::fabs(v - lo);
  const C extra = std::fmod(a, span);
  const C flips = std::floor(a / span);
  return std::fmod(flips, C(2)) == C(0) ? extra + lo : span - extra + lo;
}

template <class C>
inline C grid_pad(C v, int64_t size, GridPad pad, bool align_corners) {
  if (pad == GridPad::Border) return grid_clip(v, size);
  if (pad == GridPad::Reflection) {
    v = align_corners ? grid_reflect(v, 0, 2 * (size - 1)) : grid_reflect(v, -1, 2 * size - 1);
    return grid_clip(v, size);
  }
  return v;
}

/// Whether an integral-valued coordinate is inside [0, size); decided in floating point so NaN and huge values
/// are simply outside.
template <class C>
inline bool grid_inside(C v, int64_t size) {
  return v >= C(0) && v < static_cast<C>(size);
}

/// Keys' cubic convolution weights (A = -0.75) for taps at -1, 0, 1, 2 from a fraction t.
template <class C>
inline std::array<C, 4> cubic_weights(C t) {
  constexpr C A = C(-0.75);
  auto near = [](C x) { return ((A + C(2)) * x - (A + C(3))) * x * x + C(1); };
  auto far = [](C x) { return ((A * x - C(5) * A) * x + C(8) * A) * x - C(4) * A; };
  return {far(t + C(1)), near(t), near(C(1) - t), far(C(2) - t)};
}

}  // namespace upsample_detail

template <class Dtypes>
Status upsample_nearest2d_vec_out(KernelContext& ctx, const Tensor& input,
                                  std::optional<std::span<const int64_t>> output_size,
                                  std::optional<std::span<const double>> scale_factors, Tensor& out) {
  constexpr std::string_view op = "upsample_nearest2d.vec_out";
  namespace ud = upsample_detail;
  ETRT_TRY(auto g, ud::vec_start<Dtypes>(op, ctx, input, output_size, scale_factors, out));
  if (out.numel() == 0) return {};
  const std::vector<int64_t> hi = ud::nearest_table(g.H, g.OH, g.scale_h);
  const std::vector<int64_t> wi = ud::nearest_table(g.W, g.OW, g.scale_w);
  const ud::Strides4 is = ud::strides4(input), os = ud::strides4(out);
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T* src = input.data_as<T>();
    T* dst = out.data_as<T>();
    ud::for_each_output(g, os, [&](int64_t n, int64_t c, int64_t oh, int64_t ow) {
      dst[n * os[0] + c * os[1] + oh * os[2] + ow * os[3]] =
          src[n * is[0] + c * is[1] + hi[oh] * is[2] + wi[ow] * is[3]];
    });
    return Status{};
  });
}

template <class Dtypes>
Status upsample_bilinear2d_vec_out(KernelContext& ctx, const Tensor& input,
                                   std::optional<std::span<const int64_t>> output_size, bool align_corners,
                                   std::optional<std::span<const double>> scale_factors, Tensor& out) {
  constexpr std::string_view op = "upsample_bilinear2d.vec_out";
  namespace ud = upsample_detail;
  ETRT_TRY(auto g, ud::vec_start<Dtypes>(op, ctx, input, output_size, scale_factors, out));
  if (out.numel() == 0) return {};
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    // torch resamples uint8 separably in fixed point; a direct float lerp would round differently.
    if constexpr (std::is_same_v<T, uint8_t>) {
      return ud::separable<T>(op, input, out, g, align_corners, /*antialias=*/false);
    } else {
      using C = compute_t<T>;
      const auto th = ud::linear_table<C>(g.H, g.OH, align_corners, g.scale_h);
      const auto tw = ud::linear_table<C>(g.W, g.OW, align_corners, g.scale_w);
      const ud::Strides4 is = ud::strides4(input), os = ud::strides4(out);
      const T* src = input.data_as<T>();
      T* dst = out.data_as<T>();
      ud::for_each_output(g, os, [&](int64_t n, int64_t c, int64_t oh, int64_t ow) {
        const T* p = src + n * is[0] + c * is[1];
        const auto& h = th[oh];
        const auto& w = tw[ow];
        const T* r0 = p + h.i0 * is[2];
        const T* r1 = p + h.i1 * is[2];
        const int64_t c0 = w.i0 * is[3], c1 = w.i1 * is[3];
        const C top = w.l0 * convert<C>(r0[c0]) + w.l1 * convert<C>(r0[c1]);
        const C bottom = w.l0 * convert<C>(r1[c0]) + w.l1 * convert<C>(r1[c1]);
        dst[n * os[0] + c * os[1] + oh * os[2] + ow * os[3]] = convert<T>(h.l0 * top + h.l1 * bottom);
      });
      return Status{};
    }
  });
}

template <class Dtypes>
Status upsample_bilinear2d_aa_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> output_size,
                                  bool align_corners, std::optional<double> scales_h, std::optional<double> scales_w,
                                  Tensor& out) {
  constexpr std::string_view op = "_upsample_bilinear2d_aa.out";
  namespace ud = upsample_detail;
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (output_size.size() != 2)
    return fail(Error::InvalidArgument, op, ": output_size must have 2 values, got ", shape_str(output_size));
  ETRT_TRY(auto g, ud::check_geometry(op, self, output_size[0], output_size[1], scales_h, scales_w));
  ETRT_CHECK_OK(ud::resize_out(op, ctx, out, g));
  if (out.numel() == 0) return {};
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    return ud::separable<T>(op, self, out, g, align_corners, /*antialias=*/true);
  });
}

template <class Dtypes>
Status grid_sampler_2d_out(KernelContext& ctx, const Tensor& input, const Tensor& grid, int64_t interpolation_mode,
                           int64_t padding_mode, bool align_corners, Tensor& out) {
  constexpr std::string_view op = "grid_sampler_2d.out";
  namespace ud = upsample_detail;
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, input, out));
  if (grid.dtype() != input.dtype())
    return fail(Error::InvalidArgument, op, ": grid dtype ", name(grid.dtype()), " != input dtype ",
                name(input.dtype()));
  if (input.dim() != 4 || grid.dim() != 4)
    return fail(Error::InvalidArgument, op, ": expected a 4-D input and a 4-D grid, got input ", input.describe(),
                " and grid ", grid.describe());
  if (grid.size(0) != input.size(0))
    return fail(Error::InvalidArgument, op, ": expected grid and input to have the same batch size, got input ",
                input.describe(), " and grid ", grid.describe());
  if (grid.size(3) != 2)
    return fail(Error::InvalidArgument, op, ": expected grid to have size 2 in the last dimension, got grid ",
                grid.describe());
  if (input.size(2) == 0 || input.size(3) == 0)
    return fail(Error::InvalidArgument, op, ": expected input to have non-empty spatial dimensions, got ",
                input.describe());
  if (interpolation_mode < 0 || interpolation_mode > 2)
    return fail(Error::InvalidArgument, op,
                ": interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got ", interpolation_mode);
  if (padding_mode < 0 || padding_mode > 2)
    return fail(Error::InvalidArgument, op, ": padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got ",
                padding_mode);
  const int64_t N = input.size(0), Ch = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t GH = grid.size(1), GW = grid.size(2);
  const int64_t osz[4] = {N, Ch, GH, GW};
  ETRT_CHECK_OK(ctx.resize(op, out, std::span<const int64_t>(osz, 4)));
  if (out.numel() == 0) return {};
  const auto pad = static_cast<ud::GridPad>(padding_mode);
  const ud::Strides4 is = ud::strides4(input), os = ud::strides4(out), gs = ud::strides4(grid);
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    const T* src = input.data_as<T>();
    const T* gp = grid.data_as<T>();
    T* dst = out.data_as<T>();
    // Out-of-range taps read as 0 but keep their weight, so a NaN or infinite weight still poisons the sum.
    auto tap = [&](const T* plane, C y, C x) -> C {
      if (!ud::grid_inside(y, H) || !ud::grid_inside(x, W)) return C(0);
      return convert<C>(plane[static_cast<int64_t>(y) * is[2] + static_cast<int64_t>(x) * is[3]]);
    };
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < GH; ++h)
        for (int64_t w = 0; w < GW; ++w) {
          const T* gq = gp + n * gs[0] + h * gs[1] + w * gs[2];
          const C gx = convert<C>(gq[0]), gy = convert<C>(gq[gs[3]]);
          T* o = dst + n * os[0] + h * os[2] + w * os[3];
          const T* base = src + n * is[0];
          if (interpolation_mode == 2) {
            const C x = ud::grid_unnormalize(gx, W, align_corners), y = ud::grid_unnormalize(gy, H, align_corners);
            const C x0 = std::floor(x), y0 = std::floor(y);
            const auto wx = ud::cubic_weights(x - x0), wy = ud::cubic_weights(y - y0);
            std::array<C, 4> xs, ys;
            for (int k = 0; k < 4; ++k) {
              xs[k] = ud::grid_pad(x0 - C(1) + C(k), W, pad, align_corners);
              ys[k] = ud::grid_pad(y0 - C(1) + C(k), H, pad, align_corners);
            }
            for (int64_t c = 0; c < Ch; ++c) {
              const T* plane = base + c * is[1];
              C acc = 0;
              for (int j = 0; j < 4; ++j) {
                C row = 0;
                for (int i = 0; i < 4; ++i) row += wx[i] * tap(plane, ys[j], xs[i]);
                acc += wy[j] * row;
              }
              o[c * os[1]] = convert<T>(acc);
            }
            continue;
          }
          const C x = ud::grid_pad(ud::grid_unnormalize(gx, W, align_corners), W, pad, align_corners);
          const C y = ud::grid_pad(ud::grid_unnormalize(gy, H, align_corners), H, pad, align_corners);
          if (interpolation_mode == 1) {
            const C xr = std::nearbyint(x), yr = std::nearbyint(y);  // half to even, like torch's round
            for (int64_t c = 0; c < Ch; ++c) o[c * os[1]] = convert<T>(tap(base + c * is[1], yr, xr));
            continue;
          }
          const C x0 = std::floor(x), y0 = std::floor(y), x1 = x0 + C(1), y1 = y0 + C(1);
          const C wnw = (x1 - x) * (y1 - y), wne = (x - x0) * (y1 - y);
          const C wsw = (x1 - x) * (y - y0), wse = (x - x0) * (y - y0);
          for (int64_t c = 0; c < Ch; ++c) {
            const T* plane = base + c * is[1];
            const C v = wnw * tap(plane, y0, x0) + wne * tap(plane, y0, x1) + wsw * tap(plane, y1, x0) +
                        wse * tap(plane, y1, x1);
            o[c * os[1]] = convert<T>(v);
          }
        }
    return Status{};
  });
}

template <class Dtypes>
Status pixel_unshuffle_out(KernelContext& ctx, const Tensor& self, int64_t downscale_factor, Tensor& out) {
  constexpr std::string_view op = "pixel_unshuffle.out";
  const int64_t r = downscale_factor;
  ETRT_CHECK_OK(mv::check_pixel_args<Dtypes>(op, self, out, r, "downscale_factor"));
  const int rk = self.dim();
  const int64_t C = self.size(rk - 3), H = self.size(rk - 2), W = self.size(rk - 1);
  if (H % r != 0)
    return fail(Error::InvalidArgument, op, ": height ", H, " is not divisible by downscale_factor ", r);
  if (W % r != 0) return fail(Error::InvalidArgument, op, ": width ", W, " is not divisible by downscale_factor ", r);
  if (r > 3037000499 || (C != 0 && r * r > std::numeric_limits<int64_t>::max() / C))
    return fail(Error::InvalidArgument, op, ": channels ", C, " * downscale_factor^2 overflows (factor ", r, ")");
  Shape s = shape_of(self.sizes());
  s.sizes[rk - 3] = C * r * r;
  s.sizes[rk - 2] = H / r;
  s.sizes[rk - 1] = W / r;
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  if (out.numel() == 0) return {};
  const auto [packed, spread] = mv::pixel_views(out, self, r);
  mv::copy_views(element_size(out.dtype()), packed, spread);
  return {};
}

}  // namespace etrt::kernels
