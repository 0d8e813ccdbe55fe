// convolution.out for 1-D and 2-D, non-transposed: im2col + the blocked GEMM (util/gemm.h); depthwise-like groups
// (one input channel per group) run a direct loop instead. 1-D inputs are treated as 2-D with H = 1. Inputs and the
// output may have any dim order (NCHW or NHWC): everything is addressed through strides.
#pragma once

#include <vector>

#include "etrt/kernels/util/gemm.h"
#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace conv_detail {

/// (n, c, h, w) strides of a rank-3 (h = 1) or rank-4 tensor.
inline std::array<int64_t, 4> s4(const Tensor& t) {
  if (t.dim() == 4) return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
  return {t.stride(0), t.stride(1), 0, t.stride(2)};
}
inline std::array<int64_t, 4> z4(const Tensor& t) {
  if (t.dim() == 4) return {t.size(0), t.size(1), t.size(2), t.size(3)};
  return {t.size(0), t.size(1), 1, t.size(2)};
}

inline Result<std::array<int64_t, 2>> spatial(std::string_view op, std::string_view what, std::span<const int64_t> v,
                                              int nsp, int64_t dflt) {
  if (v.empty()) return std::array<int64_t, 2>{dflt, dflt};
  if (v.size() == 1) return nsp == 1 ? std::array<int64_t, 2>{dflt == 0 ? 0 : 1, v[0]} : std::array<int64_t, 2>{v[0], v[0]};
  if (static_cast<int>(v.size()) == nsp && nsp == 2) return std::array<int64_t, 2>{v[0], v[1]};
  return fail(Error::InvalidArgument, op, ": ", what, " must have ", nsp, " values, got ", shape_str(v));
}

/// The compute: T is float or double.
template <class T>
inline void conv2d(const T* in, std::array<int64_t, 4> is, const T* w, std::array<int64_t, 4> ws, const T* bias,
                   int64_t bias_s, T* out, std::array<int64_t, 4> os, int64_t N, int64_t C, int64_t H, int64_t W,
                   int64_t O, int64_t KH, int64_t KW, int64_t OH, int64_t OW, std::array<int64_t, 2> st,
                   std::array<int64_t, 2> pd, std::array<int64_t, 2> dl, int64_t groups) {
  const int64_t Cg = C / groups, Og = O / groups;
  const int64_t P = OH * OW, K = Cg * KH * KW;
  // Initialise out with the bias (the GEMM then accumulates with beta = 1).
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const T b = bias ? bias[o * bias_s] : T(0);
      T* op = out + n * os[0] + o * os[1];
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) op[oh * os[2] + ow * os[3]] = b;
    }
  if (Cg == 1 && Og == 1 && KH * KW <= 64) {  // depthwise: direct loop over each plane
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        const T* ip = in + n * is[0] + c * is[1];
        const T* wp = w + c * ws[0];
        T* op = out + n * os[0] + c * os[1];
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw) {
            const T wv = wp[kh * ws[2] + kw * ws[3]];
            for (int64_t oh = 0; oh < OH; ++oh) {
              const int64_t ih = oh * st[0] - pd[0] + kh * dl[0];
              if (ih < 0 || ih >= H) continue;
              const T* irow = ip + ih * is[2];
              T* orow = op + oh * os[2];
              // valid ow: 0 <= ow*s + (kw*d - p) < W
              const int64_t off = kw * dl[1] - pd[1];
              int64_t owa = off >= 0 ? 0 : (-off + st[1] - 1) / st[1];
              int64_t owb = W - off <= 0 ? 0 : std::min(OW, (W - off + st[1] - 1) / st[1]);
              for (int64_t ow = owa; ow < owb; ++ow) orow[ow * os[3]] += wv * irow[(ow * st[1] + off) * is[3]];
            }
          }
      }
    return;
  }
  // Output pixels (oh, ow) must form one linear axis in out: true for any layout with H outside W.
  const bool linear_p = OH == 1 || os[2] == OW * os[3];
  const bool pointwise = KH == 1 && KW == 1 && st[0] == 1 && st[1] == 1 && pd[0] == 0 && pd[1] == 0 &&
                         (H == 1 || is[2] == W * is[3]);
  std::vector<T> col(pointwise ? 0 : static_cast<size_t>(K * P));
  std::vector<T> tmp(linear_p ? 0 : static_cast<size_t>(Og * P));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      gemm::MatRef<T> B;
      if (pointwise) {
        B = {in + n * is[0] + g * Cg * is[1], is[1], is[3]};
      } else {
        // col[k = (c, kh, kw)][p = (oh, ow)]
        for (int64_t c = 0; c < Cg; ++c) {
          const T* ip = in + n * is[0] + (g * Cg + c) * is[1];
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              T* crow = col.data() + ((c * KH + kh) * KW + kw) * P;
              const int64_t off = kw * dl[1] - pd[1];
              const int64_t owa = off >= 0 ? 0 : std::min(OW, (-off + st[1] - 1) / st[1]);
              const int64_t owb = W - off <= 0 ? 0 : std::max(owa, std::min(OW, (W - off + st[1] - 1) / st[1]));
              for (int64_t oh = 0; oh < OH; ++oh) {
                T* cp = crow + oh * OW;
                const int64_t ih = oh * st[0] - pd[0] + kh * dl[0];
                if (ih < 0 || ih >= H) {
                  for (int64_t ow = 0; ow < OW; ++ow) cp[ow] = T(0);
                  continue;
                }
                const T* irow = ip + ih * is[2] + off * is[3];
                for (int64_t ow = 0; ow < owa; ++ow) cp[ow] = T(0);
                if (is[3] == 1 && st[1] == 1) {
                  for (int64_t ow = owa; ow < owb; ++ow) cp[ow] = irow[ow];
                } else {
                  const int64_t step = st[1] * is[3];
                  for (int64_t ow = owa; ow < owb; ++ow) cp[ow] = irow[ow * step];
                }
                for (int64_t ow = owb; ow < OW; ++ow) cp[ow] = T(0);
              }
            }
        }
        B = {col.data(), P, 1};
      }
      // weight_g as Og x K: k = (c, kh, kw) is linear when the weight's (c, kh, kw) dims are row-major dense.
      const T* wg = w + g * Og * ws[0];
      std::vector<T> wtmp;
      gemm::MatRef<T> A{wg, ws[0], 1};
      if (!(ws[3] == 1 && ws[2] == KW && ws[1] == KH * KW)) {  // not row-major over (c, kh, kw): repack
        wtmp.resize(static_cast<size_t>(Og * K));
        for (int64_t o = 0; o < Og; ++o)
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw)
                wtmp[o * K + (c * KH + kh) * KW + kw] = wg[o * ws[0] + c * ws[1] + kh * ws[2] + kw * ws[3]];
        A = {wtmp.data(), K, 1};
      }
      T* og = out + n * os[0] + g * Og * os[1];
      if (linear_p) {
        gemm::gemm<T>(Og, P, K, T(1), A, B, T(1), og, os[1], os[3]);
      } else {
        std::fill(tmp.begin(), tmp.end(), T(0));
        gemm::gemm<T>(Og, P, K, T(1), A, B, T(0), tmp.data(), P, 1);
        for (int64_t o = 0; o < Og; ++o)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) og[o * os[1] + oh * os[2] + ow * os[3]] += tmp[o * P + oh * OW + ow];
      }
    }
}

}  // namespace conv_detail

template <class Dtypes>
Status convolution_out(KernelContext& ctx, const Tensor& input, const Tensor& weight, const Tensor* bias,
                       std::span<const int64_t> stride, std::span<const int64_t> padding,
                       std::span<const int64_t> dilation, bool transposed, std::span<const int64_t> output_padding,
                       int64_t groups, Tensor& out) {
  (void)output_padding;
  constexpr std::string_view op = "convolution.out";
  if (transposed) return fail(Error::NotSupported, op, ": transposed convolution is not supported");
  if (input.dim() != 3 && input.dim() != 4)
    return fail(Error::InvalidArgument, op, ": expected a 3-D or 4-D input, got ", input.describe());
  if (weight.dim() != input.dim())
    return fail(Error::InvalidArgument, op, ": weight ", weight.describe(), " must have the input's rank ", input.dim());
  if (input.dtype() != out.dtype() || weight.dtype() != out.dtype() || (bias && bias->dtype() != out.dtype()))
    return fail(Error::InvalidArgument, op, ": input, weight, bias and out must share a dtype, got ", name(input.dtype()),
                ", ", name(weight.dtype()), ", ", bias ? name(bias->dtype()) : "None", ", ", name(out.dtype()));
  const int nsp = input.dim() - 2;
  ETRT_TRY(auto st, conv_detail::spatial(op, "stride", stride, nsp, 1));
  ETRT_TRY(auto pd, conv_detail::spatial(op, "padding", padding, nsp, 0));
  ETRT_TRY(auto dl, conv_detail::spatial(op, "dilation", dilation, nsp, 1));
  if (nsp == 1) {  // 1-D: the H axis is a fixed unit axis
    st[0] = 1;
    pd[0] = 0;
    dl[0] = 1;
  }
  const auto iz = conv_detail::z4(input), wz = conv_detail::z4(weight);
  const int64_t N = iz[0], C = iz[1], H = iz[2], W = iz[3], O = wz[0], KH = wz[2], KW = wz[3];
  if (groups <= 0 || C % groups != 0 || O % groups != 0)
    return fail(Error::InvalidArgument, op, ": groups ", groups, " must be positive and divide in channels ", C,
                " and out channels ", O);
  if (wz[1] != C / groups)
    return fail(Error::InvalidArgument, op, ": weight ", weight.describe(), " expects ", wz[1] * groups,
                " input channels, got ", C);
  if (st[0] <= 0 || st[1] <= 0 || dl[0] <= 0 || dl[1] <= 0 || pd[0] < 0 || pd[1] < 0)
    return fail(Error::InvalidArgument, op, ": stride and dilation must be positive and padding non-negative");
  if (bias && (bias->dim() != 1 || bias->size(0) != O))
    return fail(Error::InvalidArgument, op, ": bias ", bias->describe(), " must be [", O, "]");
  const int64_t OH = (H + 2 * pd[0] - dl[0] * (KH - 1) - 1) / st[0] + 1;
  const int64_t OW = (W + 2 * pd[1] - dl[1] * (KW - 1) - 1) / st[1] + 1;
  if (H + 2 * pd[0] < dl[0] * (KH - 1) + 1 || W + 2 * pd[1] < dl[1] * (KW - 1) + 1 || KH <= 0 || KW <= 0)
    return fail(Error::InvalidArgument, op, ": kernel ", weight.describe(), " is larger than the padded input ",
                input.describe());
  std::array<int64_t, 4> os4{N, O, OH, OW};
  std::array<int64_t, 3> os3{N, O, OW};
  if (nsp == 2) ETRT_CHECK_OK(ctx.resize(op, out, os4));
  else ETRT_CHECK_OK(ctx.resize(op, out, os3));
  if (out.numel() == 0) return {};
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      conv_detail::conv2d<T>(input.data_as<T>(), conv_detail::s4(input), weight.data_as<T>(), conv_detail::s4(weight),
                             bias ? bias->data_as<T>() : nullptr, bias ? bias->stride(0) : 0, out.data_as<T>(),
                             conv_detail::s4(out), N, C, H, W, O, KH, KW, OH, OW, st, pd, dl, groups);
      return Status{};
    } else {
      // Half / BFloat16: compute in float over dense copies.
      auto to_f = [](const Tensor& t) {
        std::vector<float> v(static_cast<size_t>(t.numel()));
        size_t i = 0;
        const T* d = t.data_as<T>();
        mv::for_each_view_offset(mv::view_of(t), [&](int64_t o) { v[i++] = static_cast<float>(d[o]); });
        return v;
      };
      auto dense = [](std::span<const int64_t> z) {
        std::array<int64_t, 4> s{};
        const size_t r = z.size();
        int64_t acc = 1;
        for (size_t i = r; i-- > 0;) { s[i] = acc; acc *= std::max<int64_t>(z[i], 1); }
        if (r == 3) return std::array<int64_t, 4>{s[0], s[1], 0, s[2]};
        return s;
      };
      std::vector<float> fi = to_f(input), fw = to_f(weight), fb = bias ? to_f(*bias) : std::vector<float>{};
      std::vector<float> fo(static_cast<size_t>(out.numel()));
      conv_detail::conv2d<float>(fi.data(), dense(input.sizes()), fw.data(), dense(weight.sizes()),
                                 bias ? fb.data() : nullptr, 1, fo.data(), dense(out.sizes()), N, C, H, W, O, KH, KW,
                                 OH, OW, st, pd, dl, groups);
      size_t i = 0;
      T* d = out.data_as<T>();
      mv::for_each_view_offset(mv::view_of(out), [&](int64_t o) { d[o] = T(fo[i++]); });
      return Status{};
    }
  });
}

}  // namespace etrt::kernels
