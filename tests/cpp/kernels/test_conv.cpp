#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <sstream>

#include "etrt/kernels/ops/conv.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

namespace {
struct Case { int64_t N, C, H, W, O, KH, KW, s, p, d, g; bool bias; };

/// Runs one 2-D case (optionally NHWC input and output) against a naive double reference.
void run_case(const Case& c, bool nhwc) {
  KernelContext ctx;
  std::mt19937 gen(static_cast<unsigned>(c.C * 31 + c.O));
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t Cg = c.C / c.g, Og = c.O / c.g;
  std::vector<float> x(c.N * c.C * c.H * c.W), w(c.O * Cg * c.KH * c.KW), b(c.O);
  for (auto& v : x) v = dist(gen);
  for (auto& v : w) v = dist(gen);
  for (auto& v : b) v = dist(gen);
  const int64_t OH = (c.H + 2 * c.p - c.d * (c.KH - 1) - 1) / c.s + 1, OW = (c.W + 2 * c.p - c.d * (c.KW - 1) - 1) / c.s + 1;
  // x is stored in the tensor's memory order: logical accessor xl(n, ch, h, w)
  auto xl = [&](int64_t n, int64_t ch, int64_t h, int64_t ww) {
    return nhwc ? x[((n * c.H + h) * c.W + ww) * c.C + ch] : x[((n * c.C + ch) * c.H + h) * c.W + ww];
  };
  std::vector<float> o(c.N * c.O * OH * OW);
  const std::vector<uint8_t> ord = nhwc ? std::vector<uint8_t>{0, 2, 3, 1} : std::vector<uint8_t>{};
  Tensor in = mk(ScalarType::Float, {c.N, c.C, c.H, c.W}, x.data(), ord);
  Tensor wt = mk(ScalarType::Float, {c.O, Cg, c.KH, c.KW}, w.data());
  Tensor bt = mk(ScalarType::Float, {c.O}, b.data());
  Tensor out = mk(ScalarType::Float, {c.N, c.O, OH, OW}, o.data(), ord);
  const int64_t st[] = {c.s, c.s}, pd[] = {c.p, c.p}, dl[] = {c.d, c.d}, op[] = {0, 0};
  REQUIRE(convolution_out<float_types>(ctx, in, wt, c.bias ? &bt : nullptr, st, pd, dl, false, op, c.g, out));
  double err = 0;
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t oc = 0; oc < c.O; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = c.bias ? b[oc] : 0.0;
          const int64_t g = oc / Og;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < c.KH; ++kh)
              for (int64_t kw = 0; kw < c.KW; ++kw) {
                const int64_t ih = oh * c.s - c.p + kh * c.d, iw = ow * c.s - c.p + kw * c.d;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                s += double(xl(n, g * Cg + ci, ih, iw)) * w[((oc * Cg + ci) * c.KH + kh) * c.KW + kw];
              }
          const float got = nhwc ? o[((n * OH + oh) * OW + ow) * c.O + oc] : o[((n * c.O + oc) * OH + oh) * OW + ow];
          err = std::max(err, std::abs(got - s));
        }
  CHECK(err < 1e-4);
}
}  // namespace

TEST_CASE("convolution 2-D: im2col, pointwise, grouped, depthwise, NHWC", "[conv]") {
  for (bool nhwc : {false, true}) {
    run_case({1, 3, 8, 9, 4, 3, 3, 1, 1, 1, 1, true}, nhwc);
    run_case({2, 4, 7, 7, 6, 3, 2, 2, 1, 1, 2, false}, nhwc);
    run_case({1, 5, 6, 6, 7, 1, 1, 1, 0, 1, 1, true}, nhwc);
    run_case({1, 6, 9, 8, 6, 3, 3, 2, 1, 1, 6, true}, nhwc);
    run_case({1, 4, 9, 9, 8, 3, 3, 1, 2, 2, 4, false}, nhwc);
    run_case({1, 16, 20, 20, 24, 3, 3, 1, 1, 1, 1, true}, nhwc);
  }
}

TEST_CASE("convolution 1-D, double, failures", "[conv]") {
  KernelContext ctx;
  std::vector<double> x = {1, 2, 3, 4, 5}, w = {1, 0, -1}, b = {0.5}, o(3);
  Tensor in = mk(ScalarType::Double, {1, 1, 5}, x.data()), wt = mk(ScalarType::Double, {1, 1, 3}, w.data()),
         bt = mk(ScalarType::Double, {1}, b.data()), out = mk(ScalarType::Double, {1, 1, 3}, o.data());
  const int64_t s[] = {1}, p[] = {0}, d[] = {1}, op[] = {0};
  REQUIRE(convolution_out<float_types>(ctx, in, wt, &bt, s, p, d, false, op, 1, out));
  CHECK(o == std::vector<double>{-1.5, -1.5, -1.5});
  // Transposed, the same arguments give [1, 1, 7]: the static [1, 1, 3] out is refused by the resize.
  auto st = convolution_out<float_types>(ctx, in, wt, &bt, s, p, d, true, op, 1, out);
  REQUIRE(!st);
  CHECK(st.error().code == Error::NotSupported);
  CHECK_THAT(st.error().what, Catch::Contains("convolution.out: output"));
  auto st2 = convolution_out<float_types>(ctx, in, wt, &bt, s, p, d, false, op, 2, out);
  REQUIRE(!st2);
  CHECK(st2.error().code == Error::InvalidArgument);
  // Half computes through float
  std::vector<Half> hx = {Half(1.f), Half(2.f), Half(3.f)}, hw = {Half(2.f)}, ho(3);
  Tensor hin = mk(ScalarType::Half, {1, 1, 3}, hx.data()), hwt = mk(ScalarType::Half, {1, 1, 1}, hw.data()),
         hout = mk(ScalarType::Half, {1, 1, 3}, ho.data());
  REQUIRE(convolution_out<float_types>(ctx, hin, hwt, nullptr, s, p, d, false, op, 1, hout));
  CHECK(static_cast<float>(ho[2]) == 6.f);
  CHECK(slots_of("aten::convolution.out") == 11);
}

// ---- transposed convolution and convolution_backward --------------------------------------------------------------

namespace {

int64_t prod(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

/// A tensor over owned storage in a given dim order, filled with uniform values, with a logical accessor.
template <class T>
struct Buf {
  std::vector<T> d;
  Tensor t;
  Buf(std::vector<int64_t> sizes, std::vector<uint8_t> order, unsigned seed, ShapeDynamism dyn = ShapeDynamism::Static)
      : d(static_cast<size_t>(prod(sizes))) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> dist(-1, 1);
    for (auto& v : d) v = static_cast<T>(dist(gen));
    t = mk(dtype_of<T>, sizes, d.data(), order, dyn);
  }
  Buf(const Buf&) = delete;
  /// Element (n, c, h, w) of a rank-4 tensor, (n, c, w) of a rank-3 one (h ignored), (n) of a rank-1 one.
  T& at(int64_t n, int64_t c = 0, int64_t h = 0, int64_t w = 0) {
    if (t.dim() == 1) return d[n * t.stride(0)];
    if (t.dim() == 3) return d[n * t.stride(0) + c * t.stride(1) + w * t.stride(2)];
    return d[n * t.stride(0) + c * t.stride(1) + h * t.stride(2) + w * t.stride(3)];
  }
};

/// One convolution: spatial sizes are (H, W) with H = 1 and all H arguments neutral for 1-D.
struct Spec {
  int64_t N, Cin, H, W, Cout, KH, KW, sh, sw, ph, pw, dh, dw, oph, opw, groups;
  bool bias, one_d;
  std::vector<uint8_t> in_order = {}, w_order = {}, out_order = {};
  // The forward output size of the transposed (t) or plain (!t) convolution.
  int64_t out_h(bool t) const {
    return t ? (H - 1) * sh - 2 * ph + dh * (KH - 1) + oph + 1 : (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1;
  }
  int64_t out_w(bool t) const {
    return t ? (W - 1) * sw - 2 * pw + dw * (KW - 1) + opw + 1 : (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  }
  std::vector<int64_t> shape(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return one_d ? std::vector<int64_t>{n, c, w} : std::vector<int64_t>{n, c, h, w};
  }
  std::vector<int64_t> stride() const { return one_d ? std::vector<int64_t>{sw} : std::vector<int64_t>{sh, sw}; }
  std::vector<int64_t> padding() const { return one_d ? std::vector<int64_t>{pw} : std::vector<int64_t>{ph, pw}; }
  std::vector<int64_t> dilation() const { return one_d ? std::vector<int64_t>{dw} : std::vector<int64_t>{dh, dw}; }
  std::vector<int64_t> out_pad() const { return one_d ? std::vector<int64_t>{opw} : std::vector<int64_t>{oph, opw}; }
  std::string str() const {
    std::ostringstream o;
    o << "N" << N << " Cin" << Cin << " H" << H << " W" << W << " Cout" << Cout << " k" << KH << "x" << KW << " s" << sh
      << "," << sw << " p" << ph << "," << pw << " d" << dh << "," << dw << " op" << oph << "," << opw << " g" << groups
      << (bias ? " bias" : "") << (one_d ? " 1-D" : "") << (in_order.empty() ? "" : " in-permuted")
      << (w_order.empty() ? "" : " w-permuted") << (out_order.empty() ? "" : " out-permuted");
    return o.str();
  }
};

/// Calls f(n, i, ih, iw, j, kh, kw, oh, ow) for every tap of the transposed convolution of `s`: input channel i
/// (of Cin), weight [i, j, kh, kw] (j of Cout / groups) and output channel (i / (Cin / groups)) * (Cout / groups) + j.
template <class F>
void for_each_transposed_tap(const Spec& s, int64_t OH, int64_t OW, F&& f) {
  const int64_t Ig = s.Cin / s.groups, Og = s.Cout / s.groups;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t i = 0; i < s.Cin; ++i)
      for (int64_t ih = 0; ih < s.H; ++ih)
        for (int64_t iw = 0; iw < s.W; ++iw)
          for (int64_t j = 0; j < Og; ++j)
            for (int64_t kh = 0; kh < s.KH; ++kh)
              for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t oh = ih * s.sh - s.ph + kh * s.dh, ow = iw * s.sw - s.pw + kw * s.dw;
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                f(n, i, ih, iw, (i / Ig) * Og + j, j, kh, kw, oh, ow);
              }
}

/// Calls f(n, o, oh, ow, c, cj, kh, kw, ih, iw) for every tap of the plain convolution of `s` (weight [o, cj, kh,
/// kw], input channel c = group * (Cin / groups) + cj).
template <class F>
void for_each_plain_tap(const Spec& s, int64_t OH, int64_t OW, F&& f) {
  const int64_t Ig = s.Cin / s.groups, Og = s.Cout / s.groups;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t o = 0; o < s.Cout; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t cj = 0; cj < Ig; ++cj)
            for (int64_t kh = 0; kh < s.KH; ++kh)
              for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t ih = oh * s.sh - s.ph + kh * s.dh, iw = ow * s.sw - s.pw + kw * s.dw;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                f(n, o, oh, ow, (o / Og) * Ig + cj, cj, kh, kw, ih, iw);
              }
}

double tol_of(ScalarType st) { return st == ScalarType::Double ? 1e-10 : 2e-4; }

/// A transposed convolution of `s` against a scatter-form double reference.
template <class T>
void check_transposed(const Spec& s) {
  INFO("transposed " << s.str());
  const int64_t OH = s.out_h(true), OW = s.out_w(true), Og = s.Cout / s.groups;
  Buf<T> x(s.shape(s.N, s.Cin, s.H, s.W), s.in_order, 11), w(s.shape(s.Cin, Og, s.KH, s.KW), s.w_order, 12),
      b({s.Cout}, {}, 13), y(s.shape(s.N, s.Cout, OH, OW), s.out_order, 14);
  std::vector<double> ref(static_cast<size_t>(s.N * s.Cout * OH * OW), 0.0);
  auto r = [&](int64_t n, int64_t c, int64_t h, int64_t ww) -> double& {
    return ref[((n * s.Cout + c) * OH + h) * OW + ww];
  };
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t c = 0; c < s.Cout; ++c)
      for (int64_t h = 0; h < OH; ++h)
        for (int64_t ww = 0; ww < OW; ++ww) r(n, c, h, ww) = s.bias ? double(b.at(c)) : 0.0;
  for_each_transposed_tap(s, OH, OW, [&](int64_t n, int64_t i, int64_t ih, int64_t iw, int64_t oc, int64_t j,
                                         int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
    r(n, oc, oh, ow) += double(x.at(n, i, ih, iw)) * double(w.at(i, j, kh, kw));
  });
  KernelContext ctx;
  REQUIRE(convolution_out<float_types>(ctx, x.t, w.t, s.bias ? &b.t : nullptr, s.stride(), s.padding(), s.dilation(),
                                       true, s.out_pad(), s.groups, y.t));
  double err = 0;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t c = 0; c < s.Cout; ++c)
      for (int64_t h = 0; h < OH; ++h)
        for (int64_t ww = 0; ww < OW; ++ww) err = std::max(err, std::abs(double(y.at(n, c, h, ww)) - r(n, c, h, ww)));
  CHECK(err < tol_of(dtype_of<T>));
}

/// convolution_backward of `s` (plain or transposed) against scatter-form double references of all three
/// gradients; also checks that a false output_mask bit leaves its output untouched.
template <class T>
void check_backward(const Spec& s, bool transposed, std::vector<bool> mask = {true, true, true}) {
  INFO((transposed ? "backward transposed " : "backward ") << s.str() << " mask " << mask[0] << mask[1] << mask[2]);
  const int64_t OH = s.out_h(transposed), OW = s.out_w(transposed);
  const int64_t Ig = s.Cin / s.groups, Og = s.Cout / s.groups;
  const auto wshape = transposed ? s.shape(s.Cin, Og, s.KH, s.KW) : s.shape(s.Cout, Ig, s.KH, s.KW);
  Buf<T> x(s.shape(s.N, s.Cin, s.H, s.W), s.in_order, 21), w(wshape, s.w_order, 22),
      gy(s.shape(s.N, s.Cout, OH, OW), s.out_order, 23);
  Buf<T> gx(s.shape(s.N, s.Cin, s.H, s.W), s.in_order, 24), gw(wshape, s.w_order, 25), gb({s.Cout}, {}, 26);
  const std::vector<T> gx0 = gx.d, gw0 = gw.d, gb0 = gb.d;
  std::vector<double> rx(gx.d.size(), 0.0), rw(gw.d.size(), 0.0), rb(static_cast<size_t>(s.Cout), 0.0);
  // The references are indexed like the kernel's outputs (through their strides) so layouts compare directly.
  auto xi = [&](int64_t n, int64_t c, int64_t h, int64_t ww) { return &gx.at(n, c, h, ww) - gx.d.data(); };
  auto wi = [&](int64_t a, int64_t c, int64_t h, int64_t ww) { return &gw.at(a, c, h, ww) - gw.d.data(); };
  if (transposed) {
    for_each_transposed_tap(s, OH, OW, [&](int64_t n, int64_t i, int64_t ih, int64_t iw, int64_t oc, int64_t j,
                                           int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
      const double g = double(gy.at(n, oc, oh, ow));
      rx[xi(n, i, ih, iw)] += double(w.at(i, j, kh, kw)) * g;
      rw[wi(i, j, kh, kw)] += double(x.at(n, i, ih, iw)) * g;
    });
  } else {
    for_each_plain_tap(s, OH, OW, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t c, int64_t cj,
                                      int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
      const double g = double(gy.at(n, o, oh, ow));
      rx[xi(n, c, ih, iw)] += double(w.at(o, cj, kh, kw)) * g;
      rw[wi(o, cj, kh, kw)] += double(x.at(n, c, ih, iw)) * g;
    });
  }
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t o = 0; o < s.Cout; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) rb[o] += double(gy.at(n, o, oh, ow));
  KernelContext ctx;
  const std::vector<int64_t> bias_sizes{s.Cout};
  REQUIRE(convolution_backward_out<float_types>(ctx, gy.t, x.t, w.t, std::span<const int64_t>(bias_sizes), s.stride(),
                                                s.padding(), s.dilation(), transposed, s.out_pad(), s.groups, mask,
                                                gx.t, gw.t, gb.t));
  auto err = [](const std::vector<T>& got, const std::vector<double>& ref) {
    double e = 0;
    for (size_t i = 0; i < got.size(); ++i) e = std::max(e, std::abs(double(got[i]) - ref[i]) / (1 + std::abs(ref[i])));
    return e;
  };
  const double tol = tol_of(dtype_of<T>);
  if (mask[0]) CHECK(err(gx.d, rx) < tol);
  else CHECK(gx.d == gx0);
  if (mask[1]) CHECK(err(gw.d, rw) < tol);
  else CHECK(gw.d == gw0);
  if (mask[2]) CHECK(err(gb.d, rb) < tol);
  else CHECK(gb.d == gb0);
}

const std::vector<uint8_t> kNhwc{0, 2, 3, 1}, kNlc{0, 2, 1};

}  // namespace

TEST_CASE("convolution_backward.out is registered with one slot per argument plus the return", "[conv]") {
  CHECK(slots_of("aten::convolution_backward.out") == 15);
  CHECK(slots_of("aten::convolution.out") == 11);
}

TEST_CASE("transposed convolution 2-D against a reference: stride, padding, output_padding, dilation, groups",
          "[conv]") {
  //             N Cin H  W Cout KH KW sh sw ph pw dh dw oph opw g  bias  1-D
  const std::vector<Spec> specs = {
      {1, 3, 4, 5, 2, 3, 3, 1, 1, 0, 0, 1, 1, 0, 0, 1, true, false},    // plain 3x3
      {2, 4, 5, 4, 6, 3, 2, 2, 2, 1, 0, 1, 1, 1, 1, 2, false, false},   // stride 2, output_padding, groups 2
      {1, 4, 3, 4, 4, 3, 3, 2, 3, 1, 2, 2, 1, 1, 2, 1, true, false},    // output_padding < stride only per dim
      {1, 2, 4, 4, 3, 2, 3, 1, 1, 0, 1, 3, 2, 2, 1, 1, true, false},    // output_padding < dilation (stride 1)
      {2, 6, 5, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 6, true, false},    // depthwise
      {1, 5, 4, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, true, false},    // pointwise: a GEMM into the output
      {1, 2, 3, 3, 2, 1, 1, 1, 1, 0, 0, 2, 2, 1, 1, 1, false, false},   // 1x1 with output_padding (not pointwise)
      {1, 16, 9, 9, 8, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0, 1, true, false},   // large enough for the blocked GEMM
      {2, 6, 4, 4, 9, 3, 3, 3, 3, 2, 2, 1, 1, 2, 0, 3, true, false},    // groups 3, stride 3
  };
  for (const Spec& base : specs) {
    check_transposed<float>(base);
    check_transposed<double>(base);
    Spec cl = base;  // channels-last input and output, permuted weight
    cl.in_order = kNhwc;
    cl.out_order = kNhwc;
    cl.w_order = kNhwc;
    check_transposed<float>(cl);
    Spec mixed = base;  // channels-last input only
    mixed.in_order = kNhwc;
    check_transposed<float>(mixed);
  }
}

TEST_CASE("transposed convolution 1-D against a reference", "[conv]") {
  //             N Cin H  W Cout KH KW sh sw ph pw dh dw oph opw g  bias  1-D
  const std::vector<Spec> specs = {
      {2, 3, 1, 7, 4, 1, 3, 1, 2, 0, 1, 1, 1, 0, 1, 1, true, true},
      {1, 4, 1, 5, 2, 1, 4, 1, 3, 0, 2, 1, 2, 0, 2, 2, false, true},
      {1, 3, 1, 6, 3, 1, 5, 1, 1, 0, 2, 1, 1, 0, 0, 3, true, true},  // depthwise
  };
  for (const Spec& base : specs) {
    check_transposed<float>(base);
    check_transposed<double>(base);
    Spec cl = base;
    cl.in_order = kNlc;
    cl.out_order = kNlc;
    check_transposed<float>(cl);
  }
}

TEST_CASE("transposed convolution spot values from torch, Half", "[conv]") {
  KernelContext ctx;
  {
    // x = (arange(8.) - 3).reshape(1, 2, 2, 2); w = (arange(16.) / 4 - 1).reshape(2, 2, 2, 2); b = [0.5, -1]
    // torch.ops.aten.convolution(x, w, b, [2, 1], [1, 0], [1, 2], True, [1, 0], 1).flatten()  -> shape (1, 2, 3, 4)
    std::vector<float> x(8), w(16), b = {0.5f, -1.f}, y(24);
    for (int i = 0; i < 8; ++i) x[i] = float(i) - 3;
    for (int i = 0; i < 16; ++i) w[i] = float(i) / 4 - 1;
    Tensor bt = mk(b, {2}), yt = mk(y, {1, 2, 3, 4});
    REQUIRE(convolution_out<float_types>(ctx, mk(x, {1, 2, 2, 2}), mk(w, {2, 2, 2, 2}), &bt, std::vector<int64_t>{2, 1},
                                         std::vector<int64_t>{1, 0}, std::vector<int64_t>{1, 2}, true,
                                         std::vector<int64_t>{1, 0}, 1, yt));
    CHECK(y == std::vector<float>{3.5, 4.5, 3.0, 4.5, 4.5, 4.5, 5.0, 5.5, 5.5, 6.5, 6.0, 7.5,
                                  0.0, 3.0, -0.5, 3.0, 5.0, 7.0, 5.5, 8.0, 6.0, 9.0, 6.5, 10.0});
  }
  {
    // torch.ops.aten.convolution((arange(6.) - 2).reshape(1, 2, 3), tensor([[[1., -1.]], [[2., .5]]]), None, [2],
    //                            [0], [1], True, [1], 2).flatten()  -> shape (1, 2, 7)
    std::vector<float> x = {-2, -1, 0, 1, 2, 3}, w = {1, -1, 2, 0.5}, y(14);
    Tensor yt = mk(y, {1, 2, 7});
    REQUIRE(convolution_out<float_types>(ctx, mk(x, {1, 2, 3}), mk(w, {2, 1, 2}), nullptr, std::vector<int64_t>{2},
                                         std::vector<int64_t>{0}, std::vector<int64_t>{1}, true,
                                         std::vector<int64_t>{1}, 2, yt));
    CHECK(y == std::vector<float>{-2.0, 2.0, -1.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.5, 4.0, 1.0, 6.0, 1.5, 0.0});
  }
  {
    // Half computes through float: the same 1-D case.
    std::vector<Half> x, w, y(14);
    for (float v : {-2.f, -1.f, 0.f, 1.f, 2.f, 3.f}) x.push_back(Half(v));
    for (float v : {1.f, -1.f, 2.f, 0.5f}) w.push_back(Half(v));
    Tensor yt = mk(y, {1, 2, 7});
    REQUIRE(convolution_out<float_types>(ctx, mk(x, {1, 2, 3}), mk(w, {2, 1, 2}), nullptr, std::vector<int64_t>{2},
                                         std::vector<int64_t>{0}, std::vector<int64_t>{1}, true,
                                         std::vector<int64_t>{1}, 2, yt));
    std::vector<float> yf;
    for (Half h : y) yf.push_back(static_cast<float>(h));
    CHECK(yf == std::vector<float>{-2.0, 2.0, -1.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.5, 4.0, 1.0, 6.0, 1.5, 0.0});
  }
  {
    // The output is resized through the context: [1, 3, 10, 10] for x [1, 4, 5, 5], w [4, 3, 3, 3], s 2, p 1, op 1.
    Buf<float> x({1, 4, 5, 5}, {}, 1), w({4, 3, 3, 3}, {}, 2), y({1, 3, 16, 16}, {}, 3, ShapeDynamism::DynamicBound);
    REQUIRE(convolution_out<float_types>(ctx, x.t, w.t, nullptr, std::vector<int64_t>{2, 2},
                                         std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1}, true,
                                         std::vector<int64_t>{1, 1}, 1, y.t));
    CHECK(y.t.size(2) == 10);
    CHECK(y.t.size(3) == 10);
  }
}

TEST_CASE("transposed convolution argument errors", "[conv]") {
  KernelContext ctx;
  Buf<float> x({1, 4, 5, 5}, {}, 1), w({4, 3, 3, 3}, {}, 2), y({1, 3, 10, 10}, {}, 3);
  auto run = [&](const Tensor& in, const Tensor& wt, const Tensor* b, std::vector<int64_t> s, std::vector<int64_t> p,
                 std::vector<int64_t> d, std::vector<int64_t> op, int64_t g) {
    return convolution_out<float_types>(ctx, in, wt, b, s, p, d, true, op, g, y.t);
  };
  auto expect = [](Status st, const char* text) {
    REQUIRE_FALSE(st);
    CHECK(st.error().code == Error::InvalidArgument);
    CHECK_THAT(st.error().what, Catch::Contains(text));
  };
  const std::vector<int64_t> s2{2, 2}, p1{1, 1}, d1{1, 1}, op1{1, 1};
  REQUIRE(run(x.t, w.t, nullptr, s2, p1, d1, op1, 1));
  // torch: "output padding must be smaller than either stride or dilation" (op 2 with stride 2, dilation 1)
  expect(run(x.t, w.t, nullptr, s2, p1, d1, {2, 2}, 1), "output padding must be smaller");
  expect(run(x.t, w.t, nullptr, {1, 1}, p1, d1, op1, 1), "output padding must be smaller");
  expect(run(x.t, w.t, nullptr, s2, p1, d1, {-1, 0}, 1), "negative output_padding");
  expect(run(x.t, w.t, nullptr, {0, 2}, p1, d1, op1, 1), "stride and dilation must be positive");
  expect(run(x.t, w.t, nullptr, s2, {-1, 1}, d1, op1, 1), "padding non-negative");
  // torch: "Given groups=3, expected weight to be divisible by 3 at dimension 0"
  expect(run(x.t, w.t, nullptr, s2, p1, d1, op1, 3), "divisible by 3 at dimension 0");
  expect(run(x.t, w.t, nullptr, s2, p1, d1, op1, 0), "non-positive groups");
  // torch: "expected input[1, 3, 5, 5] to have 4 channels, but got 3 channels instead"
  Buf<float> x3({1, 3, 5, 5}, {}, 4);
  expect(run(x3.t, w.t, nullptr, s2, p1, d1, op1, 1), "to have 4 channels");
  // torch: "expected bias to be 1-dimensional with 3 elements, but got bias of size [4]"
  Buf<float> b4({4}, {}, 5);
  expect(run(x.t, w.t, &b4.t, s2, p1, d1, op1, 1), "expects bias");
  // torch: "Calculated output size per channel: (-3 x -3). Output size is too small"
  expect(run(x.t, w.t, nullptr, {1, 1}, {5, 5}, d1, {0, 0}, 1), "too small");
  Buf<float> wempty({4, 0, 3, 3}, {}, 6);
  expect(run(x.t, wempty.t, nullptr, s2, p1, d1, op1, 1), "non-empty weight");
  Buf<float> xempty({1, 4, 0, 5}, {}, 7);
  expect(run(xempty.t, w.t, nullptr, s2, p1, d1, op1, 1), "zero batch or zero channel");
  expect(run(x.t, w.t, nullptr, s2, p1, d1, {1, 1, 1}, 1), "output_padding must have 2 values");
  expect(run(x.t, w.t, nullptr, {int64_t{1} << 61, 2}, p1, d1, op1, 1), "too large");
  // Plain convolution refuses padding whose index arithmetic would overflow.
  expect(convolution_out<float_types>(ctx, x.t, mk(w.d, {3, 4, 1, 1}), nullptr, std::vector<int64_t>{1, 1},
                                      std::vector<int64_t>{int64_t{1} << 62, 0}, d1, false, std::vector<int64_t>{0, 0},
                                      1, y.t),
         "too large");
  std::vector<double> wd(w.d.begin(), w.d.end());
  expect(run(x.t, mk(wd, {4, 3, 3, 3}), nullptr, s2, p1, d1, op1, 1), "share a dtype");
}

TEST_CASE("convolution_backward against a reference: plain 2-D and 1-D", "[conv]") {
  //             N Cin H  W Cout KH KW sh sw ph pw dh dw oph opw g  bias  1-D
  const std::vector<Spec> specs = {
      {2, 3, 6, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 1, true, false},
      {2, 4, 7, 7, 6, 3, 2, 2, 2, 1, 0, 1, 1, 0, 0, 2, true, false},
      {1, 4, 9, 8, 8, 3, 3, 1, 2, 2, 1, 2, 1, 0, 0, 4, true, false},
      {2, 6, 8, 8, 6, 3, 3, 2, 1, 1, 1, 1, 2, 0, 0, 6, true, false},    // depthwise
      {2, 5, 4, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, true, false},    // pointwise
      {1, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 1, true, false},
      {2, 3, 1, 9, 4, 1, 3, 1, 2, 0, 1, 1, 1, 0, 0, 1, true, true},     // 1-D
      {1, 4, 1, 8, 4, 1, 3, 1, 1, 0, 2, 1, 2, 0, 0, 4, true, true},     // 1-D depthwise, dilated
  };
  for (const Spec& base : specs) {
    check_backward<float>(base, false);
    check_backward<double>(base, false);
    Spec cl = base;
    const auto ord = base.one_d ? kNlc : kNhwc;
    cl.in_order = ord;
    cl.out_order = ord;
    cl.w_order = ord;
    check_backward<float>(cl, false);
  }
  // Masks: each gradient alone, and none.
  const Spec& s = specs[1];
  check_backward<float>(s, false, {true, false, false});
  check_backward<float>(s, false, {false, true, false});
  check_backward<float>(s, false, {false, false, true});
  check_backward<float>(s, false, {false, false, false});
}

TEST_CASE("convolution_backward against a reference: transposed", "[conv]") {
  //             N Cin H  W Cout KH KW sh sw ph pw dh dw oph opw g  bias  1-D
  const std::vector<Spec> specs = {
      {2, 4, 4, 5, 6, 3, 2, 2, 2, 1, 0, 1, 1, 1, 1, 2, true, false},
      {1, 2, 4, 4, 3, 2, 3, 1, 1, 0, 1, 3, 2, 2, 1, 1, true, false},   // output_padding >= stride
      {2, 6, 5, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 6, true, false},   // depthwise
      {1, 5, 4, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, true, false},   // pointwise
      {1, 3, 1, 6, 4, 1, 3, 1, 2, 0, 1, 1, 1, 0, 1, 1, true, true},    // 1-D
  };
  for (const Spec& base : specs) {
    check_backward<float>(base, true);
    check_backward<double>(base, true);
    Spec cl = base;
    const auto ord = base.one_d ? kNlc : kNhwc;
    cl.in_order = ord;
    cl.out_order = ord;
    check_backward<float>(cl, true);
  }
  check_backward<float>(specs[0], true, {false, true, true});
}

TEST_CASE("convolution_backward spot values from torch, Half, errors", "[conv]") {
  KernelContext ctx;
  const std::vector<bool> all{true, true, true};
  {
    // x = (arange(18.) / 9 - 1).reshape(1, 2, 3, 3); w = (arange(16.) / 8 - 1).reshape(2, 2, 2, 2);
    // gy = (arange(8.) - 4).reshape(1, 2, 2, 2)
    // torch.ops.aten.convolution_backward(gy, x, w, [2], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True] * 3)
    std::vector<float> x(18), w(16), gy(8), gx(18), gw(16), gb(2);
    for (int i = 0; i < 18; ++i) x[i] = float(i) / 9 - 1;
    for (int i = 0; i < 16; ++i) w[i] = float(i) / 8 - 1;
    for (int i = 0; i < 8; ++i) gy[i] = float(i) - 4;
    Tensor gxt = mk(gx, {1, 2, 3, 3}), gwt = mk(gw, {2, 2, 2, 2}), gbt = mk(gb, {2});
    const std::vector<int64_t> bias_sizes{2};
    REQUIRE(convolution_backward_out<float_types>(
        ctx, mk(gy, {1, 2, 2, 2}), mk(x, {1, 2, 3, 3}), mk(w, {2, 2, 2, 2}), std::span<const int64_t>(bias_sizes),
        std::vector<int64_t>{1, 1}, std::vector<int64_t>{0, 0}, std::vector<int64_t>{1, 1}, false,
        std::vector<int64_t>{0, 0}, 1, all, gxt, gwt, gbt));
    const std::vector<float> ex = {4.0, 6.5, 2.75, 5.0, 8.0, 3.5, 2.0, 3.5, 1.75,
                                   2.0, 3.5, 1.75, 3.0, 6.0, 3.5, 2.0, 4.5, 2.75};
    const std::vector<float> ew = {8.555555, 7.444445, 5.222222, 4.111111, -1.444445, -2.555556, -4.777778, -5.888889,
                                   -3.888889, -3.222222, -1.888889, -1.222222, 2.111111, 2.777778, 4.111111, 4.777778};
    for (size_t i = 0; i < ex.size(); ++i) CHECK(gx[i] == Approx(ex[i]).margin(1e-5));
    for (size_t i = 0; i < ew.size(); ++i) CHECK(gw[i] == Approx(ew[i]).margin(1e-5));
    CHECK(gb == std::vector<float>{-10, 6});
  }
  {
    // x = (arange(8.) / 4 - 1).reshape(1, 2, 2, 2); w = (arange(18.) / 9 - 1).reshape(2, 1, 3, 3);
    // gy = (arange(16.) / 8 - 1).reshape(1, 1, 4, 4)
    // torch.ops.aten.convolution_backward(gy, x, w, [1], [2, 2], [1, 1], [1, 1], True, [1, 1], 1, [True] * 3)
    std::vector<float> x(8), w(18), gy(16), gx(8), gw(18), gb(1);
    for (int i = 0; i < 8; ++i) x[i] = float(i) / 4 - 1;
    for (int i = 0; i < 18; ++i) w[i] = float(i) / 9 - 1;
    for (int i = 0; i < 16; ++i) gy[i] = float(i) / 8 - 1;
    Tensor gxt = mk(gx, {1, 2, 2, 2}), gwt = mk(gw, {2, 1, 3, 3}), gbt = mk(gb, {1});
    REQUIRE(convolution_backward_out<float_types>(
        ctx, mk(gy, {1, 1, 4, 4}), mk(x, {1, 2, 2, 2}), mk(w, {2, 1, 3, 3}), std::nullopt, std::vector<int64_t>{2, 2},
        std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1}, true, std::vector<int64_t>{1, 1}, 1, all, gxt, gwt,
        gbt));
    const std::vector<float> ex = {1.0972222, 1.4722222, 0.5, -0.1666666, -1.6527777, -1.5277777, 0.875, 2.0833333};
    const std::vector<float> ew = {0.09375, 0.3125, 0.21875, 0.625, 1.5, 1.1875, 0.125, 0.25, -0.0625,
                                   -0.28125, -0.4375, -0.28125, -0.125, 0.0, 0.1875, 0.375, 0.75, 0.9375};
    for (size_t i = 0; i < ex.size(); ++i) CHECK(gx[i] == Approx(ex[i]).margin(1e-5));
    for (size_t i = 0; i < ew.size(); ++i) CHECK(gw[i] == Approx(ew[i]).margin(1e-5));
    CHECK(gb[0] == Approx(-1.0).margin(1e-6));
    // BFloat16 computes through float; these values are exact in bf16 except gx, compared loosely.
    std::vector<BFloat16> bx, bw, bgy, bgx(8), bgw(18), bgb(1);
    for (float v : x) bx.push_back(BFloat16(v));
    for (float v : w) bw.push_back(BFloat16(v));
    for (float v : gy) bgy.push_back(BFloat16(v));
    Tensor bgxt = mk(bgx, {1, 2, 2, 2}), bgwt = mk(bgw, {2, 1, 3, 3}), bgbt = mk(bgb, {1});
    REQUIRE(convolution_backward_out<float_types>(
        ctx, mk(bgy, {1, 1, 4, 4}), mk(bx, {1, 2, 2, 2}), mk(bw, {2, 1, 3, 3}), std::nullopt,
        std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1}, true,
        std::vector<int64_t>{1, 1}, 1, all, bgxt, bgwt, bgbt));
    for (size_t i = 0; i < ex.size(); ++i) CHECK(static_cast<float>(bgx[i]) == Approx(ex[i]).margin(0.03));
    for (size_t i = 0; i < ew.size(); ++i) CHECK(static_cast<float>(bgw[i]) == Approx(ew[i]).margin(1e-6));
    CHECK(static_cast<float>(bgb[0]) == -1.f);
  }
  // Errors.
  Buf<float> x({2, 3, 5, 5}, {}, 1), w({4, 3, 3, 3}, {}, 2), gy({2, 4, 3, 3}, {}, 3);
  Buf<float> gx({2, 3, 5, 5}, {}, 4), gw({4, 3, 3, 3}, {}, 5), gb({4}, {}, 6);
  const std::vector<int64_t> s1{1, 1}, p0{0, 0}, d1{1, 1};
  auto run = [&](const Tensor& g, const Tensor& in, const Tensor& wt, std::vector<bool> mask, Tensor& o0, Tensor& o1,
                 Tensor& o2, int64_t groups = 1) {
    return convolution_backward_out<float_types>(ctx, g, in, wt, std::nullopt, s1, p0, d1, false, p0, groups, mask,
                                                 o0, o1, o2);
  };
  auto expect = [](Status st, const char* text) {
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().what, Catch::Contains(text));
  };
  REQUIRE(run(gy.t, x.t, w.t, all, gx.t, gw.t, gb.t));
  Buf<float> gy_bad({2, 4, 4, 3}, {}, 7);
  expect(run(gy_bad.t, x.t, w.t, all, gx.t, gw.t, gb.t), "must have the forward output's shape [2, 4, 3, 3]");
  expect(run(gy.t, x.t, w.t, {true, true}, gx.t, gw.t, gb.t), "output_mask must have 3 values");
  expect(run(gy.t, x.t, w.t, all, gx.t, gw.t, gb.t, 2), "groups 2 must be positive and divide");
  std::vector<double> gwd(gw.d.size());
  Tensor gw_double = mk(gwd, {4, 3, 3, 3});
  expect(run(gy.t, x.t, w.t, all, gx.t, gw_double, gb.t), "out1 dtype Double");
  // A masked-out output is neither checked nor written.
  REQUIRE(run(gy.t, x.t, w.t, {true, false, true}, gx.t, gw_double, gb.t));
  CHECK(std::all_of(gwd.begin(), gwd.end(), [](double v) { return v == 0; }));
  std::vector<double> xd(x.d.begin(), x.d.end());
  expect(run(gy.t, mk(xd, {2, 3, 5, 5}), w.t, all, gx.t, gw.t, gb.t), "must share a dtype");
  Buf<float> gb_bad({5}, {}, 8);
  expect(run(gy.t, x.t, w.t, all, gx.t, gw.t, gb_bad.t), "convolution_backward.out: output");
  Buf<float> x3({2, 3, 5}, {}, 9);
  expect(run(gy.t, x3.t, w.t, all, gx.t, gw.t, gb.t), "must have the input's rank");
}
