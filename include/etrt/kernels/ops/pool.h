// 2-D pooling: max_pool2d_with_indices (and its backward), avg_pool2d, _adaptive_avg_pool2d.
//
// Note [pool planes]: inputs are [C, H, W] or [N, C, H, W] in any dim order; every (n, c) plane is pooled
// independently with the plane's H and W strides, so NCHW and NHWC inputs both work. Per output column the valid
// kernel range is computed once per call (a small table), so the inner loops carry no bounds checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace pool_detail {

struct Params {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

inline Result<std::pair<int64_t, int64_t>> pair_arg(std::string_view op, std::string_view what,
                                                    std::span<const int64_t> v, std::optional<int64_t> dflt_from_empty_a,
                                                    std::optional<int64_t> dflt_from_empty_b) {
  if (v.empty() && dflt_from_empty_a) return std::pair{*dflt_from_empty_a, *dflt_from_empty_b};
  if (v.size() == 1) return std::pair{v[0], v[0]};
  if (v.size() == 2) return std::pair{v[0], v[1]};
  return fail(Error::InvalidArgument, op, ": ", what, " must have one or two values, got ", shape_str(v));
}

/// max_pool2d's kernel, stride (empty = the kernel), padding and dilation lists, shared by forward and backward.
inline Result<Params> max_pool_params(std::string_view op, std::span<const int64_t> kernel_size,
                                      std::span<const int64_t> stride, std::span<const int64_t> padding,
                                      std::span<const int64_t> dilation) {
  ETRT_TRY(auto k, pair_arg(op, "kernel_size", kernel_size, std::nullopt, std::nullopt));
  ETRT_TRY(auto s, pair_arg(op, "stride", stride, k.first, k.second));
  ETRT_TRY(auto pd, pair_arg(op, "padding", padding, std::nullopt, std::nullopt));
  ETRT_TRY(auto dl, pair_arg(op, "dilation", dilation, std::nullopt, std::nullopt));
  return Params{k.first, k.second, s.first, s.second, pd.first, pd.second, dl.first, dl.second};
}

/// torch's pooling output size (pooling_output_shape).
inline int64_t out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t o = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (o - 1) * stride >= in + pad) --o;
  return o;
}

struct Geometry {
  int64_t N = 1, C, H, W, OH, OW;
  bool batched;
};

inline Result<Geometry> geometry(std::string_view op, const Tensor& x, const Params& p, bool ceil_mode) {
  if (x.dim() != 3 && x.dim() != 4)
    return fail(Error::InvalidArgument, op, ": expected a 3-D or 4-D input, got ", x.describe());
  if (p.kh <= 0 || p.kw <= 0 || p.sh <= 0 || p.sw <= 0 || p.dh <= 0 || p.dw <= 0 || p.ph < 0 || p.pw < 0)
    return fail(Error::InvalidArgument, op, ": kernel, stride and dilation must be positive and padding non-negative");
  // Far beyond any real pooling, and small enough that out_size's arithmetic cannot overflow.
  constexpr int64_t kMaxParam = int64_t{1} << 31;
  if (std::max({p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.ph, p.pw}) > kMaxParam)
    return fail(Error::InvalidArgument, op, ": kernel, stride, dilation and padding must be at most 2^31, got kernel [",
                p.kh, ", ", p.kw, "], stride [", p.sh, ", ", p.sw, "], dilation [", p.dh, ", ", p.dw, "], padding [",
                p.ph, ", ", p.pw, "]");
  if (p.ph > p.kh / 2 || p.pw > p.kw / 2)
    return fail(Error::InvalidArgument, op, ": pad should be at most half of effective kernel size, got pad [", p.ph,
                ", ", p.pw, "] for kernel [", p.kh, ", ", p.kw, "]");
  Geometry g;
  g.batched = x.dim() == 4;
  const int o = g.batched ? 1 : 0;
  g.N = g.batched ? x.size(0) : 1;
  g.C = x.size(o);
  g.H = x.size(o + 1);
  g.W = x.size(o + 2);
  // With the parameters at most 2^31, an input size at most 2^62 keeps out_size's arithmetic in range (an empty
  // tensor's other sizes are not bounded by its storage).
  if (g.H > kMaxParam << 31 || g.W > kMaxParam << 31)
    return fail(Error::InvalidArgument, op, ": input ", x.describe(), " is too large to pool");
  g.OH = out_size(g.H, p.kh, p.ph, p.sh, p.dh, ceil_mode);
  g.OW = out_size(g.W, p.kw, p.pw, p.sw, p.dw, ceil_mode);
  if (g.OH <= 0 || g.OW <= 0 || g.H <= 0 || g.W <= 0)
    return fail(Error::InvalidArgument, op, ": output size is too small for input ", x.describe(), " (computed ",
                g.OH, "x", g.OW, ")");
  return g;
}

/// The pooled output's sizes: [N, C, OH, OW], or [C, OH, OW] for an unbatched input.
struct PooledShape {
  std::array<int64_t, 4> dims;
  size_t rank;
  std::span<const int64_t> sizes() const { return {dims.data(), rank}; }
};

inline PooledShape out_shape(const Geometry& g) {
  if (g.batched) return {{g.N, g.C, g.OH, g.OW}, 4};
  return {{g.C, g.OH, g.OW, 0}, 3};
}

/// Strides of a pooled tensor as (n, c, h, w), n = 0 for 3-D.
inline std::array<int64_t, 4> strides4(const Tensor& t) {
  if (t.dim() == 4) return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
  return {0, t.stride(0), t.stride(1), t.stride(2)};
}

/// Valid kernel tap range [k0, k1) for every output position along one axis.
inline void tap_ranges(int64_t out, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, std::vector<int64_t>& k0,
                       std::vector<int64_t>& k1) {
  k0.resize(static_cast<size_t>(out));
  k1.resize(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - p;
    int64_t a = start < 0 ? (-start + d - 1) / d : 0;
    int64_t b = (in - start + d - 1) / d;  // first tap at or past `in`
    b = std::min(b, k);
    if (b < a) b = a;
    k0[o] = a;
    k1[o] = b;
  }
}

template <class C>
inline bool greater_or_nan(C v, C best) {
  if constexpr (std::is_floating_point_v<C>) return v > best || std::isnan(v);
  else return v > best;
}

/// One plane of max pooling. Strides in elements; indices are h * W + w in the input plane.
template <class T>
inline void max_plane(const T* in, int64_t ihs, int64_t iws, T* out, int64_t ohs, int64_t ows, int64_t* idx,
                      int64_t xhs, int64_t xws, int64_t W, const Params& p, int64_t OH, int64_t OW,
                      const std::vector<int64_t>& h0, const std::vector<int64_t>& h1, const std::vector<int64_t>& w0,
                      const std::vector<int64_t>& w1) {
  using C = compute_t<T>;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t hs = oh * p.sh - p.ph;
    const int64_t ka = h0[oh], kb = h1[oh];
    T* orow = out + oh * ohs;
    int64_t* xrow = idx + oh * xhs;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t ws = ow * p.sw - p.pw;
      const int64_t ja = w0[ow], jb = w1[ow];
      C best;
      if constexpr (std::is_floating_point_v<C>) best = -std::numeric_limits<C>::infinity();
      else best = std::numeric_limits<C>::lowest();
      int64_t bi = (hs + ka * p.dh) * W + (ws + ja * p.dw);
      for (int64_t kh = ka; kh < kb; ++kh) {
        const int64_t ih = hs + kh * p.dh;
        const T* row = in + ih * ihs;
        for (int64_t kw = ja; kw < jb; ++kw) {
          const int64_t iw = ws + kw * p.dw;
          const C v = static_cast<C>(row[iw * iws]);
          if (greater_or_nan(v, best)) {
            best = v;
            bi = ih * W + iw;
          }
        }
      }
      orow[ow * ows] = static_cast<T>(best);
      xrow[ow * xws] = bi;
    }
  }
}

/// The common dense case (unit W strides, dilation 1, float), same semantics as max_plane. Interior output columns
/// (whose window lies inside the row) are processed a kernel tap at a time across the whole output row, a loop
/// GCC vectorizes; the per-output tap order (kh, then kw) is unchanged, so ties and NaNs resolve as in max_plane.
inline void max_plane_f32_dense(const float* in, int64_t ihs, float* out, int64_t ohs, int64_t* idx, int64_t xhs,
                                int64_t W, const Params& p, int64_t OH, int64_t OW, const std::vector<int64_t>& h0,
                                const std::vector<int64_t>& h1, const std::vector<int64_t>& w0,
                                const std::vector<int64_t>& w1) {
  int64_t owa = 0, owb = OW;  // interior columns [owa, owb)
  while (owa < OW && (w0[owa] != 0 || w1[owa] != p.kw)) ++owa;
  owb = owa;
  while (owb < OW && w0[owb] == 0 && w1[owb] == p.kw) ++owb;
  const int64_t sw = p.sw;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t hs = oh * p.sh - p.ph;
    const int64_t ka = h0[oh], kb = h1[oh];
    float* __restrict orow = out + oh * ohs;
    int64_t* __restrict xrow = idx + oh * xhs;
    auto scalar_col = [&](int64_t ow) {
      const int64_t ws = ow * p.sw - p.pw;
      const int64_t ja = w0[ow], jb = w1[ow];
      float best = -std::numeric_limits<float>::infinity();
      int64_t bi = (hs + ka) * W + (ws + ja);
      for (int64_t kh = ka; kh < kb; ++kh) {
        const int64_t ih = hs + kh;
        const float* row = in + ih * ihs;
        for (int64_t iw = ws + ja; iw < ws + jb; ++iw) {
          const float v = row[iw];
          if (v > best || v != v) {
            best = v;
            bi = ih * W + iw;
          }
        }
      }
      orow[ow] = best;
      xrow[ow] = bi;
    };
    for (int64_t ow = 0; ow < owa; ++ow) scalar_col(ow);
    for (int64_t ow = owb; ow < OW; ++ow) scalar_col(ow);
    if (owa >= owb) continue;
    const int64_t first = (hs + ka) * W + (owa * sw - p.pw);
    for (int64_t ow = owa; ow < owb; ++ow) {
      orow[ow] = -std::numeric_limits<float>::infinity();
      xrow[ow] = first + (ow - owa) * sw;
    }
    for (int64_t kh = ka; kh < kb; ++kh) {
      const int64_t ih = hs + kh;
      for (int64_t kw = 0; kw < p.kw; ++kw) {
        const int64_t off = kw - p.pw;  // input column of output ow is ow * sw + off
        const float* __restrict row = in + ih * ihs + off;
        const int64_t ibase = ih * W + off;
        for (int64_t ow = owa; ow < owb; ++ow) {
          const float v = row[ow * sw];
          const float b = orow[ow];
          const bool take = v > b || v != v;
          orow[ow] = take ? v : b;
          xrow[ow] = take ? ibase + ow * sw : xrow[ow];
        }
      }
    }
  }
}

/// One axis of an averaging window: input positions [lo, hi), and its length counting the padding it covers.
struct Extent {
  int64_t lo, hi, padded;
};

/// The average pools' loop: rows(oh) and cols(ow) give each window's extents, div(rows, cols) its divisor (0 stores
/// 0); means are stored as T, integers truncated through int64.
template <class T, class Rows, class Cols, class Div>
inline void average_windows(const Tensor& self, Tensor& out, int64_t N, int64_t C, int64_t OH, int64_t OW, Rows rows,
                            Cols cols, Div div) {
  using A = std::conditional_t<std::is_floating_point_v<compute_t<T>>, compute_t<T>, double>;
  const auto is = strides4(self), os = strides4(out);
  const T* in = self.data_as<T>();
  T* o = out.data_as<T>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const T* ip = in + n * is[0] + c * is[1];
      T* op_ = o + n * os[0] + c * os[1];
      for (int64_t oh = 0; oh < OH; ++oh) {
        const Extent h = rows(oh);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const Extent w = cols(ow);
          A sum = 0;
          for (int64_t ih = h.lo; ih < h.hi; ++ih)
            for (int64_t iw = w.lo; iw < w.hi; ++iw) sum += static_cast<A>(ip[ih * is[2] + iw * is[3]]);
          const int64_t d = div(h, w);
          const A v = d != 0 ? sum / static_cast<A>(d) : A(0);
          if constexpr (std::is_integral_v<T>) op_[oh * os[2] + ow * os[3]] = static_cast<T>(convert<int64_t>(v));
          else op_[oh * os[2] + ow * os[3]] = static_cast<T>(v);
        }
      }
    }
}

}  // namespace pool_detail

template <class Dtypes>
Status max_pool2d_with_indices_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> kernel_size,
                                   std::span<const int64_t> stride, std::span<const int64_t> padding,
                                   std::span<const int64_t> dilation, bool ceil_mode, Tensor& out, Tensor& indices) {
  constexpr std::string_view op = "max_pool2d_with_indices.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  if (indices.dtype() != ScalarType::Long)
    return fail(Error::InvalidArgument, op, ": indices must be Long, got ", name(indices.dtype()));
  ETRT_TRY(auto p, pool_detail::max_pool_params(op, kernel_size, stride, padding, dilation));
  ETRT_TRY(auto g, pool_detail::geometry(op, self, p, ceil_mode));
  const auto pooled = pool_detail::out_shape(g);
  ETRT_CHECK_OK(ctx.resize(op, out, pooled.sizes()));
  ETRT_CHECK_OK(ctx.resize(op, indices, pooled.sizes()));
  if (out.numel() == 0) return {};
  std::vector<int64_t> h0, h1, w0, w1;
  pool_detail::tap_ranges(g.OH, g.H, p.kh, p.sh, p.ph, p.dh, h0, h1);
  pool_detail::tap_ranges(g.OW, g.W, p.kw, p.sw, p.pw, p.dw, w0, w1);
  const auto is = pool_detail::strides4(self), os = pool_detail::strides4(out), xs = pool_detail::strides4(indices);
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T* in = self.data_as<T>();
    T* o = out.data_as<T>();
    int64_t* x = indices.data_as<int64_t>();
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = 0; c < g.C; ++c) {
        const T* ip = in + n * is[0] + c * is[1];
        T* op_ = o + n * os[0] + c * os[1];
        int64_t* xp = x + n * xs[0] + c * xs[1];
        if constexpr (std::is_same_v<T, float>) {
          if (is[3] == 1 && os[3] == 1 && xs[3] == 1 && p.dh == 1 && p.dw == 1) {
            pool_detail::max_plane_f32_dense(ip, is[2], op_, os[2], xp, xs[2], g.W, p, g.OH, g.OW, h0, h1, w0, w1);
            continue;
          }
        }
        pool_detail::max_plane<T>(ip, is[2], is[3], op_, os[2], os[3], xp, xs[2], xs[3], g.W, p, g.OH, g.OW, h0, h1,
                                  w0, w1);
      }
    return Status{};
  });
}

/// max_pool2d_with_indices_backward.grad_input: scatters each grad_output element onto the input position its
/// index names (indices are h * W + w within the plane, as the forward writes them); positions hit by several
/// windows receive the sum, in row-major output order as torch adds them. An index outside the plane is an error.
template <class Dtypes>
Status max_pool2d_with_indices_backward_out(KernelContext& ctx, const Tensor& grad_output, const Tensor& self,
                                            std::span<const int64_t> kernel_size, std::span<const int64_t> stride,
                                            std::span<const int64_t> padding, std::span<const int64_t> dilation,
                                            bool ceil_mode, const Tensor& indices, Tensor& grad_input) {
  constexpr std::string_view op = "max_pool2d_with_indices_backward.grad_input";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, grad_input));
  if (grad_output.dtype() != self.dtype())
    return fail(Error::InvalidArgument, op, ": grad_output dtype ", name(grad_output.dtype()),
                " must equal the input dtype ", name(self.dtype()));
  if (indices.dtype() != ScalarType::Long)
    return fail(Error::InvalidArgument, op, ": indices must be Long, got ", name(indices.dtype()));
  ETRT_TRY(auto p, pool_detail::max_pool_params(op, kernel_size, stride, padding, dilation));
  ETRT_TRY(auto g, pool_detail::geometry(op, self, p, ceil_mode));
  const auto shape = pool_detail::out_shape(g);
  const std::span<const int64_t> pooled = shape.sizes();
  if (!std::ranges::equal(grad_output.sizes(), pooled))
    return fail(Error::InvalidArgument, op, ": grad_output shape ", shape_str(grad_output.sizes()),
                " does not match the pooled shape ", shape_str(pooled), " of input ", self.describe());
  if (!std::ranges::equal(indices.sizes(), pooled))
    return fail(Error::InvalidArgument, op, ": indices shape ", shape_str(indices.sizes()),
                " does not match the pooled shape ", shape_str(pooled));
  ETRT_CHECK_OK(ctx.resize(op, grad_input, self.sizes()));
  if (grad_input.numel() == 0) return {};
  const auto gos = pool_detail::strides4(grad_output), xs = pool_detail::strides4(indices),
             gis = pool_detail::strides4(grad_input);
  const int64_t plane = g.H * g.W;
  return visit(grad_input.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    const T* go = grad_output.data_as<T>();
    const int64_t* ix = indices.data_as<int64_t>();
    T* gi = grad_input.data_as<T>();
    std::vector<C> acc(static_cast<size_t>(plane));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = 0; c < g.C; ++c) {
        std::fill(acc.begin(), acc.end(), C(0));
        const T* gp = go + n * gos[0] + c * gos[1];
        const int64_t* xp = ix + n * xs[0] + c * xs[1];
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            const int64_t at = xp[oh * xs[2] + ow * xs[3]];
            if (at < 0 || at >= plane)
              return fail(Error::InvalidArgument, op, ": index ", at, " at output position (", n, ", ", c, ", ", oh,
                          ", ", ow, ") is outside the ", g.H, "x", g.W, " input plane");
            acc[static_cast<size_t>(at)] += static_cast<C>(gp[oh * gos[2] + ow * gos[3]]);
          }
        T* dst = gi + n * gis[0] + c * gis[1];
        for (int64_t h = 0; h < g.H; ++h)
          for (int64_t w = 0; w < g.W; ++w) dst[h * gis[2] + w * gis[3]] = static_cast<T>(acc[h * g.W + w]);
      }
    return Status{};
  });
}

template <class Dtypes>
Status avg_pool2d_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> kernel_size,
                      std::span<const int64_t> stride, std::span<const int64_t> padding, bool ceil_mode,
                      bool count_include_pad, std::optional<int64_t> divisor_override, Tensor& out) {
  constexpr std::string_view op = "avg_pool2d.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_TRY(auto k, pool_detail::pair_arg(op, "kernel_size", kernel_size, std::nullopt, std::nullopt));
  ETRT_TRY(auto s, pool_detail::pair_arg(op, "stride", stride, k.first, k.second));
  ETRT_TRY(auto pd, pool_detail::pair_arg(op, "padding", padding, std::nullopt, std::nullopt));
  if (divisor_override && *divisor_override == 0)
    return fail(Error::InvalidArgument, op, ": divisor_override must be non-zero");
  const pool_detail::Params p{k.first, k.second, s.first, s.second, pd.first, pd.second, 1, 1};
  ETRT_TRY(auto g, pool_detail::geometry(op, self, p, ceil_mode));
  ETRT_CHECK_OK(ctx.resize(op, out, pool_detail::out_shape(g).sizes()));
  if (out.numel() == 0) return {};
  // A window starts at o * stride - pad and is clipped to the input padded on both sides, then to the input.
  auto extent = [](int64_t o, int64_t len, int64_t step, int64_t pad, int64_t size) {
    const int64_t start = o * step - pad, end = std::min(start + len, size + pad);
    return pool_detail::Extent{std::max<int64_t>(start, 0), std::min(end, size), end - start};
  };
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    pool_detail::average_windows<T>(
        self, out, g.N, g.C, g.OH, g.OW, [&](int64_t oh) { return extent(oh, p.kh, p.sh, p.ph, g.H); },
        [&](int64_t ow) { return extent(ow, p.kw, p.sw, p.pw, g.W); },
        [&](const pool_detail::Extent& h, const pool_detail::Extent& w) {
          if (divisor_override) return *divisor_override;
          return count_include_pad ? h.padded * w.padded : (h.hi - h.lo) * (w.hi - w.lo);
        });
    return Status{};
  });
}

template <class Dtypes>
Status adaptive_avg_pool2d_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> output_size,
                               Tensor& out) {
  constexpr std::string_view op = "_adaptive_avg_pool2d.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_TRY(auto os2, pool_detail::pair_arg(op, "output_size", output_size, std::nullopt, std::nullopt));
  if (self.dim() != 3 && self.dim() != 4)
    return fail(Error::InvalidArgument, op, ": expected a 3-D or 4-D input, got ", self.describe());
  if (os2.first < 0 || os2.second < 0)
    return fail(Error::InvalidArgument, op, ": output_size must be non-negative, got ", shape_str(output_size));
  const bool b = self.dim() == 4;
  const int64_t N = b ? self.size(0) : 1, C = self.size(b), H = self.size(b + 1), W = self.size(b + 2);
  if ((H == 0 || W == 0) && os2.first > 0 && os2.second > 0)
    return fail(Error::InvalidArgument, op, ": empty spatial input ", self.describe());
  const int64_t OH = os2.first, OW = os2.second;
  std::array<int64_t, 4> buf = b ? std::array<int64_t, 4>{N, C, OH, OW} : std::array<int64_t, 4>{C, OH, OW, 0};
  ETRT_CHECK_OK(ctx.resize(op, out, std::span<const int64_t>(buf.data(), b ? 4u : 3u)));
  if (out.numel() == 0) return {};
  // Window o spans [floor(o * in / out), ceil((o + 1) * in / out)): never empty while in > 0.
  auto extent = [](int64_t o, int64_t size, int64_t count) {
    const int64_t lo = (o * size) / count, hi = ((o + 1) * size + count - 1) / count;
    return pool_detail::Extent{lo, hi, hi - lo};
  };
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    pool_detail::average_windows<T>(
        self, out, N, C, OH, OW, [&](int64_t oh) { return extent(oh, H, OH); },
        [&](int64_t ow) { return extent(ow, W, OW); },
        [](const pool_detail::Extent& h, const pool_detail::Extent& w) { return (h.hi - h.lo) * (w.hi - w.lo); });
    return Status{};
  });
}

}  // namespace etrt::kernels
