// Tests for layer, batch and group norm (include/etrt/kernels/ops/norm.h).
#include <catch2/catch.hpp>

#include <cmath>
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
