// convolution.out (1-D and 2-D, plain and transposed) and convolution_backward.out.
//
// Note [conv geometry]: every kernel here is one of three products over a convolution's geometry (Geo): its input
// side (C, H, W), its output side (O, OH, OW), a weight [O, C / groups, KH, KW] and the taps oh * s - p + kh * d.
//   conv2d           input side -> output side: im2col + the blocked GEMM (util/gemm.h);
//   conv2d_adjoint   output side -> input side: GEMM + col2im (the same sums read the other way round);
//   conv2d_weight    both sides -> weight: GEMM of the output side with the im2col of the input side.
// A transposed convolution is conv2d_adjoint with the roles swapped: its input is the output side (O = its input
// channels, which is why its weight is [C_in, C_out / groups, kH, kW]) and its output is the input side. Its
// backward is then conv2d (input gradient) and conv2d_weight with the same swap. 1-D tensors are 2-D with H = 1;
// inputs and outputs may have any dim order (NCHW or NHWC): everything is addressed through strides, and GEMM
// operands are views whenever a layout allows it. Half / BFloat16 compute in float over dense copies.
#pragma once

#include <vector>

#include "etrt/kernels/util/gemm.h"
#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace conv_detail {

using S4 = std::array<int64_t, 4>;

/// (n, c, h, w) strides of a rank-3 (h = 1) or rank-4 tensor; a rank-1 tensor (bias) has its stride first.
inline S4 s4(const Tensor& t) {
  if (t.dim() == 4) return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
  if (t.dim() == 3) return {t.stride(0), t.stride(1), 0, t.stride(2)};
  return {t.stride(0), 0, 0, 0};
}
inline S4 z4(const Tensor& t) {
  if (t.dim() == 4) return {t.size(0), t.size(1), t.size(2), t.size(3)};
  return {t.size(0), t.size(1), 1, t.size(2)};
}
/// s4 of a dense row-major tensor of these sizes.
inline S4 dense4(std::span<const int64_t> z) {
  S4 s{};
  int64_t acc = 1;
  for (size_t i = z.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(z[i], 1);
  }
  if (z.size() == 3) return {s[0], s[1], 0, s[2]};
  return s;
}

inline Result<std::array<int64_t, 2>> spatial(std::string_view op, std::string_view what, std::span<const int64_t> v,
                                              int nsp, int64_t dflt) {
  if (v.empty()) return std::array<int64_t, 2>{dflt, dflt};
  if (v.size() == 1) return nsp == 1 ? std::array<int64_t, 2>{dflt == 0 ? 0 : 1, v[0]} : std::array<int64_t, 2>{v[0], v[0]};
  if (static_cast<int>(v.size()) == nsp && nsp == 2) return std::array<int64_t, 2>{v[0], v[1]};
  return fail(Error::InvalidArgument, op, ": ", what, " must have ", nsp, " values, got ", shape_str(v));
}

struct Geo {
  int64_t N, C, H, W;  // input side
  int64_t O, OH, OW;   // output side
  int64_t KH, KW, groups;
  std::array<int64_t, 2> st, pd, dl;
  int64_t Cg() const { return C / groups; }
  int64_t Og() const { return O / groups; }
  int64_t P() const { return OH * OW; }
  int64_t K() const { return Cg() * KH * KW; }
};

/// Output columns [a, b) whose input column ow * s + off lies in [0, W).
inline std::pair<int64_t, int64_t> valid_cols(int64_t OW, int64_t W, int64_t s, int64_t off) {
  const int64_t a = off >= 0 ? 0 : std::min(OW, (-off + s - 1) / s);
  const int64_t b = W - off <= 0 ? 0 : std::max(a, std::min(OW, (W - off + s - 1) / s));
  return {a, b};
}

/// col[k = (c, kh, kw)][p = (oh, ow)] = input plane c at the tap's position, 0 in the padding; `ip` is the
/// group's first channel.
template <class T>
inline void im2col(const T* ip, S4 is, const Geo& g, T* col) {
  const int64_t P = g.P(), OW = g.OW;
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* crow = col + ((c * g.KH + kh) * g.KW + kw) * P;
        const int64_t off = kw * g.dl[1] - g.pd[1];
        const auto [owa, owb] = valid_cols(OW, g.W, g.st[1], off);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          T* cp = crow + oh * OW;
          const int64_t ih = oh * g.st[0] - g.pd[0] + kh * g.dl[0];
          if (ih < 0 || ih >= g.H) {
            for (int64_t ow = 0; ow < OW; ++ow) cp[ow] = T(0);
            continue;
          }
          const T* irow = ip + c * is[1] + ih * is[2];
          for (int64_t ow = 0; ow < owa; ++ow) cp[ow] = T(0);
          if (is[3] == 1 && g.st[1] == 1) {
            for (int64_t ow = owa; ow < owb; ++ow) cp[ow] = irow[ow + off];
          } else {
            for (int64_t ow = owa; ow < owb; ++ow) cp[ow] = irow[(ow * g.st[1] + off) * is[3]];
          }
          for (int64_t ow = owb; ow < OW; ++ow) cp[ow] = T(0);
        }
      }
}

/// The adjoint of im2col: every col entry is added to the input position its tap reads (padding taps drop out).
template <class T>
inline void col2im_add(const T* col, const Geo& g, T* gp, S4 gs) {
  const int64_t P = g.P(), OW = g.OW;
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const T* crow = col + ((c * g.KH + kh) * g.KW + kw) * P;
        const int64_t off = kw * g.dl[1] - g.pd[1];
        const auto [owa, owb] = valid_cols(OW, g.W, g.st[1], off);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * g.st[0] - g.pd[0] + kh * g.dl[0];
          if (ih < 0 || ih >= g.H) continue;
          T* grow = gp + c * gs[1] + ih * gs[2];
          const T* cp = crow + oh * OW;
          for (int64_t ow = owa; ow < owb; ++ow) grow[(ow * g.st[1] + off) * gs[3]] += cp[ow];
        }
      }
}

/// The weight as an O x K matrix (k = (c, kh, kw)) with row stride `rs`: a view when the weight's (c, kh, kw) dims
/// are row-major dense, else a packed copy in `buf`.
template <class T>
inline const T* weight_matrix(const T* w, S4 ws, const Geo& g, std::vector<T>& buf, int64_t& rs) {
  if (ws[3] == 1 && ws[2] == g.KW && ws[1] == g.KH * g.KW) {
    rs = ws[0];
    return w;
  }
  const int64_t K = g.K();
  buf.resize(static_cast<size_t>(g.O * K));
  for (int64_t o = 0; o < g.O; ++o)
    for (int64_t c = 0; c < g.Cg(); ++c)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw)
          buf[o * K + (c * g.KH + kh) * g.KW + kw] = w[o * ws[0] + c * ws[1] + kh * ws[2] + kw * ws[3]];
  rs = K;
  return buf.data();
}

/// A [channels, rows, cols] block of an (n, c, h, w)-strided tensor as a channels x (rows * cols) matrix: a view
/// when rows and cols form one linear axis, else a dense copy in `buf`.
template <class T>
inline gemm::MatRef<T> plane_matrix(const T* p, S4 s, int64_t ch, int64_t rows, int64_t cols, std::vector<T>& buf) {
  if (rows == 1 || s[2] == cols * s[3]) return {p, s[1], s[3]};
  buf.resize(static_cast<size_t>(ch * rows * cols));
  for (int64_t c = 0; c < ch; ++c)
    for (int64_t h = 0; h < rows; ++h)
      for (int64_t w = 0; w < cols; ++w) buf[(c * rows + h) * cols + w] = p[c * s[1] + h * s[2] + w * s[3]];
  return {buf.data(), rows * cols, 1};
}

/// Sets every element of a side ([N, ch, rows, cols]) to bias[c] (or 0).
template <class T>
inline void fill_bias(T* p, S4 s, int64_t N, int64_t ch, int64_t rows, int64_t cols, const T* bias, int64_t bias_s) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < ch; ++c) {
      const T b = bias ? bias[c * bias_s] : T(0);
      T* cp = p + n * s[0] + c * s[1];
      for (int64_t h = 0; h < rows; ++h)
        for (int64_t w = 0; w < cols; ++w) cp[h * s[2] + w * s[3]] = b;
    }
}

/// The loop nest a depthwise convolution and its adjoint share: for each plane (n, c), filter tap (kh, kw) and
/// output row oh whose input row ih lies inside the image, `row(n, c, wv, ih, oh, owa, owb, off)` handles the
/// output columns [owa, owb), each reading input column ow * stride + off, with the tap's weight wv.
template <class T, class Row>
inline void depthwise_rows(const T* w, S4 ws, const Geo& g, Row&& row) {
  const auto st = g.st, pd = g.pd, dl = g.dl;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const T wv = w[c * ws[0] + kh * ws[2] + kw * ws[3]];
          const int64_t off = kw * dl[1] - pd[1];
          const auto [owa, owb] = valid_cols(g.OW, g.W, st[1], off);
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = oh * st[0] - pd[0] + kh * dl[0];
            if (ih >= 0 && ih < g.H) row(n, c, wv, ih, oh, owa, owb, off);
          }
        }
}

/// out (output side) = bias + convolution of in (input side) with w.
template <class T>
inline void conv2d(const T* in, S4 is, const T* w, S4 ws, const T* bias, int64_t bias_s, T* out, S4 os,
                   const Geo& g) {
  const int64_t Cg = g.Cg(), Og = g.Og(), OH = g.OH, OW = g.OW, KH = g.KH, KW = g.KW;
  const auto st = g.st, pd = g.pd;
  // Initialise out with the bias (the GEMM then accumulates with beta = 1).
  fill_bias(out, os, g.N, g.O, OH, OW, bias, bias_s);
  if (Cg == 1 && Og == 1 && KH * KW <= 64) {  // depthwise: direct loop over each plane
    depthwise_rows(w, ws, g, [&](int64_t n, int64_t c, T wv, int64_t ih, int64_t oh, int64_t owa, int64_t owb,
                                 int64_t off) {
      const T* irow = in + n * is[0] + c * is[1] + ih * is[2];
      T* orow = out + n * os[0] + c * os[1] + oh * os[2];
      for (int64_t ow = owa; ow < owb; ++ow) orow[ow * os[3]] += wv * irow[(ow * st[1] + off) * is[3]];
    });
    return;
  }
  const int64_t P = g.P(), K = g.K();
  // Output pixels (oh, ow) must form one linear axis in out: true for any layout with H outside W.
  const bool linear_p = OH == 1 || os[2] == OW * os[3];
  // The input itself is the im2col matrix when every tap is the identity (the sides then have equal sizes).
  const bool pointwise = KH == 1 && KW == 1 && st[0] == 1 && st[1] == 1 && pd[0] == 0 && pd[1] == 0 &&
                         g.H == OH && g.W == OW && (g.H == 1 || is[2] == g.W * is[3]);
  std::vector<T> col(pointwise ? 0 : static_cast<size_t>(K * P));
  std::vector<T> tmp(linear_p ? 0 : static_cast<size_t>(Og * P));
  std::vector<T> wbuf;
  int64_t wrs;
  const T* wm = weight_matrix(w, ws, g, wbuf, wrs);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      gemm::MatRef<T> B;
      const T* ig = in + n * is[0] + grp * Cg * is[1];
      if (pointwise) {
        B = {ig, is[1], is[3]};
      } else {
        im2col(ig, is, g, col.data());
        B = {col.data(), P, 1};
      }
      const gemm::MatRef<T> A{wm + grp * Og * wrs, wrs, 1};
      T* og = out + n * os[0] + grp * Og * os[1];
      if (linear_p) {
        gemm::gemm<T>(Og, P, K, T(1), A, B, T(1), og, os[1], os[3]);
      } else {
        gemm::gemm<T>(Og, P, K, T(1), A, B, T(0), tmp.data(), P, 1);
        for (int64_t o = 0; o < Og; ++o)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) og[o * os[1] + oh * os[2] + ow * os[3]] += tmp[o * P + oh * OW + ow];
      }
    }
}

/// gi (input side) = bias + the adjoint of conv2d applied to go (output side): each go element spreads
/// w[o, c, kh, kw] * go[o, oh, ow] onto the input position its tap reads.
template <class T>
inline void conv2d_adjoint(const T* go, S4 gos, const T* w, S4 ws, const T* bias, int64_t bias_s, T* gi, S4 gis,
                           const Geo& g) {
  const int64_t Cg = g.Cg(), Og = g.Og(), OH = g.OH, OW = g.OW, KH = g.KH, KW = g.KW;
  const auto st = g.st, pd = g.pd;
  fill_bias(gi, gis, g.N, g.C, g.H, g.W, bias, bias_s);
  if (Cg == 1 && Og == 1 && KH * KW <= 64) {  // depthwise: direct loop over each plane
    depthwise_rows(w, ws, g, [&](int64_t n, int64_t c, T wv, int64_t ih, int64_t oh, int64_t owa, int64_t owb,
                                 int64_t off) {
      T* irow = gi + n * gis[0] + c * gis[1] + ih * gis[2];
      const T* grow = go + n * gos[0] + c * gos[1] + oh * gos[2];
      for (int64_t ow = owa; ow < owb; ++ow) irow[(ow * st[1] + off) * gis[3]] += wv * grow[ow * gos[3]];
    });
    return;
  }
  const int64_t P = g.P(), K = g.K();
  const bool pointwise = KH == 1 && KW == 1 && st[0] == 1 && st[1] == 1 && pd[0] == 0 && pd[1] == 0 &&
                         g.H == OH && g.W == OW && (g.H == 1 || gis[2] == g.W * gis[3]);
  std::vector<T> col(pointwise ? 0 : static_cast<size_t>(K * P)), gbuf, wbuf;
  int64_t wrs;
  const T* wm = weight_matrix(w, ws, g, wbuf, wrs);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const gemm::MatRef<T> A{wm + grp * Og * wrs, 1, wrs};  // the group's weight transposed: K x Og
      const gemm::MatRef<T> B = plane_matrix(go + n * gos[0] + grp * Og * gos[1], gos, Og, OH, OW, gbuf);
      T* ig = gi + n * gis[0] + grp * Cg * gis[1];
      if (pointwise) {
        gemm::gemm<T>(Cg, P, Og, T(1), A, B, T(1), ig, gis[1], gis[3]);
      } else {
        gemm::gemm<T>(K, P, Og, T(1), A, B, T(0), col.data(), P, 1);
        col2im_add(col.data(), g, ig, gis);
      }
    }
}

/// gw (weight-shaped) = sum over the batch and the output positions of go[o, p] * im2col(in)[k, p].
template <class T>
inline void conv2d_weight(const T* in, S4 is, const T* go, S4 gos, T* gw, S4 gws, const Geo& g) {
  const int64_t Cg = g.Cg(), Og = g.Og(), P = g.P(), K = g.K();
  std::vector<T> dw(static_cast<size_t>(g.O * K), T(0));
  const bool pointwise = g.KH == 1 && g.KW == 1 && g.st[0] == 1 && g.st[1] == 1 && g.pd[0] == 0 && g.pd[1] == 0 &&
                         g.H == g.OH && g.W == g.OW && (g.H == 1 || is[2] == g.W * is[3]);
  std::vector<T> col(pointwise ? 0 : static_cast<size_t>(K * P)), gbuf;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const gemm::MatRef<T> A = plane_matrix(go + n * gos[0] + grp * Og * gos[1], gos, Og, g.OH, g.OW, gbuf);
      const T* ig = in + n * is[0] + grp * Cg * is[1];
      gemm::MatRef<T> B;  // P x K
      if (pointwise) {
        B = {ig, is[3], is[1]};
      } else {
        im2col(ig, is, g, col.data());
        B = {col.data(), 1, P};
      }
      gemm::gemm<T>(Og, K, P, T(1), A, B, T(1), dw.data() + grp * Og * K, K, 1);
    }
  for (int64_t o = 0; o < g.O; ++o)
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw)
          gw[o * gws[0] + c * gws[1] + kh * gws[2] + kw * gws[3]] = dw[o * K + (c * g.KH + kh) * g.KW + kw];
}

/// gb[c] = sum over n, h, w of x[n, c, h, w], accumulated in double.
template <class T>
inline void channel_sums(const T* x, S4 xs, int64_t N, int64_t ch, int64_t rows, int64_t cols, T* gb, int64_t gbs) {
  for (int64_t c = 0; c < ch; ++c) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < rows; ++h)
        for (int64_t w = 0; w < cols; ++w) s += static_cast<double>(x[n * xs[0] + c * xs[1] + h * xs[2] + w * xs[3]]);
    gb[c * gbs] = static_cast<T>(s);
  }
}

/// A tensor's data as the compute type C with s4 strides: the tensor itself when its element type is C, else a
/// dense converted copy (read from the tensor when `load`; written back by store()).
template <class T, class C>
struct Operand {
  std::vector<C> copy;
  C* data = nullptr;
  S4 strides{};
  explicit Operand(const Tensor* t, bool load = true) {
    if (!t) return;
    if constexpr (std::is_same_v<T, C>) {
      data = t->data_as<C>();
      strides = s4(*t);
    } else {
      copy.resize(static_cast<size_t>(t->numel()));
      if (load) {
        size_t i = 0;
        const T* d = t->data_as<T>();
        mv::for_each_view_offset(mv::view_of(*t), [&](int64_t o) { copy[i++] = static_cast<C>(d[o]); });
      }
      data = copy.data();
      strides = dense4(t->sizes());
    }
  }
  void store(const Tensor& t) const {
    if constexpr (!std::is_same_v<T, C>) {
      size_t i = 0;
      T* d = t.data_as<T>();
      mv::for_each_view_offset(mv::view_of(t), [&](int64_t o) { d[o] = T(copy[i++]); });
    }
  }
};

/// Computes f.template operator()<T, C>() with C = T for float / double and C = float for Half / BFloat16.
template <class Dtypes, class F>
inline Status with_compute_type(ScalarType dt, std::string_view op, F&& f) {
  return visit(dt, Dtypes{}, op, [&]<class T>() -> Status {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) f.template operator()<T, T>();
    else f.template operator()<T, float>();
    return Status{};
  });
}

/// The checked arguments of one convolution: its geometry (Note [conv geometry]) and the forward output's sizes.
struct Plan {
  Geo g;
  int64_t out_c, out_h, out_w;
};

/// torch's argument checks for convolution (plain or transposed) of `input` with `weight` and `bias` (may be null).
inline Result<Plan> plan(std::string_view op, const Tensor& input, const Tensor& weight, const Tensor* bias,
                         std::span<const int64_t> stride, std::span<const int64_t> padding,
                         std::span<const int64_t> dilation, bool transposed, std::span<const int64_t> output_padding,
                         int64_t groups) {
  if (input.dim() != 3 && input.dim() != 4)
    return fail(Error::InvalidArgument, op, ": expected a 3-D or 4-D input, got ", input.describe());
  if (weight.dim() != input.dim())
    return fail(Error::InvalidArgument, op, ": weight ", weight.describe(), " must have the input's rank ", input.dim());
  const int nsp = input.dim() - 2;
  ETRT_TRY(auto st, spatial(op, "stride", stride, nsp, 1));
  ETRT_TRY(auto pd, spatial(op, "padding", padding, nsp, 0));
  ETRT_TRY(auto dl, spatial(op, "dilation", dilation, nsp, 1));
  std::array<int64_t, 2> opd{0, 0};
  if (transposed) {
    ETRT_TRY(opd, spatial(op, "output_padding", output_padding, nsp, 0));
  }
  if (nsp == 1) {  // 1-D: the H axis is a fixed unit axis
    st[0] = 1;
    pd[0] = 0;
    dl[0] = 1;
    opd[0] = 0;
  }
  const auto iz = z4(input), wz = z4(weight);
  const int64_t N = iz[0], C = iz[1], H = iz[2], W = iz[3], KH = wz[2], KW = wz[3];
  if (st[0] <= 0 || st[1] <= 0 || dl[0] <= 0 || dl[1] <= 0 || pd[0] < 0 || pd[1] < 0)
    return fail(Error::InvalidArgument, op, ": stride and dilation must be positive and padding non-negative");
  // The size formulas and the tap positions (position * stride - padding + tap * dilation) must fit in int64.
  // torch has no such limit; arguments this large are refused instead of overflowing. A plain convolution's
  // positions are bounded by the padded input, a transposed one's by its stretched input.
  auto too_large = [&](int i) {
    using I = __int128;
    const I in = i == 0 ? H : W, k = i == 0 ? KH : KW;
    const I m = (transposed ? in * st[i] : in) + 2 * I(pd[i]) + I(dl[i]) * k + opd[i];
    return m > (I(1) << 62);
  };
  auto magnitude_error = [&]() {
    return fail(Error::InvalidArgument, op, ": stride ", shape_str(stride), ", padding ", shape_str(padding),
                ", dilation ", shape_str(dilation), " are too large for int64 index arithmetic");
  };
  if (!transposed) {
    const int64_t O = wz[0];
    if (groups <= 0 || C % groups != 0 || O % groups != 0)
      return fail(Error::InvalidArgument, op, ": groups ", groups, " must be positive and divide in channels ", C,
                  " and out channels ", O);
    if (wz[1] != C / groups)
      return fail(Error::InvalidArgument, op, ": weight ", weight.describe(), " does not match ", C,
                  " input channels in ", groups, " group(s) (", C / groups, " per group)");
    if (bias && (bias->dim() != 1 || bias->size(0) != O))
      return fail(Error::InvalidArgument, op, ": bias ", bias->describe(), " must be [", O, "]");
    if (too_large(0) || too_large(1)) return magnitude_error();
    const int64_t OH = (H + 2 * pd[0] - dl[0] * (KH - 1) - 1) / st[0] + 1;
    const int64_t OW = (W + 2 * pd[1] - dl[1] * (KW - 1) - 1) / st[1] + 1;
    if (H + 2 * pd[0] < dl[0] * (KH - 1) + 1 || W + 2 * pd[1] < dl[1] * (KW - 1) + 1 || KH <= 0 || KW <= 0)
      return fail(Error::InvalidArgument, op, ": kernel ", weight.describe(), " is larger than the padded input ",
                  input.describe());
    return Plan{Geo{N, C, H, W, O, OH, OW, KH, KW, groups, st, pd, dl}, O, OH, OW};
  }
  // Transposed: the input is the geometry's output side (Note [conv geometry]).
  if (groups <= 0) return fail(Error::InvalidArgument, op, ": non-positive groups ", groups, " is not supported");
  if (wz[0] <= 0 || wz[1] <= 0 || KH <= 0 || KW <= 0)
    return fail(Error::InvalidArgument, op, ": expected a non-empty weight, got ", weight.describe());
  if (wz[0] % groups != 0)
    return fail(Error::InvalidArgument, op, ": given groups=", groups, ", expected weight ", weight.describe(),
                " to be divisible by ", groups, " at dimension 0");
  if (C != wz[0])
    return fail(Error::InvalidArgument, op, ": given transposed=1, weight ", weight.describe(), " expects input ",
                input.describe(), " to have ", wz[0], " channels, got ", C);
  const int64_t Cout = wz[1] * groups;
  if (bias && (bias->dim() != 1 || bias->size(0) != Cout))
    return fail(Error::InvalidArgument, op, ": given transposed=1, weight ", weight.describe(), " expects bias ",
                bias->describe(), " to be [", Cout, "]");
  if (opd[0] < 0 || opd[1] < 0)
    return fail(Error::InvalidArgument, op, ": negative output_padding ", shape_str(output_padding),
                " is not supported");
  for (int i = 0; i < 2; ++i)
    if (opd[i] >= st[i] && opd[i] >= dl[i])
      return fail(Error::InvalidArgument, op, ": output padding must be smaller than either stride or dilation, got ",
                  "output_padding ", shape_str(output_padding), ", stride ", shape_str(stride), ", dilation ",
                  shape_str(dilation));
  if (N > 0 && C > 0 && (H == 0 || W == 0))
    return fail(Error::InvalidArgument, op, ": only zero batch or zero channel inputs may be empty, got ",
                input.describe());
  if (too_large(0) || too_large(1)) return magnitude_error();
  const int64_t OH = (H - 1) * st[0] - 2 * pd[0] + dl[0] * (KH - 1) + opd[0] + 1;
  const int64_t OW = (W - 1) * st[1] - 2 * pd[1] + dl[1] * (KW - 1) + opd[1] + 1;
  if (OH <= 0 || OW <= 0)
    return fail(Error::InvalidArgument, op, ": input ", input.describe(), " gives output size ", OH, " x ", OW,
                ", which is too small");
  return Plan{Geo{N, Cout, OH, OW, C, H, W, KH, KW, groups, st, pd, dl}, Cout, OH, OW};
}

/// Resizes `t` to [N, c, w] (rank 3) or [N, c, h, w].
inline Status resize_nchw(KernelContext& ctx, std::string_view op, Tensor& t, int nsp, int64_t N, int64_t c, int64_t h,
                          int64_t w) {
  const std::array<int64_t, 4> s4{N, c, h, w};
  const std::array<int64_t, 3> s3{N, c, w};
  if (nsp == 2) return ctx.resize(op, t, s4);
  return ctx.resize(op, t, s3);
}

}  // namespace conv_detail

template <class Dtypes>
Status convolution_out(KernelContext& ctx, const Tensor& input, const Tensor& weight, const Tensor* bias,
                       std::span<const int64_t> stride, std::span<const int64_t> padding,
                       std::span<const int64_t> dilation, bool transposed, std::span<const int64_t> output_padding,
                       int64_t groups, Tensor& out) {
  constexpr std::string_view op = "convolution.out";
  if (input.dtype() != out.dtype() || weight.dtype() != out.dtype() || (bias && bias->dtype() != out.dtype()))
    return fail(Error::InvalidArgument, op, ": input, weight, bias and out must share a dtype, got ", name(input.dtype()),
                ", ", name(weight.dtype()), ", ", bias ? name(bias->dtype()) : "None", ", ", name(out.dtype()));
  ETRT_TRY(const auto pl, conv_detail::plan(op, input, weight, bias, stride, padding, dilation, transposed,
                                            output_padding, groups));
  ETRT_CHECK_OK(conv_detail::resize_nchw(ctx, op, out, input.dim() - 2, pl.g.N, pl.out_c, pl.out_h, pl.out_w));
  if (out.numel() == 0) return {};
  return conv_detail::with_compute_type<Dtypes>(out.dtype(), op, [&]<class T, class C>() {
    using conv_detail::Operand;
    const Operand<T, C> x(&input), w(&weight), b(bias);
    Operand<T, C> y(&out, false);
    const int64_t bs = bias ? b.strides[0] : 0;
    if (transposed)
      conv_detail::conv2d_adjoint<C>(x.data, x.strides, w.data, w.strides, b.data, bs, y.data, y.strides, pl.g);
    else
      conv_detail::conv2d<C>(x.data, x.strides, w.data, w.strides, b.data, bs, y.data, y.strides, pl.g);
    y.store(out);
  });
}

/// Gradients of convolution.out per output_mask: out0 = d input, out1 = d weight, out2 = d bias ([out channels];
/// bias_sizes does not change it, as in torch). Outputs whose mask bit is false are not touched.
template <class Dtypes>
Status convolution_backward_out(KernelContext& ctx, const Tensor& grad_output, const Tensor& input,
                                const Tensor& weight, std::optional<std::span<const int64_t>> bias_sizes,
                                std::span<const int64_t> stride, std::span<const int64_t> padding,
                                std::span<const int64_t> dilation, bool transposed,
                                std::span<const int64_t> output_padding, int64_t groups,
                                const std::vector<bool>& output_mask, Tensor& out0, Tensor& out1, Tensor& out2) {
  (void)bias_sizes;
  constexpr std::string_view op = "convolution_backward.out";
  if (output_mask.size() != 3)
    return fail(Error::InvalidArgument, op, ": output_mask must have 3 values, got ", output_mask.size());
  const ScalarType dt = grad_output.dtype();
  if (input.dtype() != dt || weight.dtype() != dt)
    return fail(Error::InvalidArgument, op, ": grad_output, input and weight must share a dtype, got ", name(dt), ", ",
                name(input.dtype()), ", ", name(weight.dtype()));
  Tensor* outs[3] = {&out0, &out1, &out2};
  for (int i = 0; i < 3; ++i)
    if (output_mask[i] && outs[i]->dtype() != dt)
      return fail(Error::InvalidArgument, op, ": out", i, " dtype ", name(outs[i]->dtype()),
                  " != grad_output dtype ", name(dt));
  ETRT_TRY(const auto pl, conv_detail::plan(op, input, weight, nullptr, stride, padding, dilation, transposed,
                                            output_padding, groups));
  const int nsp = input.dim() - 2;
  if (grad_output.dim() != input.dim() || grad_output.size(0) != pl.g.N || grad_output.size(1) != pl.out_c ||
      (nsp == 2 && grad_output.size(2) != pl.out_h) || grad_output.size(input.dim() - 1) != pl.out_w) {
    const std::array<int64_t, 4> e4{pl.g.N, pl.out_c, pl.out_h, pl.out_w};
    const std::array<int64_t, 3> e3{pl.g.N, pl.out_c, pl.out_w};
    return fail(Error::InvalidArgument, op, ": grad_output ", grad_output.describe(),
                " must have the forward output's shape ", nsp == 2 ? shape_str(e4) : shape_str(e3));
  }
  if (output_mask[0]) ETRT_CHECK_OK(ctx.resize(op, out0, input.sizes()));
  if (output_mask[1]) ETRT_CHECK_OK(ctx.resize(op, out1, weight.sizes()));
  if (output_mask[2]) {
    const std::array<int64_t, 1> bsz{pl.out_c};
    ETRT_CHECK_OK(ctx.resize(op, out2, bsz));
  }
  const bool need[3] = {output_mask[0] && out0.numel() > 0, output_mask[1] && out1.numel() > 0,
                        output_mask[2] && out2.numel() > 0};
  if (!need[0] && !need[1] && !need[2]) return {};
  const conv_detail::Geo& g = pl.g;
  return conv_detail::with_compute_type<Dtypes>(dt, op, [&]<class T, class C>() {
    using conv_detail::Operand;
    const Operand<T, C> dy(&grad_output), x(&input), w(&weight);
    // Plain: grad_output is the output side and input the input side; transposed: the other way round.
    const Operand<T, C>& in_side = transposed ? dy : x;
    const Operand<T, C>& out_side = transposed ? x : dy;
    if (need[0]) {
      Operand<T, C> dx(&out0, false);
      if (transposed)
        conv_detail::conv2d<C>(dy.data, dy.strides, w.data, w.strides, nullptr, 0, dx.data, dx.strides, g);
      else
        conv_detail::conv2d_adjoint<C>(dy.data, dy.strides, w.data, w.strides, nullptr, 0, dx.data, dx.strides, g);
      dx.store(out0);
    }
    if (need[1]) {
      Operand<T, C> dw(&out1, false);
      conv_detail::conv2d_weight<C>(in_side.data, in_side.strides, out_side.data, out_side.strides, dw.data,
                                    dw.strides, g);
      dw.store(out1);
    }
    if (need[2]) {
      Operand<T, C> db(&out2, false);
      conv_detail::channel_sums<C>(dy.data, dy.strides, g.N, pl.out_c, pl.out_h, pl.out_w, db.data, db.strides[0]);
      db.store(out2);
    }
  });
}

}  // namespace etrt::kernels
