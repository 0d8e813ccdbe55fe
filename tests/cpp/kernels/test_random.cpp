// Tests for the random kernels (include/etrt/kernels/ops/random.h): shapes, ranges and distribution statistics,
// never exact values (Note [random streams]).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "etrt/kernels/ops/random.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

struct Moments {
  double mean = 0, var = 0;
};
template <class V>
Moments moments_of(const V& v) {
  Moments m;
  for (auto x : v) m.mean += static_cast<double>(x);
  m.mean /= static_cast<double>(v.size());
  for (auto x : v) m.var += std::pow(static_cast<double>(x) - m.mean, 2);
  m.var /= static_cast<double>(v.size() - 1);
  return m;
}
}  // namespace

TEST_CASE("rand.out: shape, range [0, 1), uniform moments and deciles, fresh values per call", "[kernels][random]") {
  KernelContext ctx;
  set_random_seed(1234);
  const int64_t n = 200000;
  std::vector<float> o(n);
  Tensor to = mk(o, {400, 500});
  const int64_t size[] = {400, 500};
  REQUIRE(rand_out<float_types>(ctx, size, to));
  float lo = 1, hi = 0;
  std::vector<int> decile(10);
  for (float v : o) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    if (v >= 0 && v < 1) ++decile[static_cast<int>(v * 10)];
  }
  CHECK(lo >= 0.0f);
  CHECK(hi < 1.0f);
  // Standard errors for n = 200000: mean 0.00065, variance 0.00019, decile count 134.
  const Moments m = moments_of(o);
  CHECK(m.mean == Approx(0.5).margin(0.004));
  CHECK(m.var == Approx(1.0 / 12).margin(0.0012));
  for (int d = 0; d < 10; ++d) CHECK(decile[d] == Approx(n / 10).margin(800));
  // A second call gives different values; reseeding replays the first.
  std::vector<float> o2(n);
  Tensor to2 = mk(o2, {400, 500});
  REQUIRE(rand_out<float_types>(ctx, size, to2));
  CHECK(o2 != o);
  set_random_seed(1234);
  REQUIRE(rand_out<float_types>(ctx, size, to2));
  CHECK(o2 == o);
}

TEST_CASE("rand.out: Half, BFloat16 and double stay below 1; dynamic resize", "[kernels][random]") {
  KernelContext ctx;
  const int64_t n = 50000;
  std::vector<uint16_t> h(n), bf(n);
  Tensor th = mk(h, {n}, ScalarType::Half), tb = mk(bf, {n}, ScalarType::BFloat16);
  const int64_t size[] = {n};
  REQUIRE(rand_out<float_types>(ctx, size, th));
  REQUIRE(rand_out<float_types>(ctx, size, tb));
  std::vector<float> hf(n), bff(n);
  for (int64_t i = 0; i < n; ++i) {
    hf[i] = Half::to_float(h[i]);
    bff[i] = std::bit_cast<float>(static_cast<uint32_t>(bf[i]) << 16);
  }
  CHECK(*std::max_element(hf.begin(), hf.end()) < 1.0f);
  CHECK(*std::min_element(hf.begin(), hf.end()) >= 0.0f);
  CHECK(*std::max_element(bff.begin(), bff.end()) < 1.0f);
  CHECK(moments_of(hf).mean == Approx(0.5).margin(0.01));
  CHECK(moments_of(bff).mean == Approx(0.5).margin(0.01));
  // A bounded-dynamic output takes the requested size.
  std::vector<double> d(12);
  Tensor td = mk(d, {3, 4}, ScalarType::Double, {}, ShapeDynamism::DynamicBound);
  const int64_t small[] = {2, 3};
  REQUIRE(rand_out<float_types>(ctx, small, td));
  CHECK(td.size(0) == 2);
  CHECK(td.size(1) == 3);
  for (int i = 0; i < 6; ++i) CHECK((d[i] >= 0.0 && d[i] < 1.0));
}

TEST_CASE("randn.out: standard normal moments and tail fractions", "[kernels][random]") {
  KernelContext ctx;
  const int64_t n = 200001;  // odd: the last Box-Muller pair is half used
  std::vector<double> o(n);
  Tensor to = mk(o, {n});
  const int64_t size[] = {n};
  REQUIRE(randn_out<float_types>(ctx, size, to));
  const Moments m = moments_of(o);
  // Standard errors: mean 0.0022, variance 0.0032; a uniform or a wrongly scaled normal fails these.
  CHECK(m.mean == Approx(0.0).margin(0.012));
  CHECK(m.var == Approx(1.0).margin(0.016));
  int64_t within1 = 0, beyond2 = 0, bad = 0;
  double m4 = 0;
  for (double v : o) {
    if (!std::isfinite(v)) ++bad;
    within1 += std::fabs(v) < 1.0;
    beyond2 += std::fabs(v) > 2.0;
    m4 += std::pow(v - m.mean, 4);
  }
  CHECK(bad == 0);
  CHECK(static_cast<double>(within1) / n == Approx(0.682689).margin(0.005));
  CHECK(static_cast<double>(beyond2) / n == Approx(0.0455).margin(0.003));
  CHECK(m4 / n / (m.var * m.var) == Approx(3.0).margin(0.1));  // kurtosis of a normal
  // float output too.
  std::vector<float> of(20000);
  Tensor tof = mk(of, {100, 200});
  const int64_t s2[] = {100, 200};
  REQUIRE(randn_out<float_types>(ctx, s2, tof));
  CHECK(moments_of(of).var == Approx(1.0).margin(0.05));
}

TEST_CASE("rand.out / randn.out: errors", "[kernels][random]") {
  KernelContext ctx;
  std::vector<int64_t> oi(3);
  Tensor toi = mk(oi, {3});
  const int64_t size[] = {3};
  // torch: "check_uniform_bounds" / "normal_kernel_cpu" not implemented for 'Long'
  auto st = rand_out<float_types>(ctx, size, toi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("rand.out: unsupported dtype Long"));
  st = randn_out<float_types>(ctx, size, toi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("randn.out: unsupported dtype Long"));
  std::vector<float> o(3);
  Tensor to = mk(o, {3});
  const int64_t neg[] = {-1};
  st = rand_out<float_types>(ctx, neg, to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("negative dimension"));
  const int64_t other[] = {4};
  st = randn_out<float_types>(ctx, other, to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("randn.out: output shape [4]"));
  CHECK(slots_of("aten::rand.out") == 3);
  CHECK(slots_of("aten::randn.out") == 3);
}

TEST_CASE("native_dropout.out: training keeps 1 - p of the elements scaled by 1 / (1 - p)", "[kernels][random]") {
  KernelContext ctx;
  const int64_t n = 100000;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 1.0f + static_cast<float>(i % 17);
  for (double p : {0.3, 0.9}) {
    std::vector<float> o(n);
    std::vector<uint8_t> mask(n, 7);
    Tensor to = mk(o, {n}), tm = mk(mask, {n}, ScalarType::Bool);
    REQUIRE(native_dropout_out<real_bool_types>(ctx, mk(x, {n}), p, true, to, tm));
    int64_t kept = 0, wrong = 0;
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    for (int64_t i = 0; i < n; ++i) {
      if (mask[i] > 1) ++wrong;
      if (mask[i] == 1) {
        ++kept;
        if (o[i] != x[i] * scale) ++wrong;
      } else if (o[i] != 0.0f) {
        ++wrong;
      }
    }
    CHECK(wrong == 0);
    // Standard error of the kept fraction: sqrt(p (1 - p) / n) <= 0.0016.
    CHECK(static_cast<double>(kept) / n == Approx(1.0 - p).margin(0.008));
  }
  // train = None means training.
  std::vector<float> o(n);
  std::vector<uint8_t> mask(n);
  Tensor to = mk(o, {n}), tm = mk(mask, {n}, ScalarType::Bool);
  REQUIRE(native_dropout_out<real_bool_types>(ctx, mk(x, {n}), 0.5, std::nullopt, to, tm));
  int64_t kept = 0;
  for (uint8_t v : mask) kept += v;
  CHECK(static_cast<double>(kept) / n == Approx(0.5).margin(0.008));
}

TEST_CASE("native_dropout.out: p = 0 and 1, NaN/inf, eval, channels-last, errors", "[kernels][random]") {
  KernelContext ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x{1.0f, nan, 3.0f, inf};
  std::vector<float> o(4);
  std::vector<uint8_t> m(4);
  Tensor to = mk(o, {4}), tm = mk(m, {4}, ScalarType::Bool);
  // A.native_dropout(torch.tensor([1., nan, 3., inf]), 1.0, True) -> ([0, nan, 0, nan], all false)
  REQUIRE(native_dropout_out<real_bool_types>(ctx, mk(x, {4}), 1.0, true, to, tm));
  CHECK(o[0] == 0.0f);
  CHECK(std::isnan(o[1]));
  CHECK(o[2] == 0.0f);
  CHECK(std::isnan(o[3]));
  CHECK(m == std::vector<uint8_t>{0, 0, 0, 0});
  // p = 0 -> identity, all true
  REQUIRE(native_dropout_out<real_bool_types>(ctx, mk(x, {4}), 0.0, true, to, tm));
  CHECK(o[0] == 1.0f);
  CHECK(std::isnan(o[1]));
  CHECK(o[3] == inf);
  CHECK(m == std::vector<uint8_t>{1, 1, 1, 1});
  // Eval: a copy and an all-true mask, integers allowed (A.native_dropout(torch.tensor([1, 2]), 0.5, False)).
  std::vector<int64_t> xi{1, 2}, oi(2);
  std::vector<uint8_t> mi(2);
  Tensor toi = mk(oi, {2}), tmi = mk(mi, {2}, ScalarType::Bool);
  REQUIRE(native_dropout_out<real_bool_types>(ctx, mk(xi, {2}), 0.5, false, toi, tmi));
  CHECK(oi == std::vector<int64_t>{1, 2});
  CHECK(mi == std::vector<uint8_t>{1, 1});
  // Channels-last input and outputs: out0 / mask agree elementwise in the same layout.
  const int64_t N = 2, C = 3, H = 4, W = 5, n = N * C * H * W;
  std::vector<double> xc(n), oc(n);
  std::vector<uint8_t> mc(n);
  for (int64_t i = 0; i < n; ++i) xc[i] = 0.5 + static_cast<double>(i);
  const std::vector<uint8_t> cl{0, 2, 3, 1};
  Tensor toc = mk(ScalarType::Double, {N, C, H, W}, oc.data(), cl);
  Tensor tmc = mk(ScalarType::Bool, {N, C, H, W}, mc.data(), cl);
  REQUIRE(native_dropout_out<real_bool_types>(ctx, mk(ScalarType::Double, {N, C, H, W}, xc.data(), cl), 0.25, true, toc,
                                              tmc));
  for (int64_t i = 0; i < n; ++i) CHECK(oc[i] == (mc[i] ? xc[i] * (1.0 / 0.75) : 0.0));
  // Contiguous input into a channels-last output: element (n, c, h, w) of out0 is x's element times mask / 0.75.
  std::vector<double> xcont(n);
  for (int64_t i = 0; i < n; ++i) xcont[i] = 1.0 + static_cast<double>(i);
  REQUIRE(native_dropout_out<real_bool_types>(ctx, mk(ScalarType::Double, {N, C, H, W}, xcont.data()), 0.25, true,
                                              toc, tmc));
  int wrong = 0;
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const int64_t li = ((nn * C + c) * H + h) * W + w, si = ((nn * H + h) * W + w) * C + c;
          if (oc[si] != (mc[si] ? xcont[li] * (1.0 / 0.75) : 0.0)) ++wrong;
        }
  CHECK(wrong == 0);
  // Errors: torch's bernoulli_ range check, integer training input, non-Bool mask, dtype mismatch.
  for (double bad : {1.5, -0.1, std::nan("")}) {
    auto st = native_dropout_out<real_bool_types>(ctx, mk(x, {4}), bad, true, to, tm);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().what, Catch::Contains("dropout probability must be in [0, 1]"));
  }
  auto st = native_dropout_out<real_bool_types>(ctx, mk(xi, {2}), 0.5, true, toi, tmi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("needs a floating input, got Long"));
  std::vector<float> mf(4);
  Tensor tmf = mk(mf, {4});
  st = native_dropout_out<real_bool_types>(ctx, mk(x, {4}), 0.5, true, to, tmf);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("mask output must be Bool, got Float"));
  std::vector<double> od(4);
  Tensor tod = mk(od, {4});
  st = native_dropout_out<real_bool_types>(ctx, mk(x, {4}), 0.5, true, tod, tm);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("input dtype Float != output dtype Double"));
  CHECK(slots_of("aten::native_dropout.out") == 6);
}
