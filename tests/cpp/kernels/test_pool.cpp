#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "etrt/kernels/ops/pool.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

namespace {
/// Naive max pool over one [C,H,W] (logical accessor), NaN-propagating, first max wins.
template <class F>
void ref_max(F at, int64_t C, int64_t H, int64_t W, int64_t k, int64_t s, int64_t p, int64_t d, int64_t OH, int64_t OW,
             std::vector<double>& out, std::vector<int64_t>& idx) {
  out.assign(static_cast<size_t>(C * OH * OW), 0);
  idx.assign(out.size(), 0);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -INFINITY;
        int64_t bi = -1;
        for (int64_t kh = 0; kh < k; ++kh)
          for (int64_t kw = 0; kw < k; ++kw) {
            const int64_t ih = oh * s - p + kh * d, iw = ow * s - p + kw * d;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const double v = at(c, ih, iw);
            if (bi < 0) bi = ih * W + iw;
            if (v > best || std::isnan(v)) {
              best = v;
              bi = ih * W + iw;
            }
          }
        out[(c * OH + oh) * OW + ow] = best;
        idx[(c * OH + oh) * OW + ow] = bi;
      }
}
}  // namespace

TEST_CASE("max_pool2d: corpus pattern f32[1,64,112,112] k3 s2 p1", "[pool]") {
  KernelContext ctx;
  std::vector<float> x(64 * 112 * 112);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  std::vector<float> o(64 * 56 * 56);
  std::vector<int64_t> ix(o.size());
  Tensor in = mk(ScalarType::Float, {1, 64, 112, 112}, x.data());
  Tensor out = mk(ScalarType::Float, {1, 64, 56, 56}, o.data()), idx = mk(ScalarType::Long, {1, 64, 56, 56}, ix.data());
  const int64_t k[] = {3, 3}, s[] = {2, 2}, p[] = {1, 1}, d[] = {1, 1};
  REQUIRE(max_pool2d_with_indices_out<real_types>(ctx, in, k, s, p, d, false, out, idx));
  int bad = 0, badi = 0;
  for (int c = 0; c < 64; ++c)
    for (int i = 0; i < 56; ++i)
      for (int j = 0; j < 56; ++j) {
        const size_t at = (static_cast<size_t>(c) * 56 + i) * 56 + j;
        if (o[at] != 12544.f * c + 224 * i + 2 * j + 113) ++bad;
        if (ix[at] != (2 * i + 1) * 112 + 2 * j + 1) ++badi;
      }
  CHECK(bad == 0);
  CHECK(badi == 0);
  CHECK(slots_of("aten::max_pool2d_with_indices.out") == 9);
}

TEST_CASE("max_pool2d: random, NaN/inf, dilation, ceil_mode, NHWC, int dtype", "[pool]") {
  KernelContext ctx;
  std::mt19937 g(3);
  std::uniform_real_distribution<float> dist(-5, 5);
  const int64_t C = 3, H = 9, W = 10;
  std::vector<float> x(C * H * W);
  for (auto& v : x) v = dist(g);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[100] = INFINITY;
  x[150] = -INFINITY;
  struct Cfg { int64_t k, s, p, d; bool ceil; };
  for (Cfg cfg : {Cfg{3, 2, 1, 1, false}, Cfg{2, 2, 0, 1, true}, Cfg{3, 1, 1, 2, false}, Cfg{3, 3, 1, 1, true}}) {
    const int64_t OH = pool_detail::out_size(H, cfg.k, cfg.p, cfg.s, cfg.d, cfg.ceil);
    const int64_t OW = pool_detail::out_size(W, cfg.k, cfg.p, cfg.s, cfg.d, cfg.ceil);
    std::vector<double> ro;
    std::vector<int64_t> ri;
    ref_max([&](int64_t c, int64_t h, int64_t w) { return double(x[(c * H + h) * W + w]); }, C, H, W, cfg.k, cfg.s,
            cfg.p, cfg.d, OH, OW, ro, ri);
    for (bool nhwc : {false, true}) {
      std::vector<float> xin(x.size());
      if (nhwc) {
        for (int64_t c = 0; c < C; ++c)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w) xin[(h * W + w) * C + c] = x[(c * H + h) * W + w];
      } else {
        xin = x;
      }
      Tensor in = nhwc ? mk(ScalarType::Float, {1, C, H, W}, xin.data(), {0, 2, 3, 1})
                       : mk(ScalarType::Float, {1, C, H, W}, xin.data());
      std::vector<float> o(C * OH * OW);
      std::vector<int64_t> ix(o.size());
      Tensor out = mk(ScalarType::Float, {1, C, OH, OW}, o.data()), idx = mk(ScalarType::Long, {1, C, OH, OW}, ix.data());
      const int64_t k[] = {cfg.k}, s[] = {cfg.s, cfg.s}, p[] = {cfg.p}, d[] = {cfg.d};
      REQUIRE(max_pool2d_with_indices_out<real_types>(ctx, in, k, s, p, d, cfg.ceil, out, idx));
      for (size_t i = 0; i < o.size(); ++i) {
        if (std::isnan(ro[i])) CHECK(std::isnan(o[i]));
        else CHECK(o[i] == ro[i]);
        CHECK(ix[i] == ri[i]);
      }
    }
  }
  // int8, 3-D input, empty stride means stride = kernel
  std::vector<int8_t> xi = {1, -2, 3, 4, 5, -6, 7, 8, 9, 10, 11, 12, -13, 14, 15, 16};
  std::vector<int8_t> oi(4);
  std::vector<int64_t> ii(4);
  Tensor tin = mk(ScalarType::Char, {1, 4, 4}, xi.data());
  Tensor tout = mk(ScalarType::Char, {1, 2, 2}, oi.data()), tidx = mk(ScalarType::Long, {1, 2, 2}, ii.data());
  const int64_t k2[] = {2, 2}, p0[] = {0}, d1[] = {1};
  REQUIRE(max_pool2d_with_indices_out<real_types>(ctx, tin, k2, {}, p0, d1, false, tout, tidx));
  CHECK(oi == std::vector<int8_t>{5, 8, 14, 16});
  CHECK(ii == std::vector<int64_t>{4, 7, 13, 15});
  const int64_t pbig[] = {2};
  auto st = max_pool2d_with_indices_out<real_types>(ctx, tin, k2, {}, pbig, d1, false, tout, tidx);
  REQUIRE(!st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("pad should be at most half"));
}

TEST_CASE("avg_pool2d and adaptive_avg_pool2d", "[pool]") {
  KernelContext ctx;
  const int64_t H = 5, W = 6;
  std::vector<double> x(H * W);
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i) * 0.5 - 3;
  for (bool include : {true, false})
    for (bool ceil : {false, true})
      for (std::optional<int64_t> dov : {std::optional<int64_t>{}, std::optional<int64_t>{4}}) {
        const int64_t k = 3, s = 2, p = 1;
        const int64_t OH = pool_detail::out_size(H, k, p, s, 1, ceil), OW = pool_detail::out_size(W, k, p, s, 1, ceil);
        std::vector<double> o(OH * OW);
        Tensor in = mk(ScalarType::Double, {1, H, W}, x.data()), out = mk(ScalarType::Double, {1, OH, OW}, o.data());
        const int64_t kk[] = {k}, ss[] = {s}, pp[] = {p};
        REQUIRE(avg_pool2d_out<real_types>(ctx, in, kk, ss, pp, ceil, include, dov, out));
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t h0 = oh * s - p, w0 = ow * s - p;
            const int64_t h1 = std::min(h0 + k, H + p), w1 = std::min(w0 + k, W + p);
            const int64_t padded = (h1 - h0) * (w1 - w0);
            double sum = 0;
            int64_t cnt = 0;
            for (int64_t h = std::max<int64_t>(h0, 0); h < std::min(h1, H); ++h)
              for (int64_t w = std::max<int64_t>(w0, 0); w < std::min(w1, W); ++w) {
                sum += x[h * W + w];
                ++cnt;
              }
            const double div = dov ? double(*dov) : include ? double(padded) : double(cnt);
            CHECK(o[oh * OW + ow] == Approx(sum / div).margin(1e-12));
          }
      }
  // adaptive: 5x6 -> 3x4, float, batched
  std::vector<float> xf(2 * H * W);
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = float(i);
  std::vector<float> o(2 * 12);
  Tensor in = mk(ScalarType::Float, {1, 2, H, W}, xf.data()), out = mk(ScalarType::Float, {1, 2, 3, 4}, o.data());
  const int64_t osz[] = {3, 4};
  REQUIRE(adaptive_avg_pool2d_out<real_types>(ctx, in, osz, out));
  for (int c = 0; c < 2; ++c)
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 4; ++ow) {
        const int h0 = oh * 5 / 3, h1 = ((oh + 1) * 5 + 2) / 3, w0 = ow * 6 / 4, w1 = ((ow + 1) * 6 + 3) / 4;
        double sum = 0;
        for (int h = h0; h < h1; ++h)
          for (int w = w0; w < w1; ++w) sum += xf[(c * H + h) * W + w];
        CHECK(o[(c * 3 + oh) * 4 + ow] == Approx(sum / ((h1 - h0) * (w1 - w0))).margin(1e-4));
      }
  Tensor bad = mk(ScalarType::Float, {H, W}, xf.data());
  auto st = adaptive_avg_pool2d_out<real_types>(ctx, bad, osz, out);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("3-D or 4-D"));
  CHECK(slots_of("aten::avg_pool2d.out") == 9);
  CHECK(slots_of("aten::_adaptive_avg_pool2d.out") == 4);
}

// ---- max_pool2d_with_indices_backward ---------------------------------------------------------------------------

TEST_CASE("max_pool2d backward: torch spot values (overlapping windows add up)", "[pool]") {
  KernelContext ctx;
  // x = torch.tensor([[[1., 5., 2., 0.], [3., 4., 5., 1.], [0., 2., 9., 9.]]]); k 2, s 1 -> indices
  // [[[1, 1, 6], [5, 10, 10]]]; A.max_pool2d_with_indices_backward(g = [[[1, 2, 3], [4, 5, 6]]], x, [2, 2], [1, 1],
  // [0, 0], [1, 1], False, i) -> [[[0, 3, 0, 0], [0, 4, 3, 0], [0, 0, 11, 0]]]
  std::vector<float> x{1, 5, 2, 0, 3, 4, 5, 1, 0, 2, 9, 9};
  std::vector<float> go{1, 2, 3, 4, 5, 6};
  std::vector<int64_t> ix{1, 1, 6, 5, 10, 10};
  std::vector<float> gi(12, -7.0f);
  Tensor tgi = mk(gi, {1, 3, 4});
  const int64_t k[] = {2, 2}, s[] = {1, 1}, p[] = {0, 0}, d[] = {1, 1};
  REQUIRE(max_pool2d_with_indices_backward_out<float_types>(ctx, mk(go, {1, 2, 3}), mk(x, {1, 3, 4}), k, s, p, d, false,
                                                            mk(ix, {1, 2, 3}), tgi));
  CHECK(gi == std::vector<float>{0, 3, 0, 0, 0, 4, 3, 0, 0, 0, 11, 0});
  CHECK(slots_of("aten::max_pool2d_with_indices_backward.grad_input") == 10);
}

TEST_CASE("max_pool2d backward: random, forward indices, NHWC grad_output and grad_input, padding, dilation",
          "[pool]") {
  KernelContext ctx;
  std::mt19937 g(41);
  std::uniform_real_distribution<double> dist(-3, 3);
  const int64_t N = 2, C = 3, H = 7, W = 8;
  std::vector<double> x(N * C * H * W);
  for (auto& v : x) v = dist(g);
  struct Cfg { int64_t k, s, p, d; bool ceil; };
  for (Cfg cfg : {Cfg{3, 2, 1, 1, false}, Cfg{2, 1, 0, 1, false}, Cfg{3, 1, 1, 2, true}, Cfg{3, 3, 1, 1, true}}) {
    const int64_t OH = pool_detail::out_size(H, cfg.k, cfg.p, cfg.s, cfg.d, cfg.ceil);
    const int64_t OW = pool_detail::out_size(W, cfg.k, cfg.p, cfg.s, cfg.d, cfg.ceil);
    std::vector<double> go(N * C * OH * OW);
    for (auto& v : go) v = dist(g);
    // Reference: each output's argmax (naive, first max wins) receives its gradient.
    std::vector<double> want(x.size(), 0.0);
    std::vector<int64_t> idx_logical(go.size());
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> ro;
      std::vector<int64_t> ri;
      ref_max([&](int64_t c, int64_t h, int64_t w) { return x[((n * C + c) * H + h) * W + w]; }, C, H, W, cfg.k, cfg.s,
              cfg.p, cfg.d, OH, OW, ro, ri);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t o = 0; o < OH * OW; ++o) {
          const int64_t at = (n * C + c) * OH * OW + o;
          idx_logical[at] = ri[c * OH * OW + o];
          want[(n * C + c) * H * W + ri[c * OH * OW + o]] += go[at];
        }
    }
    for (bool nhwc : {false, true}) {
      // grad_output and indices in the chosen layout; grad_input in the same layout.
      std::vector<double> go_s(go.size());
      std::vector<int64_t> ix_s(go.size());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t o = 0; o < OH * OW; ++o) {
            const int64_t l = (n * C + c) * OH * OW + o;
            const int64_t st = nhwc ? (n * OH * OW + o) * C + c : l;
            go_s[st] = go[l];
            ix_s[st] = idx_logical[l];
          }
      const std::vector<uint8_t> order = nhwc ? std::vector<uint8_t>{0, 2, 3, 1} : std::vector<uint8_t>{};
      std::vector<double> gi(x.size(), 99.0);
      Tensor tgi = mk(ScalarType::Double, {N, C, H, W}, gi.data(), order);
      const int64_t k[] = {cfg.k}, s[] = {cfg.s}, p[] = {cfg.p}, d[] = {cfg.d};
      REQUIRE(max_pool2d_with_indices_backward_out<float_types>(
          ctx, mk(ScalarType::Double, {N, C, OH, OW}, go_s.data(), order),
          mk(ScalarType::Double, {N, C, H, W}, x.data()), k, s, p, d, cfg.ceil,
          mk(ScalarType::Long, {N, C, OH, OW}, ix_s.data(), order), tgi));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t hw = 0; hw < H * W; ++hw) {
            const int64_t st = nhwc ? (n * H * W + hw) * C + c : (n * C + c) * H * W + hw;
            CHECK(gi[st] == Approx(want[(n * C + c) * H * W + hw]).margin(1e-12));
          }
    }
  }
}

TEST_CASE("max_pool2d backward: errors", "[pool]") {
  KernelContext ctx;
  std::vector<float> x(12), go(6), gi(12);
  std::vector<int64_t> ix{1, 1, 6, 5, 10, 10};
  Tensor tx = mk(x, {1, 3, 4}), tgo = mk(go, {1, 2, 3}), tgi = mk(gi, {1, 3, 4}), tix = mk(ix, {1, 2, 3});
  const int64_t k[] = {2, 2}, s[] = {1, 1}, p[] = {0, 0}, d[] = {1, 1};
  // An index outside the 3x4 plane (torch reads out of bounds here).
  std::vector<int64_t> bad{1, 1, 60, 5, 10, 10};
  auto st = max_pool2d_with_indices_backward_out<float_types>(ctx, tgo, tx, k, s, p, d, false, mk(bad, {1, 2, 3}), tgi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("index 60") && Catch::Contains("outside the 3x4 input plane"));
  // grad_output of the wrong pooled shape.
  std::vector<float> go2(3);
  st = max_pool2d_with_indices_backward_out<float_types>(ctx, mk(go2, {1, 1, 3}), tx, k, s, p, d, false, tix, tgi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("grad_output shape [1, 1, 3] does not match the pooled shape [1, 2, 3]"));
  // Int indices (torch: "expected scalar type Long but found Int").
  std::vector<int32_t> ix32(6);
  st = max_pool2d_with_indices_backward_out<float_types>(ctx, tgo, tx, k, s, p, d, false, mk(ix32, {1, 2, 3}), tgi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("indices must be Long, got Int"));
  // Mixed dtypes (torch: "expected dtype float for `gradOutput` but got dtype double").
  std::vector<double> god(6);
  st = max_pool2d_with_indices_backward_out<float_types>(ctx, mk(god, {1, 2, 3}), tx, k, s, p, d, false, tix, tgi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("grad_output dtype Double must equal the input dtype Float"));
  // Integer gradients (torch: "max_pool2d_backward" not implemented for 'Long').
  std::vector<int64_t> xl(12), gol(6), gil(12);
  Tensor tgil = mk(gil, {1, 3, 4});
  st = max_pool2d_with_indices_backward_out<float_types>(ctx, mk(gol, {1, 2, 3}), mk(xl, {1, 3, 4}), k, s, p, d, false,
                                                         tix, tgil);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("unsupported dtype Long"));
  // A 2-D input.
  st = max_pool2d_with_indices_backward_out<float_types>(ctx, tgo, mk(x, {3, 4}), k, s, p, d, false, tix, tgi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("3-D or 4-D"));
}
