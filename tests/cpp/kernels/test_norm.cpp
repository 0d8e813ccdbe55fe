// Tests for layer, batch and group norm (include/etrt/kernels/ops/norm.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "etrt/kernels/ops/norm.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
}  // namespace

namespace {
std::vector<float> data(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(std::cos(i * 0.7) * 3.0 + i * 0.01);
  return v;
}
}  // namespace

TEST_CASE("native_layer_norm over the last two dims with weight and bias", "[kernels][norm]") {
  KernelContext ctx;
  auto x = data(24);  // [2, 3, 4], normalized over [3, 4]
  std::vector<float> w(12), b(12);
  for (int i = 0; i < 12; ++i) {
    w[i] = 0.5f + 0.1f * i;
    b[i] = -0.2f * i;
  }
  std::vector<float> o(24), m(2), r(2);
  Tensor to = mk(o, {2, 3, 4}), tm = mk(m, {2, 1, 1}), tr = mk(r, {2, 1, 1});
  Tensor tw = mk(w, {3, 4}), tb = mk(b, {3, 4});
  const std::vector<int64_t> ns{3, 4};
  const double eps = 1e-5;
  REQUIRE(native_layer_norm_out<float_types>(ctx, mk(x, {2, 3, 4}), ns, &tw, &tb, eps, to, tm, tr));
  for (int row = 0; row < 2; ++row) {
    double mean = 0, var = 0;
    for (int i = 0; i < 12; ++i) mean += x[row * 12 + i];
    mean /= 12;
    for (int i = 0; i < 12; ++i) var += (x[row * 12 + i] - mean) * (x[row * 12 + i] - mean);
    var /= 12;
    const double rstd = 1 / std::sqrt(var + eps);
    CHECK(m[row] == Approx(mean).margin(1e-6));
    CHECK(r[row] == Approx(rstd).epsilon(1e-6));
    for (int i = 0; i < 12; ++i)
      CHECK(o[row * 12 + i] == Approx((x[row * 12 + i] - mean) * rstd * w[i] + b[i]).epsilon(1e-5).margin(1e-5));
  }
  // No weight/bias, double.
  std::vector<double> xd(x.begin(), x.end()), od(24), md(6), rd(6);
  Tensor tod = mk(od, {2, 3, 4}), tmd = mk(md, {2, 3, 1}), trd = mk(rd, {2, 3, 1});
  const std::vector<int64_t> ns1{4};
  REQUIRE(native_layer_norm_out<float_types>(ctx, mk(xd, {2, 3, 4}), ns1, nullptr, nullptr, eps, tod, tmd, trd));
  for (int row = 0; row < 6; ++row) {
    double s = 0;
    for (int i = 0; i < 4; ++i) s += od[row * 4 + i];
    CHECK(s == Approx(0).margin(1e-9));
  }
}

TEST_CASE("native_layer_norm: rows wider than the partial sums, with a tail, at every ISA level", "[kernels][norm]") {
  // 771 = 96 x 8 + 3: the eight interleaved partial sums and the elements past them. A mean of 1000 against a
  // spread of about 1 checks the two passes (a one-pass variance would lose the spread).
  constexpr int rows = 3, n = 771;
  std::vector<float> x(rows * n), w(n), b(n);
  for (int i = 0; i < rows * n; ++i) x[i] = 1000.f * (i / n + 1) + static_cast<float>((i * 37) % 101) / 50.f;
  for (int i = 0; i < n; ++i) {
    w[i] = 0.5f + 0.001f * i;
    b[i] = 0.25f - 0.0005f * i;
  }
  const std::vector<int64_t> ns{n};
  for (int level : {-1, 1, 0}) {
    kernels::isa::force_level = level;
    KernelContext ctx;
    std::vector<float> o(rows * n), m(rows), r(rows);
    Tensor to = mk(o, {rows, n}), tm = mk(m, {rows, 1}), tr = mk(r, {rows, 1});
    Tensor tw = mk(w, {n}), tb = mk(b, {n});
    REQUIRE(native_layer_norm_out<float_types>(ctx, mk(x, {rows, n}), ns, &tw, &tb, 1e-5, to, tm, tr));
    for (int row = 0; row < rows; ++row) {
      long double mean = 0, var = 0;
      for (int i = 0; i < n; ++i) mean += x[row * n + i];
      mean /= n;
      for (int i = 0; i < n; ++i) var += (x[row * n + i] - mean) * (x[row * n + i] - mean);
      var /= n;
      const double rstd = static_cast<double>(1 / std::sqrt(var + 1e-5L));
      CHECK(m[row] == Approx(static_cast<double>(mean)).epsilon(1e-7));
      CHECK(r[row] == Approx(rstd).epsilon(1e-6));
      for (int i = 0; i < n; ++i) {
        const double want = (x[row * n + i] - static_cast<double>(mean)) * rstd * w[i] + b[i];
        CHECK(o[row * n + i] == Approx(want).margin(1e-3));  // x - mean in float: x (to 3000) carries 2e-4
      }
    }
  }
  kernels::isa::force_level = -1;
}

TEST_CASE("native_layer_norm failures and empty input", "[kernels][norm]") {
  KernelContext ctx;
  auto x = data(6);
  std::vector<float> o(6), m(2), r(2);
  Tensor to = mk(o, {2, 3}), tm = mk(m, {2, 1}), tr = mk(r, {2, 1});
  const std::vector<int64_t> bad{4};
  auto s = native_layer_norm_out<float_types>(ctx, mk(x, {2, 3}), bad, nullptr, nullptr, 1e-5, to, tm, tr);
  REQUIRE(!s);
  CHECK(s.error().code == Error::InvalidArgument);
  CHECK(s.error().what.find("normalized_shape") != std::string::npos);
  const std::vector<int64_t> ns{3};
  std::vector<float> w(2);
  Tensor tw = mk(w, {2});
  s = native_layer_norm_out<float_types>(ctx, mk(x, {2, 3}), ns, &tw, nullptr, 1e-5, to, tm, tr);
  REQUIRE(!s);
  CHECK(s.error().what.find("weight") != std::string::npos);
  std::vector<float> e;
  Tensor te = mk(e, {0, 3}), tme = mk(e, {0, 1}), tre = mk(e, {0, 1});
  REQUIRE(native_layer_norm_out<float_types>(ctx, mk(e, {0, 3}), ns, nullptr, nullptr, 1e-5, te, tme, tre));
}

TEST_CASE("_native_batch_norm_legit_no_training, contiguous and channels-last", "[kernels][norm]") {
  KernelContext ctx;
  auto x = data(2 * 3 * 2 * 2);  // [2, 3, 2, 2]
  std::vector<float> w{1, 2, 0.5f}, b{0, 1, -1}, rm{0.1f, -0.2f, 0.3f}, rv{1.0f, 0.5f, 2.0f};
  Tensor tw = mk(w, {3}), tb = mk(b, {3}), trm = mk(rm, {3}), trv = mk(rv, {3});
  std::vector<float> o(24), e1, e2;
  Tensor to = mk(o, {2, 3, 2, 2}), t1 = mk(e1, {0}), t2 = mk(e2, {0});
  const double eps = 1e-5;
  REQUIRE(native_batch_norm_legit_no_training_out<float_types>(ctx, mk(x, {2, 3, 2, 2}), &tw, &tb, trm, trv, 0.1, eps,
                                                               to, t1, t2));
  auto ref = [&](int n, int c, int hw) {
    const double v = x[(n * 3 + c) * 4 + hw];
    return (v - rm[c]) / std::sqrt(rv[c] + eps) * w[c] + b[c];
  };
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int hw = 0; hw < 4; ++hw) CHECK(o[(n * 3 + c) * 4 + hw] == Approx(ref(n, c, hw)).epsilon(1e-5));
  // Channels-last output of a contiguous input: out offset = ((n * 4) + hw) * 3 + c.
  std::vector<float> ocl(24);
  Tensor tocl = mk(ocl, {2, 3, 2, 2}, ScalarType::Float, {0, 2, 3, 1});
  REQUIRE(native_batch_norm_legit_no_training_out<float_types>(ctx, mk(x, {2, 3, 2, 2}), &tw, &tb, trm, trv, 0.1, eps,
                                                               tocl, t1, t2));
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int hw = 0; hw < 4; ++hw) CHECK(ocl[(n * 4 + hw) * 3 + c] == Approx(ref(n, c, hw)).epsilon(1e-5));
  // Without weight and bias, double.
  std::vector<double> xd{1, 2, 3, 4}, od(4), rmd{1, 2}, rvd{4, 9};
  Tensor tod = mk(od, {2, 2});
  REQUIRE(native_batch_norm_legit_no_training_out<float_types>(ctx, mk(xd, {2, 2}), nullptr, nullptr, mk(rmd, {2}),
                                                               mk(rvd, {2}), 0.1, 0.0, tod, t1, t2));
  CHECK(od == std::vector<double>{0, 0, 1.0, 2.0 / 3});
  // Failures.
  std::vector<float> rm2(2);
  auto s = native_batch_norm_legit_no_training_out<float_types>(ctx, mk(x, {2, 3, 2, 2}), &tw, &tb, mk(rm2, {2}), trv,
                                                                0.1, eps, to, t1, t2);
  REQUIRE(!s);
  CHECK(s.error().what.find("running_mean") != std::string::npos);
  std::vector<float> one(3);
  s = native_batch_norm_legit_no_training_out<float_types>(ctx, mk(one, {3}), &tw, &tb, trm, trv, 0.1, eps, to, t1,
                                                           t2);
  REQUIRE(!s);
  CHECK(s.error().what.find("at least 2 dims") != std::string::npos);
}

TEST_CASE("_native_batch_norm_legit.no_stats_out uses batch statistics", "[kernels][norm]") {
  KernelContext ctx;
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8};  // [2, 2, 2]
  std::vector<float> o(8), sm(2), si(2);
  Tensor to = mk(o, {2, 2, 2}), tsm = mk(sm, {2}), tsi = mk(si, {2});
  REQUIRE(native_batch_norm_legit_no_stats_out<float_types>(ctx, mk(x, {2, 2, 2}), nullptr, nullptr, true, 0.1, 1e-5,
                                                            to, tsm, tsi));
  // channel 0: {1, 2, 5, 6}, channel 1: {3, 4, 7, 8}
  CHECK(sm[0] == Approx(3.5));
  CHECK(sm[1] == Approx(5.5));
  const double var = (2.5 * 2.5 + 1.5 * 1.5 + 1.5 * 1.5 + 2.5 * 2.5) / 4;
  CHECK(si[0] == Approx(1 / std::sqrt(var + 1e-5)));
  CHECK(o[0] == Approx((1 - 3.5) / std::sqrt(var + 1e-5)));
  CHECK(o[7] == Approx((8 - 5.5) / std::sqrt(var + 1e-5)));
  auto s = native_batch_norm_legit_no_stats_out<float_types>(ctx, mk(x, {2, 2, 2}), nullptr, nullptr, false, 0.1,
                                                             1e-5, to, tsm, tsi);
  REQUIRE(!s);
}

TEST_CASE("_native_batch_norm_legit.out training: torch spot values and running-stat update", "[kernels][norm]") {
  KernelContext ctx;
  // x = torch.arange(12.).reshape(2, 2, 3) * 0.5 - 1; x[1, 1, 2] = 4.
  // o, sm, si = A._native_batch_norm_legit(x, w=[1.5, -0.5], b=[0.1, 0.2], rm=[0.3, -0.2], rv=[1.2, 0.7], True,
  //                                        0.1, 1e-5)
  std::vector<float> x{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 4.0f};
  std::vector<float> w{1.5f, -0.5f}, b{0.1f, 0.2f}, rm{0.3f, -0.2f}, rv{1.2f, 0.7f};
  Tensor tw = mk(w, {2}), tb = mk(b, {2}), trm = mk(rm, {2}), trv = mk(rv, {2});
  std::vector<float> o(12), sm(2), si(2);
  Tensor to = mk(o, {2, 2, 3}), tsm = mk(sm, {2}), tsi = mk(si, {2});
  REQUIRE(native_batch_norm_legit_out<float_types>(ctx, mk(x, {2, 2, 3}), &tw, &tb, trm, trv, true, 0.1, 1e-5, to, tsm,
                                                   tsi));
  const std::vector<double> want_o{-1.8297985792160034,  -1.347348928451538,  -0.8648992776870728, 0.8584865927696228,
                                   0.6867074966430664,   0.51492840051651,    1.0648993253707886,  1.547348976135254,
                                   2.0297985076904297,   -0.17218798398971558, -0.343967080116272, -0.343967080116272};
  for (int i = 0; i < 12; ++i) CHECK(o[i] == Approx(want_o[i]).epsilon(1e-6).margin(1e-6));
  CHECK(sm[0] == Approx(1.0).epsilon(1e-7));
  CHECK(sm[1] == Approx(2.4166667461395264).epsilon(1e-7));
  CHECK(si[0] == Approx(0.6432662010192871).epsilon(1e-6));
  CHECK(si[1] == Approx(0.6871163845062256).epsilon(1e-6));
  // Running stats after the call: rm -> [0.37, 0.06166668236255646], rv -> [1.37, 0.8841666579246521]
  CHECK(rm[0] == Approx(0.3700000047683716).epsilon(1e-6));
  CHECK(rm[1] == Approx(0.06166668236255646).epsilon(1e-5));
  CHECK(rv[0] == Approx(1.3700000047683716).epsilon(1e-6));
  CHECK(rv[1] == Approx(0.8841666579246521).epsilon(1e-6));
}

TEST_CASE("_native_batch_norm_legit.out training: random channels-last input against a naive reference",
          "[kernels][norm]") {
  KernelContext ctx;
  std::mt19937 g(31);
  std::normal_distribution<double> nd(0.7, 2.0);
  const int64_t N = 3, C = 4, H = 2, W = 5;
  std::vector<double> logical(N * C * H * W);
  for (auto& v : logical) v = nd(g);
  auto li = [&](int64_t n, int64_t c, int64_t h, int64_t w) { return ((n * C + c) * H + h) * W + w; };
  auto cl = [&](int64_t n, int64_t c, int64_t h, int64_t w) { return ((n * H + h) * W + w) * C + c; };
  std::vector<double> stored(logical.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) stored[cl(n, c, h, w)] = logical[li(n, c, h, w)];
  std::vector<double> wt{0.5, 1.0, -2.0, 3.0}, rm{0.1, 0.2, 0.3, 0.4}, rv{1.0, 2.0, 0.5, 0.25};
  const std::vector<double> rm0 = rm, rv0 = rv;
  std::vector<double> o(logical.size()), sm(C), si(C);
  Tensor tw = mk(wt, {C}), trm = mk(rm, {C}), trv = mk(rv, {C});
  Tensor to = mk(o, {N, C, H, W}, ScalarType::Double, {0, 2, 3, 1}), tsm = mk(sm, {C}), tsi = mk(si, {C});
  const double momentum = 0.25, eps = 1e-3;
  REQUIRE(native_batch_norm_legit_out<float_types>(ctx, mk(stored, {N, C, H, W}, ScalarType::Double, {0, 2, 3, 1}),
                                                   &tw, nullptr, trm, trv, true, momentum, eps, to, tsm, tsi));
  const double per = static_cast<double>(N * H * W);
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, ss = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) mean += logical[li(n, c, h, w)];
    mean /= per;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) ss += std::pow(logical[li(n, c, h, w)] - mean, 2);
    const double invstd = 1 / std::sqrt(ss / per + eps);
    CHECK(sm[c] == Approx(mean).epsilon(1e-12));
    CHECK(si[c] == Approx(invstd).epsilon(1e-12));
    CHECK(rm[c] == Approx((1 - momentum) * rm0[c] + momentum * mean).epsilon(1e-12));
    CHECK(rv[c] == Approx((1 - momentum) * rv0[c] + momentum * ss / (per - 1)).epsilon(1e-12));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          CHECK(o[cl(n, c, h, w)] ==
                Approx((logical[li(n, c, h, w)] - mean) * invstd * wt[c]).epsilon(1e-12).margin(1e-12));
  }
}

TEST_CASE("_native_batch_norm_legit.out: eval mode, one value per channel, errors", "[kernels][norm]") {
  KernelContext ctx;
  // Eval: A._native_batch_norm_legit(x, w, b, rm, rv, False, 0.1, 1e-5) on the spot-value input gives
  // out[0:3] = [-1.6800909042358398, -0.9954406023025513, -0.3107902407646179], empty stats, running stats unchanged.
  std::vector<float> x{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 4.0f};
  std::vector<float> w{1.5f, -0.5f}, b{0.1f, 0.2f}, rm{0.3f, -0.2f}, rv{1.2f, 0.7f};
  Tensor tw = mk(w, {2}), tb = mk(b, {2}), trm = mk(rm, {2}), trv = mk(rv, {2});
  std::vector<float> o(12), sm(2), si(2);
  Tensor to = mk(o, {2, 2, 3}), tsm = mk(sm, {2}, ScalarType::Float, {}, ShapeDynamism::DynamicBound),
         tsi = mk(si, {2}, ScalarType::Float, {}, ShapeDynamism::DynamicBound);
  REQUIRE(native_batch_norm_legit_out<float_types>(ctx, mk(x, {2, 2, 3}), &tw, &tb, trm, trv, false, 0.1, 1e-5, to, tsm,
                                                   tsi));
  CHECK(o[0] == Approx(-1.6800909042358398).epsilon(1e-6));
  CHECK(o[1] == Approx(-0.9954406023025513).epsilon(1e-6));
  CHECK(o[2] == Approx(-0.3107902407646179).epsilon(1e-6));
  CHECK(o[11] == Approx(-2.309962272644043).epsilon(1e-6));
  CHECK(tsm.numel() == 0);
  CHECK(tsi.numel() == 0);
  CHECK(rm == std::vector<float>{0.3f, -0.2f});
  CHECK(rv == std::vector<float>{1.2f, 0.7f});
  // One value per channel: A._native_batch_norm_legit(torch.tensor([[1., 2.]]), None, None, zeros(2), ones(2), True,
  // 0.1, 1e-5) -> out [[0, 0]], save_mean [1, 2], save_invstd [316.2277526855469] * 2, rm [0.1, 0.2], rv [nan, nan]
  std::vector<float> x1{1, 2}, o1(2), rm1{0, 0}, rv1{1, 1}, sm1(2), si1(2);
  Tensor to1 = mk(o1, {1, 2}), trm1 = mk(rm1, {2}), trv1 = mk(rv1, {2}), tsm1 = mk(sm1, {2}), tsi1 = mk(si1, {2});
  REQUIRE(native_batch_norm_legit_out<float_types>(ctx, mk(x1, {1, 2}), nullptr, nullptr, trm1, trv1, true, 0.1, 1e-5,
                                                   to1, tsm1, tsi1));
  CHECK(o1 == std::vector<float>{0, 0});
  CHECK(sm1 == std::vector<float>{1, 2});
  CHECK(si1[0] == Approx(316.2277526855469).epsilon(1e-6));
  CHECK(rm1[0] == Approx(0.1).epsilon(1e-7));
  CHECK(rm1[1] == Approx(0.2).epsilon(1e-7));
  CHECK(std::isnan(rv1[0]));
  CHECK(std::isnan(rv1[1]));
  // Errors: running stats of the wrong size, a 1-D input, an empty training batch, integer running stats.
  std::vector<float> r3(3);
  Tensor tr3 = mk(r3, {3});
  auto s = native_batch_norm_legit_out<float_types>(ctx, mk(x, {2, 2, 3}), &tw, &tb, tr3, trv, true, 0.1, 1e-5, to,
                                                    tsm1, tsi1);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().what, Catch::Contains("running_mean must have shape [2]"));
  s = native_batch_norm_legit_out<float_types>(ctx, mk(x, {12}), &tw, &tb, trm, trv, true, 0.1, 1e-5, to, tsm1, tsi1);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().what, Catch::Contains("at least 2 dims"));
  std::vector<float> e;
  Tensor te = mk(e, {0, 2});
  s = native_batch_norm_legit_out<float_types>(ctx, mk(e, {0, 2}), nullptr, nullptr, trm, trv, true, 0.1, 1e-5, te,
                                               tsm1, tsi1);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().what, Catch::Contains("at least one element"));
  std::vector<int64_t> ri{0, 0};
  Tensor tri = mk(ri, {2});
  s = native_batch_norm_legit_out<float_types>(ctx, mk(x, {2, 2, 3}), &tw, &tb, trm, tri, true, 0.1, 1e-5, to, tsm1,
                                               tsi1);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().what, Catch::Contains("running_var must be floating, got Long"));
  CHECK(rm == std::vector<float>{0.3f, -0.2f});  // refused calls leave the running stats alone
  CHECK(slots_of("aten::_native_batch_norm_legit.out") == 12);
}

TEST_CASE("native_group_norm", "[kernels][norm]") {
  KernelContext ctx;
  auto x = data(2 * 4 * 3);  // N=2, C=4, HxW=3, 2 groups
  std::vector<float> w{1, 2, 3, 4}, b{0.5f, 0, -0.5f, 1};
  Tensor tw = mk(w, {4}), tb = mk(b, {4});
  std::vector<float> o(24), m(4), r(4);
  Tensor to = mk(o, {2, 4, 3}), tm = mk(m, {2, 2}), tr = mk(r, {2, 2});
  const double eps = 1e-5;
  REQUIRE(native_group_norm_out<float_types>(ctx, mk(x, {2, 4, 3}), &tw, &tb, 2, 4, 3, 2, eps, to, tm, tr));
  for (int n = 0; n < 2; ++n)
    for (int g = 0; g < 2; ++g) {
      double mean = 0, var = 0;
      for (int i = 0; i < 6; ++i) mean += x[n * 12 + g * 6 + i];
      mean /= 6;
      for (int i = 0; i < 6; ++i) var += std::pow(x[n * 12 + g * 6 + i] - mean, 2);
      var /= 6;
      const double rstd = 1 / std::sqrt(var + eps);
      CHECK(m[n * 2 + g] == Approx(mean).margin(1e-6));
      CHECK(r[n * 2 + g] == Approx(rstd).epsilon(1e-6));
      for (int i = 0; i < 6; ++i) {
        const int c = g * 2 + i / 3;
        CHECK(o[n * 12 + g * 6 + i] ==
              Approx((x[n * 12 + g * 6 + i] - mean) * rstd * w[c] + b[c]).epsilon(1e-5).margin(1e-5));
      }
    }
  auto s = native_group_norm_out<float_types>(ctx, mk(x, {2, 4, 3}), &tw, &tb, 2, 4, 3, 3, eps, to, tm, tr);
  REQUIRE(!s);
  CHECK(s.error().what.find("divisible") != std::string::npos);
  s = native_group_norm_out<float_types>(ctx, mk(x, {2, 4, 3}), &tw, &tb, 2, 4, 4, 2, eps, to, tm, tr);
  REQUIRE(!s);
  CHECK(s.error().what.find("does not match") != std::string::npos);
}

TEST_CASE("norm wrappers have the schema's slot counts", "[kernels][norm]") {
  CHECK(slots_of("aten::native_layer_norm.out") == 9);
  CHECK(slots_of("aten::_native_batch_norm_legit_no_training.out") == 11);
  CHECK(slots_of("aten::_native_batch_norm_legit.no_stats_out") == 10);
  CHECK(slots_of("aten::native_group_norm.out") == 12);
}
