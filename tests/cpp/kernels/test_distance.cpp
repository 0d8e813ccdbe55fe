// Tests for the pairwise distance kernels (include/etrt/kernels/ops/distance.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "etrt/kernels/ops/distance.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

const double kInf = std::numeric_limits<double>::infinity();
const float kNanF = std::numeric_limits<float>::quiet_NaN();
const float kInfF = std::numeric_limits<float>::infinity();
using CDist = types<float, double>;

/// Naive p-norm of a difference vector (p = 0 counts nonzeros, p = inf the largest magnitude).
double ref_norm(const std::vector<double>& d, double p) {
  if (p == 0) {
    double n = 0;
    for (double v : d) n += v != 0;
    return n;
  }
  if (std::isinf(p)) {
    double m = 0;
    for (double v : d) m = std::max(m, std::fabs(v));
    return m;
  }
  double s = 0;
  for (double v : d) s += std::pow(std::fabs(v), p);
  return std::pow(s, 1 / p);
}

void check_spot(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
    else if (std::isinf(want[i])) CHECK(got[i] == want[i]);
    else CHECK(got[i] == Approx(want[i]).epsilon(1e-6));
  }
}
}  // namespace

TEST_CASE("_cdist_forward: torch spot values with NaN and inf for p = 0, 1, 2, 3, 0.5, inf", "[kernels][distance]") {
  KernelContext ctx;
  // x1 = [[0, 1, 2], [1, nan, 0], [inf, 0, 1]], x2 = [[0, 1, 2], [1, 1, 1]]; A._cdist_forward(x1, x2, p, None)
  std::vector<float> x1{0, 1, 2, 1, kNanF, 0, kInfF, 0, 1}, x2{0, 1, 2, 1, 1, 1};
  struct Case {
    double p;
    std::vector<float> want;
  };
  const std::vector<Case> cases{
      {0.0, {0, 2, kNanF, kNanF, 3, 2}},
      {1.0, {0, 2, kNanF, kNanF, kInfF, kInfF}},
      {2.0, {0, 1.4142135381698608f, kNanF, kNanF, kInfF, kInfF}},
      {3.0, {0, 1.2599210739135742f, kNanF, kNanF, kInfF, kInfF}},
      {0.5, {0, 4, kNanF, kNanF, kInfF, kInfF}},
      {kInf, {0, 1, 2, 1, kInfF, kInfF}},  // cdist's inf-norm skips NaN differences
  };
  for (const Case& c : cases) {
    INFO("p = " << c.p);
    std::vector<float> o(6);
    Tensor to = mk(o, {3, 2});
    REQUIRE(cdist_forward_out<CDist>(ctx, mk(x1, {3, 3}), mk(x2, {2, 3}), c.p, std::nullopt, to));
    check_spot(o, c.want);
  }
  // a = [[0, -inf], [1, inf]], b = [[0, inf]] -> p=0: [[1], [nan]]; p=inf: [[inf], [1]]
  std::vector<float> a{0, -kInfF, 1, kInfF}, b{0, kInfF}, o(2);
  Tensor to = mk(o, {2, 1});
  REQUIRE(cdist_forward_out<CDist>(ctx, mk(a, {2, 2}), mk(b, {1, 2}), 0.0, int64_t{2}, to));
  check_spot(o, {1, kNanF});
  REQUIRE(cdist_forward_out<CDist>(ctx, mk(a, {2, 2}), mk(b, {1, 2}), kInf, int64_t{1}, to));
  check_spot(o, {kInfF, 1});
  CHECK(slots_of("aten::_cdist_forward.out") == 6);
}

TEST_CASE("_cdist_forward: random batched broadcast and transposed inputs against a naive reference",
          "[kernels][distance]") {
  KernelContext ctx;
  std::mt19937 g(8);
  std::uniform_real_distribution<double> dist(-2, 2);
  // x1 [2, 1, P, M] broadcast against x2 [3, R, M] -> out [2, 3, P, R]; x2 stored transposed in its last two dims.
  const int64_t P = 4, R = 5, M = 6;
  std::vector<double> x1(2 * P * M), x2l(3 * R * M);
  for (auto& v : x1) v = dist(g);
  for (auto& v : x2l) v = dist(g);
  x1[3] = x2l[3];  // an exact zero difference, which p = 0 must not count
  std::vector<double> x2s(x2l.size());  // dim order {0, 2, 1}: logical (b, r, m) at (b * M + m) * R + r
  for (int64_t bb = 0; bb < 3; ++bb)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t m = 0; m < M; ++m) x2s[(bb * M + m) * R + r] = x2l[(bb * R + r) * M + m];
  for (double p : {0.0, 1.0, 2.0, 3.5, 0.7, kInf}) {
    INFO("p = " << p);
    std::vector<double> o(2 * 3 * P * R);
    Tensor to = mk(o, {2, 3, P, R});
    REQUIRE(cdist_forward_out<CDist>(ctx, mk(x1, {2, 1, P, M}), mk(x2s, {3, R, M}, ScalarType::Double, {0, 2, 1}), p,
                                     int64_t{0}, to));
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t bb = 0; bb < 3; ++bb)
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < R; ++j) {
            std::vector<double> d(M);
            for (int64_t m = 0; m < M; ++m) d[m] = x1[(a * P + i) * M + m] - x2l[(bb * R + j) * M + m];
            CHECK(o[((a * 3 + bb) * P + i) * R + j] == Approx(ref_norm(d, p)).epsilon(1e-12).margin(1e-12));
          }
  }
  // float, zero columns: every distance is 0 (torch: cdist(zeros(2, 3, 0), zeros(1, 4, 0)).sum() == 0)
  std::vector<float> e;
  std::vector<float> oz(2 * 3 * 4, 7.0f);
  Tensor toz = mk(oz, {2, 3, 4});
  REQUIRE(cdist_forward_out<CDist>(ctx, mk(e, {2, 3, 0}), mk(e, {1, 4, 0}), 2.0, std::nullopt, toz));
  for (float v : oz) CHECK(v == 0.0f);
}

TEST_CASE("_cdist_forward: errors", "[kernels][distance]") {
  KernelContext ctx;
  std::vector<float> a(6), b(4), o(4);
  Tensor to = mk(o, {2, 2});
  auto st = cdist_forward_out<CDist>(ctx, mk(a, {2, 3}), mk(b, {2, 2}), 2.0, std::nullopt, to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("same number of columns"));
  st = cdist_forward_out<CDist>(ctx, mk(a, {6}), mk(b, {2, 2}), 2.0, std::nullopt, to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("at least 2 dims"));
  std::vector<float> b3(6);
  st = cdist_forward_out<CDist>(ctx, mk(a, {2, 3}), mk(b3, {2, 3}), -1.0, std::nullopt, to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("p must be non-negative"));
  st = cdist_forward_out<CDist>(ctx, mk(a, {2, 3}), mk(b3, {2, 3}), std::nan(""), std::nullopt, to);
  REQUIRE_FALSE(st);
  st = cdist_forward_out<CDist>(ctx, mk(a, {2, 3}), mk(b3, {2, 3}), 2.0, int64_t{3}, to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("compute_mode must be 0, 1 or 2, got 3"));
  std::vector<double> bd(6);
  st = cdist_forward_out<CDist>(ctx, mk(a, {2, 3}), mk(bd, {2, 3}), 2.0, std::nullopt, to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("same dtype, got Float and Double"));
  std::vector<int64_t> ai(6), bi(6), oi(4);
  Tensor toi = mk(oi, {2, 2});
  st = cdist_forward_out<CDist>(ctx, mk(ai, {2, 3}), mk(bi, {2, 3}), 2.0, std::nullopt, toi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("unsupported dtype Long"));
  std::vector<float> a2(2 * 6), b2(3 * 6), o2(2 * 2 * 2);
  Tensor to2 = mk(o2, {2, 2, 2});
  st = cdist_forward_out<CDist>(ctx, mk(a2, {2, 2, 3}), mk(b2, {3, 2, 3}), 2.0, std::nullopt, to2);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("cannot be broadcast"));
}

TEST_CASE("_pdist_forward: torch spot values, random transposed input, degenerate sizes, errors",
          "[kernels][distance]") {
  KernelContext ctx;
  // A._pdist_forward(torch.tensor([[0, 1, 2], [1, nan, 0], [inf, 0, 1]]), p): pdist's inf-norm propagates NaN
  std::vector<float> x{0, 1, 2, 1, kNanF, 0, kInfF, 0, 1};
  struct Case {
    double p;
    std::vector<float> want;
  };
  for (const Case& c : std::vector<Case>{{0.0, {kNanF, 3, kNanF}},
                                         {1.0, {kNanF, kInfF, kNanF}},
                                         {2.0, {kNanF, kInfF, kNanF}},
                                         {kInf, {kNanF, kInfF, kNanF}}}) {
    INFO("p = " << c.p);
    std::vector<float> o(3);
    Tensor to = mk(o, {3});
    REQUIRE(pdist_forward_out<CDist>(ctx, mk(x, {3, 3}), c.p, to));
    check_spot(o, c.want);
  }
  // [[0, -inf], [1, inf]] -> p = 0: [2]
  std::vector<float> a{0, -kInfF, 1, kInfF}, o1(1);
  Tensor to1 = mk(o1, {1});
  REQUIRE(pdist_forward_out<CDist>(ctx, mk(a, {2, 2}), 0.0, to1));
  CHECK(o1[0] == 2.0f);
  // Random [6, 4] stored transposed (dim order {1, 0}).
  std::mt19937 g(12);
  std::uniform_real_distribution<double> dist(-3, 3);
  const int64_t N = 6, M = 4;
  std::vector<double> xl(N * M), xs(N * M);
  for (auto& v : xl) v = dist(g);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) xs[m * N + n] = xl[n * M + m];
  for (double p : {0.0, 1.0, 2.0, 1.5, kInf}) {
    INFO("p = " << p);
    std::vector<double> o(N * (N - 1) / 2);
    Tensor to = mk(o, {N * (N - 1) / 2});
    REQUIRE(pdist_forward_out<CDist>(ctx, mk(xs, {N, M}, ScalarType::Double, {1, 0}), p, to));
    int64_t k = 0;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = i + 1; j < N; ++j, ++k) {
        std::vector<double> d(M);
        for (int64_t m = 0; m < M; ++m) d[m] = xl[i * M + m] - xl[j * M + m];
        CHECK(o[k] == Approx(ref_norm(d, p)).epsilon(1e-12).margin(1e-12));
      }
  }
  // One row or none: an empty result; zero columns: zeros (torch: pdist(randn(3, 0)) -> [0, 0, 0]).
  std::vector<float> e, one(4), oe;
  Tensor toe = mk(oe, {0});
  REQUIRE(pdist_forward_out<CDist>(ctx, mk(one, {1, 4}), 2.0, toe));
  REQUIRE(pdist_forward_out<CDist>(ctx, mk(e, {0, 4}), 2.0, toe));
  std::vector<float> oz(3, 5.0f);
  Tensor toz = mk(oz, {3});
  REQUIRE(pdist_forward_out<CDist>(ctx, mk(e, {3, 0}), 2.0, toz));
  CHECK(oz == std::vector<float>{0, 0, 0});
  // Errors: rank, negative p, integer dtype, wrong output size.
  std::vector<float> x3(24), o3(3);
  Tensor to3 = mk(o3, {3});
  auto st = pdist_forward_out<CDist>(ctx, mk(x3, {2, 3, 4}), 2.0, to3);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("expected a 2-D input"));
  st = pdist_forward_out<CDist>(ctx, mk(x, {3, 3}), -2.0, to3);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("p must be non-negative"));
  std::vector<int32_t> xi(9), oi(3);
  Tensor toi = mk(oi, {3});
  st = pdist_forward_out<CDist>(ctx, mk(xi, {3, 3}), 2.0, toi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("unsupported dtype Int"));
  std::vector<float> o4(4);
  Tensor to4 = mk(o4, {4});
  st = pdist_forward_out<CDist>(ctx, mk(x, {3, 3}), 2.0, to4);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("_pdist_forward.out: output"));
  CHECK(slots_of("aten::_pdist_forward.out") == 4);
}
