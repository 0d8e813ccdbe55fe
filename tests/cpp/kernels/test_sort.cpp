#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "etrt/kernels/ops/sort.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// True when a ranks strictly before b for topk: NaN above every number.
bool ranks_before(double a, double b, bool largest) {
  if (largest) return (std::isnan(a) && !std::isnan(b)) || a > b;
  return (!std::isnan(a) && std::isnan(b)) || a < b;
}

/// Naive topk of one line by repeated selection of the best remaining entry (the first one on ties).
void ref_topk(const std::vector<double>& line, int64_t k, bool largest, std::vector<double>& vals,
              std::vector<int64_t>& idx) {
  std::vector<bool> used(line.size(), false);
  vals.clear();
  idx.clear();
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (size_t i = 0; i < line.size(); ++i)
      if (!used[i] && (best < 0 || ranks_before(line[i], line[static_cast<size_t>(best)], largest)))
        best = static_cast<int64_t>(i);
    used[static_cast<size_t>(best)] = true;
    vals.push_back(line[static_cast<size_t>(best)]);
    idx.push_back(best);
  }
}

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

/// Runs topk on a row-major [rows, n] tensor along dim 1 (or [n, rows] along dim 0) and compares each line with
/// ref_topk: with distinct values the result is unique, so values and indices must match exactly when sorted, and
/// as sets when not.
template <class T>
void check_random_lines(std::mt19937& g, int64_t rows, int64_t n, int64_t k, bool along_last, bool largest,
                        bool sorted) {
  KernelContext ctx;
  std::vector<T> x(static_cast<size_t>(rows * n));
  std::vector<double> xd(x.size());
  // Distinct values (a shuffled ramp), with the dtype's exact representation kept in xd.
  std::vector<int64_t> perm(x.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::shuffle(perm.begin(), perm.end(), g);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<T>(static_cast<float>(perm[i]) - static_cast<float>(x.size() / 2));
    xd[i] = static_cast<double>(static_cast<float>(x[i]));
  }
  const std::vector<int64_t> in_sizes = along_last ? std::vector<int64_t>{rows, n} : std::vector<int64_t>{n, rows};
  const std::vector<int64_t> out_sizes = along_last ? std::vector<int64_t>{rows, k} : std::vector<int64_t>{k, rows};
  Tensor in = mk(dtype_of<T>, in_sizes, x.data());
  std::vector<T> vo(static_cast<size_t>(rows * k));
  std::vector<int64_t> io(vo.size());
  Tensor tv = mk(dtype_of<T>, out_sizes, vo.data()), ti = mk(ScalarType::Long, out_sizes, io.data());
  REQUIRE(topk_values<real_types>(ctx, in, k, along_last ? -1 : 0, largest, sorted, tv, ti));
  std::vector<double> line(static_cast<size_t>(n)), rv;
  std::vector<int64_t> ri;
  int bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j)
      line[static_cast<size_t>(j)] = xd[static_cast<size_t>(along_last ? r * n + j : j * rows + r)];
    ref_topk(line, k, largest, rv, ri);
    std::vector<std::pair<int64_t, double>> got, want;
    for (int64_t j = 0; j < k; ++j) {
      const size_t at = static_cast<size_t>(along_last ? r * k + j : j * rows + r);
      got.emplace_back(io[at], static_cast<double>(static_cast<float>(vo[at])));
      want.emplace_back(ri[static_cast<size_t>(j)], rv[static_cast<size_t>(j)]);
    }
    if (!sorted) {
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
    }
    for (int64_t j = 0; j < k; ++j) {
      const auto& [gi, gv] = got[static_cast<size_t>(j)];
      const auto& [wi, wv] = want[static_cast<size_t>(j)];
      if (gi != wi || !same_value(gv, wv)) ++bad;
    }
  }
  CHECK(bad == 0);
}
}  // namespace

TEST_CASE("topk: registered with 8 slots; random distinct values match a selection reference", "[sort]") {
  CHECK(slots_of("aten::topk.values") == 8);
  std::mt19937 g(11);
  // k <= n / 64 (3 of 200, 2 of 130) takes the partial-sort path, larger k the selection path; every dtype family.
  for (bool largest : {true, false})
    for (bool sorted : {true, false}) {
      check_random_lines<float>(g, 5, 200, 3, true, largest, sorted);
      check_random_lines<float>(g, 5, 37, 20, true, largest, sorted);
      check_random_lines<double>(g, 4, 33, 33, false, largest, sorted);
      check_random_lines<int64_t>(g, 3, 130, 2, false, largest, sorted);
      check_random_lines<int32_t>(g, 6, 17, 5, true, largest, sorted);
      check_random_lines<int8_t>(g, 2, 60, 7, true, largest, sorted);
      check_random_lines<Half>(g, 3, 50, 9, false, largest, sorted);
      check_random_lines<BFloat16>(g, 3, 40, 1, true, largest, sorted);
    }
}

TEST_CASE("topk: NaN ranks above every number and equal values come out in torch's order", "[sort]") {
  KernelContext ctx;
  std::vector<float> x = {1.f, 3.f, 3.f, NAN, 2.f, 3.f, NAN, -0.f, 0.f};
  Tensor in = mk(ScalarType::Float, {9}, x.data());
  std::vector<float> v(9);
  std::vector<int64_t> i(9);
  struct Case {
    int64_t k;
    bool largest, sorted;
    std::vector<double> values;
    std::vector<int64_t> indices;
  };
  // x = torch.tensor([1., 3., 3., nan, 2., 3., nan, -0., 0.]); torch.topk(x, k, largest=..., sorted=...)
  const std::vector<Case> cases = {
      {5, true, true, {kNaN, kNaN, 3, 3, 3}, {6, 3, 5, 2, 1}},
      {5, false, true, {0, -0., 1, 2, 3}, {8, 7, 0, 4, 5}},
      {9, false, true, {0, -0., 1, 2, 3, 3, 3, kNaN, kNaN}, {8, 7, 0, 4, 5, 1, 2, 6, 3}},
      {4, true, false, {3, kNaN, kNaN, 3}, {5, 6, 3, 2}},
      {6, false, false, {2, 0, -0., 1, 3, 3}, {4, 8, 7, 0, 5, 1}},
      {3, true, true, {kNaN, kNaN, 3}, {6, 3, 5}},
  };
  for (const Case& c : cases) {
    INFO("k " << c.k << " largest " << c.largest << " sorted " << c.sorted);
    Tensor tv = mk(ScalarType::Float, {c.k}, v.data()), ti = mk(ScalarType::Long, {c.k}, i.data());
    REQUIRE(topk_values<real_types>(ctx, in, c.k, 0, c.largest, c.sorted, tv, ti));
    CHECK(std::vector<int64_t>(i.begin(), i.begin() + c.k) == c.indices);
    for (int64_t j = 0; j < c.k; ++j) {
      CHECK(same_value(v[j], c.values[j]));
      CHECK(std::signbit(v[j]) == std::signbit(c.values[j]));  // the stored element, -0. included
    }
  }
  // Partial-sort path (k <= n / 64): j = torch.arange(130); y = ((j * 7) % 5).float(); y[j % 37 == 5] = nan
  std::vector<float> y(130);
  for (int j = 0; j < 130; ++j) y[j] = j % 37 == 5 ? NAN : static_cast<float>((j * 7) % 5);
  Tensor ty = mk(ScalarType::Float, {130}, y.data());
  Tensor tv2 = mk(ScalarType::Float, {2}, v.data()), ti2 = mk(ScalarType::Long, {2}, i.data());
  REQUIRE(topk_values<real_types>(ctx, ty, 2, -1, true, true, tv2, ti2));  // torch.topk(y, 2) -> [nan, nan], [42, 5]
  CHECK(std::isnan(v[0]));
  CHECK(std::isnan(v[1]));
  CHECK(std::vector<int64_t>(i.begin(), i.begin() + 2) == std::vector<int64_t>{42, 5});
  // torch.topk(y, 2, largest=False) -> [0, 0], [10, 0]
  REQUIRE(topk_values<real_types>(ctx, ty, 2, -1, false, true, tv2, ti2));
  CHECK(std::vector<float>(v.begin(), v.begin() + 2) == std::vector<float>{0, 0});
  CHECK(std::vector<int64_t>(i.begin(), i.begin() + 2) == std::vector<int64_t>{10, 0});
  Tensor tv5 = mk(ScalarType::Float, {5}, v.data()), ti5 = mk(ScalarType::Long, {5}, i.data());
  REQUIRE(topk_values<real_types>(ctx, ty, 5, -1, true, true, tv5, ti5));  // torch.topk(y, 5).indices
  CHECK(std::vector<int64_t>(i.begin(), i.begin() + 5) == std::vector<int64_t>{42, 5, 79, 116, 82});
  CHECK(v[4] == 4.f);
  // z = torch.tensor([[2,1,2],[2,2,0],[1,2,2],[2,0,1]], dtype=torch.int32)
  std::vector<int32_t> z = {2, 1, 2, 2, 2, 0, 1, 2, 2, 2, 0, 1};
  Tensor tz = mk(ScalarType::Int, {4, 3}, z.data());
  std::vector<int32_t> zv(9);
  Tensor tzv = mk(ScalarType::Int, {2, 3}, zv.data()), tzi = mk(ScalarType::Long, {2, 3}, i.data());
  REQUIRE(topk_values<real_types>(ctx, tz, 2, 0, true, true, tzv, tzi));  // torch.topk(z, 2, dim=0)
  CHECK(std::vector<int32_t>(zv.begin(), zv.begin() + 6) == std::vector<int32_t>{2, 2, 2, 2, 2, 2});
  CHECK(std::vector<int64_t>(i.begin(), i.begin() + 6) == std::vector<int64_t>{1, 1, 0, 3, 2, 2});
  Tensor tzv3 = mk(ScalarType::Int, {3, 3}, zv.data()), tzi3 = mk(ScalarType::Long, {3, 3}, i.data());
  // torch.topk(z, 3, dim=-2, largest=False, sorted=False)
  REQUIRE(topk_values<real_types>(ctx, tz, 3, -2, false, false, tzv3, tzi3));
  CHECK(zv == std::vector<int32_t>{1, 0, 1, 2, 1, 0, 2, 2, 2});
  CHECK(i == std::vector<int64_t>{2, 3, 3, 3, 0, 1, 0, 2, 2});
}

TEST_CASE("topk: channels-last input and outputs along the channel dim", "[sort]") {
  KernelContext ctx;
  std::mt19937 g(5);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  const int64_t N = 2, C = 7, H = 3, W = 2, K = 3;
  std::vector<float> x(static_cast<size_t>(N * C * H * W));
  for (auto& e : x) e = u(g);
  x[5] = NAN;
  const std::vector<uint8_t> cl = {0, 2, 3, 1};
  Tensor in = mk(ScalarType::Float, {N, C, H, W}, x.data(), cl);
  std::vector<float> vo(static_cast<size_t>(N * K * H * W));
  std::vector<int64_t> io(vo.size());
  Tensor tv = mk(ScalarType::Float, {N, K, H, W}, vo.data(), cl), ti = mk(ScalarType::Long, {N, K, H, W}, io.data(), cl);
  REQUIRE(topk_values<real_types>(ctx, in, K, 1, true, true, tv, ti));
  int bad = 0;
  std::vector<double> line(static_cast<size_t>(C)), rv;
  std::vector<int64_t> ri;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) {
        for (int64_t c = 0; c < C; ++c) line[c] = x[static_cast<size_t>(((n * H + h) * W + w) * C + c)];  // NHWC memory
        ref_topk(line, K, true, rv, ri);
        for (int64_t k = 0; k < K; ++k) {
          const size_t at = static_cast<size_t>(((n * H + h) * W + w) * K + k);
          if (io[at] != ri[k] || !same_value(vo[at], rv[k])) ++bad;
        }
      }
  CHECK(bad == 0);
  CHECK(std::isnan(vo[0]));  // x[5] is (n 0, h 0, w 0, c 5): NaN leads its line
  CHECK(io[0] == 5);
}

TEST_CASE("topk: rank 0, k = 0, empty lines, dynamic outputs and errors", "[sort]") {
  KernelContext ctx;
  double s = 5.0, sv = 0;
  int64_t si = 7;
  Tensor t0 = mk(ScalarType::Double, {}, &s), tv0 = mk(ScalarType::Double, {}, &sv), ti0 = mk(ScalarType::Long, {}, &si);
  // torch.topk(torch.tensor(5.), 0) -> values tensor(5.), indices tensor(0): a rank-0 input is returned whatever k
  REQUIRE(topk_values<real_types>(ctx, t0, 0, -1, true, true, tv0, ti0));
  CHECK(sv == 5.0);
  CHECK(si == 0);
  std::vector<float> x = {3, 1, 2, 4, 0, 5};
  Tensor in = mk(ScalarType::Float, {2, 3}, x.data());
  std::vector<float> v(6, -1.f);
  std::vector<int64_t> i(6, -1);
  Tensor dv = mk(ScalarType::Float, {2, 3}, v.data(), {}, ShapeDynamism::DynamicBound);
  Tensor di = mk(ScalarType::Long, {2, 3}, i.data(), {}, ShapeDynamism::DynamicBound);
  REQUIRE(topk_values<real_types>(ctx, in, 0, 1, true, true, dv, di));
  CHECK(dv.size(1) == 0);
  CHECK(di.size(1) == 0);
  CHECK(v[0] == -1.f);
  REQUIRE(topk_values<real_types>(ctx, in, 2, 1, false, true, dv, di));
  CHECK(std::vector<int64_t>(dv.sizes().begin(), dv.sizes().end()) == std::vector<int64_t>{2, 2});
  CHECK(std::vector<float>(v.begin(), v.begin() + 4) == std::vector<float>{1, 2, 0, 4});
  CHECK(std::vector<int64_t>(i.begin(), i.begin() + 4) == std::vector<int64_t>{1, 2, 1, 0});
  // torch.topk(torch.zeros(0, 3), 2, dim=1) -> shape (0, 2)
  std::vector<float> none;
  Tensor empty = mk(ScalarType::Float, {0, 3}, none.data());
  Tensor ev = mk(ScalarType::Float, {0, 2}, none.data()), ei = mk(ScalarType::Long, {0, 2}, none.data());
  REQUIRE(topk_values<real_types>(ctx, empty, 2, 1, true, true, ev, ei));

  Tensor sv2 = mk(ScalarType::Float, {2, 2}, v.data()), si2 = mk(ScalarType::Long, {2, 2}, i.data());
  auto st = topk_values<real_types>(ctx, in, 4, 1, true, true, sv2, si2);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("k = 4 is out of range for dim 1 of size 3"));
  st = topk_values<real_types>(ctx, in, -1, 1, true, true, sv2, si2);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("k = -1 is out of range"));
  st = topk_values<real_types>(ctx, in, 2, 2, true, true, sv2, si2);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("dim 2 is out of range"));
  Tensor bad_i = mk(ScalarType::Int, {2, 2}, i.data());
  st = topk_values<real_types>(ctx, in, 2, 1, true, true, sv2, bad_i);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("indices must be Long, got Int"));
  Tensor bad_v = mk(ScalarType::Double, {2, 2}, i.data());
  st = topk_values<real_types>(ctx, in, 2, 1, true, true, bad_v, si2);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("input dtype Float != output dtype Double"));
  Tensor small_v = mk(ScalarType::Float, {2, 1}, v.data());
  st = topk_values<real_types>(ctx, in, 2, 1, true, true, small_v, si2);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("topk.values: output shape [2, 2] does not match the static shape [2, 1]"));
  // torch: "topk does not support bool dtypes on CPU"
  std::vector<uint8_t> b = {1, 0};
  Tensor tb = mk(ScalarType::Bool, {2}, b.data()), tbo = mk(ScalarType::Bool, {1}, b.data());
  Tensor tbi = mk(ScalarType::Long, {1}, i.data());
  st = topk_values<real_types>(ctx, tb, 1, 0, true, true, tbo, tbi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("unsupported dtype Bool"));
}
