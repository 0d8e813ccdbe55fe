// Tests for reductions (include/etrt/kernels/ops/reduce.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "etrt/kernels/ops/reduce.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
}  // namespace

namespace {
using Dims = std::vector<int64_t>;
std::optional<std::span<const int64_t>> dims(const Dims& d) { return std::span<const int64_t>(d); }

/// x[a][b][c] for a [A, B, C] tensor with values i * 0.37 - 5.
std::vector<float> ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::fmod(i * 0.37, 7.0) - 3.0);
  return v;
}
}  // namespace

TEST_CASE("sum over every dim subset of a [3, 4, 5] tensor", "[kernels][reduce]") {
  KernelContext ctx;
  auto x = ramp(60);
  Tensor tx = mk(x, {3, 4, 5});
  const std::vector<Dims> cases{{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {-1, 0}, {}};
  for (const Dims& d : cases) {
    bool red[3] = {d.empty(), d.empty(), d.empty()};
    for (int64_t v : d) red[(v + 3) % 3] = true;
    std::vector<int64_t> osz;
    for (int i = 0; i < 3; ++i) osz.push_back(red[i] ? 1 : tx.size(i));
    std::vector<double> ref(60 / (red[0] ? 3 : 1) / (red[1] ? 4 : 1) / (red[2] ? 5 : 1), 0.0);
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 4; ++b)
        for (int c = 0; c < 5; ++c) {
          const int oa = red[0] ? 0 : a, ob = red[1] ? 0 : b, oc = red[2] ? 0 : c;
          ref[(oa * osz[1] + ob) * osz[2] + oc] += x[(a * 4 + b) * 5 + c];
        }
    std::vector<float> o(ref.size());
    Tensor to = mk(o, osz);  // keepdim output
    REQUIRE(sum_intlist_out<real_bool_types>(ctx, tx, dims(d), true, std::nullopt, to));
    for (size_t i = 0; i < ref.size(); ++i) CHECK(o[i] == Approx(ref[i]).margin(1e-5));
    // The same through mean with keepdim=false and a double output.
    std::vector<int64_t> osz2;
    for (int i = 0; i < 3; ++i)
      if (!red[i]) osz2.push_back(tx.size(i));
    std::vector<double> om(ref.size());
    Tensor tom = mk(om, osz2);
    REQUIRE(mean_out<float_types>(ctx, tx, dims(d), false, ScalarType::Double, tom));
    const double cnt = 60.0 / static_cast<double>(ref.size());
    for (size_t i = 0; i < ref.size(); ++i) CHECK(om[i] == Approx(ref[i] / cnt).margin(1e-6));
  }
}

TEST_CASE("sum with a channels-last input and the column path", "[kernels][reduce]") {
  KernelContext ctx;
  // logical [2, 3, 4] stored with dim order {0, 2, 1}: offset = (a * 4 + c) * 3 + b
  std::vector<double> x(24);
  for (int i = 0; i < 24; ++i) x[i] = i;
  Tensor tx = mk(x, {2, 3, 4}, ScalarType::Double, {0, 2, 1});
  std::vector<double> o(8);
  Tensor to = mk(o, {2, 4});
  const Dims d{1};
  REQUIRE(sum_intlist_out<real_bool_types>(ctx, tx, dims(d), false, std::nullopt, to));
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 4; ++c) {
      double r = 0;
      for (int b = 0; b < 3; ++b) r += x[(a * 4 + c) * 3 + b];
      CHECK(o[a * 4 + c] == r);
    }
  // Column path: reduce dim 0 of a contiguous [5, 7] int tensor into int64.
  std::vector<int32_t> xi(35);
  for (int i = 0; i < 35; ++i) xi[i] = i - 10;
  std::vector<int64_t> oi(7);
  Tensor toi = mk(oi, {7});
  const Dims d0{0};
  REQUIRE(sum_intlist_out<real_bool_types>(ctx, mk(xi, {5, 7}), dims(d0), false, ScalarType::Long, toi));
  for (int c = 0; c < 7; ++c) {
    int64_t r = 0;
    for (int a = 0; a < 5; ++a) r += xi[a * 7 + c];
    CHECK(oi[c] == r);
  }
  // Bool input counts.
  std::vector<uint8_t> b{1, 0, 1, 1};
  std::vector<int64_t> ob{0};
  Tensor tob = mk(ob, {});
  REQUIRE(sum_intlist_out<real_bool_types>(ctx, mk(b, {4}, ScalarType::Bool), std::nullopt, false, std::nullopt, tob));
  CHECK(ob[0] == 3);
}

TEST_CASE("sum of 16M floats is accurate", "[kernels][reduce]") {
  KernelContext ctx;
  const int64_t n = int64_t{1} << 24;
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  double ref = 0;
  for (auto& v : x) {
    v = u(rng);
    ref += v;
  }
  std::vector<float> o{0};
  Tensor to = mk(o, {});
  REQUIRE(sum_intlist_out<real_bool_types>(ctx, mk(x, {n}), std::nullopt, false, std::nullopt, to));
  CHECK(std::fabs(o[0] - ref) / ref < 1e-6);
  REQUIRE(mean_dtype_out<float_types>(ctx, mk(x, {4096, 4096}), std::nullopt, to));
  CHECK(std::fabs(o[0] - ref / n) / (ref / n) < 1e-6);
  // Column path over 4096 rows.
  std::vector<float> oc(4096);
  Tensor toc = mk(oc, {4096});
  const Dims d0{0};
  REQUIRE(sum_intlist_out<real_bool_types>(ctx, mk(x, {4096, 4096}), dims(d0), false, std::nullopt, toc));
  double r0 = 0;
  for (int a = 0; a < 4096; ++a) r0 += x[static_cast<size_t>(a) * 4096];
  CHECK(std::fabs(oc[0] - r0) / r0 < 1e-6);
}

TEST_CASE("sum/mean edge cases and failures", "[kernels][reduce]") {
  KernelContext ctx;
  std::vector<float> e;
  std::vector<float> o{-1};
  Tensor to = mk(o, {});
  REQUIRE(sum_intlist_out<real_bool_types>(ctx, mk(e, {0}), std::nullopt, false, std::nullopt, to));
  CHECK(o[0] == 0);
  REQUIRE(mean_out<float_types>(ctx, mk(e, {0}), std::nullopt, false, std::nullopt, to));
  CHECK(std::isnan(o[0]));
  std::vector<float> s{2.5f};
  REQUIRE(sum_intlist_out<real_bool_types>(ctx, mk(s, {}), std::nullopt, false, std::nullopt, to));
  CHECK(o[0] == 2.5f);
  std::vector<float> x(6);
  const Dims bad{2};
  auto st = sum_intlist_out<real_bool_types>(ctx, mk(x, {2, 3}), dims(bad), false, std::nullopt, to);
  REQUIRE(!st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK(st.error().what.find("out of range") != std::string::npos);
  const Dims dup{0, -2};
  st = sum_intlist_out<real_bool_types>(ctx, mk(x, {2, 3}), dims(dup), false, std::nullopt, to);
  REQUIRE(!st);
  CHECK(st.error().what.find("multiple times") != std::string::npos);
  st = sum_intlist_out<real_bool_types>(ctx, mk(x, {2, 3}), std::nullopt, false, ScalarType::Double, to);
  REQUIRE(!st);
  CHECK(st.error().what.find("does not match output dtype") != std::string::npos);
  std::vector<int64_t> oi{0};
  Tensor toi = mk(oi, {});
  st = mean_out<float_types>(ctx, mk(x, {2, 3}), std::nullopt, false, std::nullopt, toi);
  REQUIRE(!st);
  CHECK(st.error().what.find("floating") != std::string::npos);
}

TEST_CASE("amax, amin, max/min unary, NaN propagation", "[kernels][reduce]") {
  KernelContext ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x{1, 5, 3, -2, nan, 4};  // [2, 3]
  std::vector<float> o(2);
  Tensor to = mk(o, {2});
  const Dims d1{1}, d0{0}, all{};
  REQUIRE(amax_out<real_bool_types>(ctx, mk(x, {2, 3}), d1, false, to));
  CHECK(o[0] == 5);
  CHECK(std::isnan(o[1]));
  REQUIRE(amin_out<real_bool_types>(ctx, mk(x, {2, 3}), d1, false, to));
  CHECK(o[0] == 1);
  CHECK(std::isnan(o[1]));
  std::vector<float> o3(3);
  Tensor to3 = mk(o3, {1, 3});
  REQUIRE(amax_out<real_bool_types>(ctx, mk(x, {2, 3}), d0, true, to3));
  CHECK(o3[0] == 1);
  CHECK(std::isnan(o3[1]));
  CHECK(o3[2] == 4);
  std::vector<int16_t> xi{3, -7, 9, 2}, oi{0};
  Tensor toi = mk(oi, {});
  REQUIRE(amin_out<real_bool_types>(ctx, mk(xi, {2, 2}), all, false, toi));
  CHECK(oi[0] == -7);
  REQUIRE(max_unary_out<real_bool_types>(ctx, mk(xi, {2, 2}), toi));
  CHECK(oi[0] == 9);
  REQUIRE(min_unary_out<real_bool_types>(ctx, mk(xi, {2, 2}), toi));
  CHECK(oi[0] == -7);
  std::vector<int16_t> e;
  auto st = max_unary_out<real_bool_types>(ctx, mk(e, {0}), toi);
  REQUIRE(!st);
  CHECK(st.error().what.find("zero-size") != std::string::npos);
  std::vector<float> of{0};
  Tensor tof = mk(of, {});
  st = max_unary_out<real_bool_types>(ctx, mk(xi, {4}), tof);
  REQUIRE(!st);
  CHECK(st.error().what.find("must equal input dtype") != std::string::npos);
}

TEST_CASE("amax/amin on long contiguous rows (lane path)", "[kernels][reduce]") {
  KernelContext ctx;
  std::vector<float> x(2 * 100);
  for (int i = 0; i < 200; ++i) x[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  x[150] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> o(2);
  Tensor to = mk(o, {2});
  const std::vector<int64_t> d1{1};
  REQUIRE(amax_out<real_bool_types>(ctx, mk(x, {2, 100}), d1, false, to));
  float r0 = -1e9f;
  for (int i = 0; i < 100; ++i) r0 = std::max(r0, x[i]);
  CHECK(o[0] == r0);
  CHECK(std::isnan(o[1]));
  REQUIRE(amin_out<real_bool_types>(ctx, mk(x, {2, 100}), d1, false, to));
  float m0 = 1e9f;
  for (int i = 0; i < 100; ++i) m0 = std::min(m0, x[i]);
  CHECK(o[0] == m0);
  CHECK(std::isnan(o[1]));
  std::vector<int64_t> xi(97), oi{0};
  for (int i = 0; i < 97; ++i) xi[i] = (i * 13) % 97 - 40;
  Tensor toi = mk(oi, {});
  REQUIRE(max_unary_out<real_bool_types>(ctx, mk(xi, {97}), toi));
  CHECK(oi[0] == 56);
}

TEST_CASE("argmax, argmin, max.dim_max, min.dim_min", "[kernels][reduce]") {
  KernelContext ctx;
  std::vector<float> x{1, 7, 7, 3, 0, 9, 2, 0};  // [2, 4]
  std::vector<int64_t> o(2);
  Tensor to = mk(o, {2});
  REQUIRE(argmax_out<real_types>(ctx, mk(x, {2, 4}), 1, false, to));
  CHECK(o == std::vector<int64_t>{1, 1});  // first of ties
  REQUIRE(argmin_out<real_types>(ctx, mk(x, {2, 4}), -1, false, to));
  CHECK(o == std::vector<int64_t>{0, 0});
  std::vector<int64_t> o4(4);
  Tensor to4 = mk(o4, {1, 4});
  REQUIRE(argmax_out<real_types>(ctx, mk(x, {2, 4}), 0, true, to4));
  CHECK(o4 == std::vector<int64_t>{0, 1, 0, 0});
  std::vector<int64_t> o0{-1};
  Tensor to0 = mk(o0, {});
  REQUIRE(argmax_out<real_types>(ctx, mk(x, {2, 4}), std::nullopt, false, to0));
  CHECK(o0[0] == 5);
  // dim=None on a transposed layout uses the logical order: logical [4, 2] = x viewed with dim order {1, 0}.
  REQUIRE(argmax_out<real_types>(ctx, mk(x, {4, 2}, ScalarType::Float, {1, 0}), std::nullopt, false, to0));
  CHECK(o0[0] == 3);  // logical (1, 1) -> 9
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xn{1, nan, 3, nan};
  REQUIRE(argmax_out<real_types>(ctx, mk(xn, {4}), std::nullopt, false, to0));
  CHECK(o0[0] == 1);
  REQUIRE(argmin_out<real_types>(ctx, mk(xn, {4}), 0, false, to0));
  CHECK(o0[0] == 1);
  // max.dim_max
  std::vector<float> v(2);
  std::vector<int64_t> idx(2);
  Tensor tv = mk(v, {2}), ti = mk(idx, {2});
  REQUIRE(max_dim_max_out<real_bool_types>(ctx, mk(x, {2, 4}), 1, false, tv, ti));
  CHECK(v == std::vector<float>{7, 9});
  CHECK(idx == std::vector<int64_t>{1, 1});
  REQUIRE(min_dim_min_out<real_bool_types>(ctx, mk(x, {2, 4}), 1, false, tv, ti));
  CHECK(v == std::vector<float>{1, 0});
  CHECK(idx == std::vector<int64_t>{0, 0});
  std::vector<int32_t> xi{4, 2, 8};
  std::vector<int32_t> vi{0};
  Tensor tvi = mk(vi, {});
  REQUIRE(max_dim_max_out<real_bool_types>(ctx, mk(xi, {3}), 0, false, tvi, to0));
  CHECK(vi[0] == 8);
  CHECK(o0[0] == 2);
  // Failures.
  std::vector<int32_t> bad{0};
  Tensor tbad = mk(bad, {});
  auto st = argmax_out<real_types>(ctx, mk(x, {2, 4}), std::nullopt, false, tbad);
  REQUIRE(!st);
  CHECK(st.error().what.find("Long") != std::string::npos);
  st = argmax_out<real_types>(ctx, mk(x, {2, 4}), 2, false, to);
  REQUIRE(!st);
  CHECK(st.error().what.find("out of range") != std::string::npos);
  std::vector<float> e;
  std::vector<int64_t> oe(3);
  Tensor toe = mk(oe, {3});
  st = argmax_out<real_types>(ctx, mk(e, {0, 3}), 0, false, toe);
  REQUIRE(!st);
}

TEST_CASE("prod and any", "[kernels][reduce]") {
  KernelContext ctx;
  std::vector<float> x{1, 2, 3, 4, 5, 6};
  std::vector<float> o{0};
  Tensor to = mk(o, {});
  REQUIRE(prod_out<real_bool_types>(ctx, mk(x, {2, 3}), std::nullopt, to));
  CHECK(o[0] == 720);
  std::vector<int64_t> oi(2);
  Tensor toi = mk(oi, {2});
  std::vector<int32_t> xi{1, 2, 3, 4, 5, 6};
  REQUIRE(prod_int_out<real_bool_types>(ctx, mk(xi, {2, 3}), 1, false, ScalarType::Long, toi));
  CHECK(oi == std::vector<int64_t>{6, 120});
  std::vector<float> xa{0, 0, 0, 0, 0.5f, 0};  // [2, 3]
  std::vector<uint8_t> ob(3);
  Tensor tob = mk(ob, {3}, ScalarType::Bool);
  REQUIRE(any_out<real_bool_types>(ctx, mk(xa, {2, 3}), 0, false, tob));
  CHECK(ob == std::vector<uint8_t>{0, 1, 0});
  std::vector<uint8_t> o1{0};
  Tensor to1 = mk(o1, {}, ScalarType::Bool);
  REQUIRE(any_all_out<real_bool_types>(ctx, mk(xa, {2, 3}), to1));
  CHECK(o1[0] == 1);
  std::vector<uint8_t> o2(2);
  Tensor to2 = mk(o2, {2, 1}, ScalarType::Bool);
  const Dims d1{1};
  REQUIRE(any_dims_out<real_bool_types>(ctx, mk(xa, {2, 3}), dims(d1), true, to2));
  CHECK(o2 == std::vector<uint8_t>{0, 1});
  std::vector<float> e;
  REQUIRE(any_all_out<real_bool_types>(ctx, mk(e, {0}), to1));
  CHECK(o1[0] == 0);
  std::vector<float> of{0};
  Tensor tof = mk(of, {});
  auto st = any_all_out<real_bool_types>(ctx, mk(xa, {2, 3}), tof);
  REQUIRE(!st);
  CHECK(st.error().what.find("Bool or Byte") != std::string::npos);
}

TEST_CASE("var and var_mean", "[kernels][reduce]") {
  KernelContext ctx;
  std::vector<float> x{1, 2, 4, 8, 3, 3};  // [2, 3]
  std::vector<float> v(2), m(2);
  Tensor tv = mk(v, {2}), tm = mk(m, {2});
  const Dims d1{1};
  REQUIRE(var_mean_correction_out<float_types>(ctx, mk(x, {2, 3}), dims(d1), std::nullopt, false, tv, tm));
  CHECK(m[0] == Approx(7.0 / 3));
  CHECK(m[1] == Approx(14.0 / 3));
  auto var = [](std::vector<double> a, double corr) {
    double mean = 0;
    for (double t : a) mean += t;
    mean /= a.size();
    double ss = 0;
    for (double t : a) ss += (t - mean) * (t - mean);
    return ss / (a.size() - corr);
  };
  CHECK(v[0] == Approx(var({1, 2, 4}, 1)));
  CHECK(v[1] == Approx(var({8, 3, 3}, 1)));
  std::vector<double> vd{0};
  Tensor tvd = mk(vd, {});
  REQUIRE(var_correction_out<float_types>(ctx, mk(x, {2, 3}), std::nullopt, Scalar{int64_t{0}}, false, tvd));
  CHECK(vd[0] == Approx(var({1, 2, 4, 8, 3, 3}, 0)));
  std::vector<float> one{5}, o1{0};
  Tensor to1 = mk(o1, {});
  REQUIRE(var_correction_out<float_types>(ctx, mk(one, {1}), std::nullopt, std::nullopt, false, to1));
  CHECK(std::isnan(o1[0]));
  std::vector<int64_t> oi{0};
  Tensor toi = mk(oi, {});
  auto st = var_correction_out<float_types>(ctx, mk(x, {2, 3}), std::nullopt, std::nullopt, false, toi);
  REQUIRE(!st);
}

TEST_CASE("var.out: random [3, 4, 5] channels-last input, every dim subset, both corrections", "[kernels][reduce]") {
  KernelContext ctx;
  std::mt19937 g(23);
  std::normal_distribution<double> nd(1.5, 3.0);
  const int64_t A = 3, B = 4, C = 5;
  std::vector<double> logical(A * B * C);
  for (auto& v : logical) v = nd(g);
  // Stored with dim order {0, 2, 1}: logical (a, b, c) lives at (a * C + c) * B + b.
  std::vector<double> stored(logical.size());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) stored[(a * C + c) * B + b] = logical[(a * B + b) * C + c];
  Tensor x = mk(stored, {A, B, C}, ScalarType::Double, {0, 2, 1});
  const int64_t sizes[3] = {A, B, C};
  for (int mask = 1; mask < 8; ++mask)
    for (bool unbiased : {true, false}) {
      Dims d;
      for (int k = 0; k < 3; ++k)
        if (mask & (1 << k)) d.push_back(k == 1 ? -2 : k);  // one negative dim
      int64_t osz[3];
      int orank = 0;
      for (int k = 0; k < 3; ++k) osz[orank++] = (mask & (1 << k)) ? 1 : sizes[k];
      std::vector<double> o(static_cast<size_t>(osz[0] * osz[1] * osz[2]));
      Tensor to = mk(o, {osz[0], osz[1], osz[2]});
      REQUIRE(var_out<float_types>(ctx, x, dims(d), unbiased, /*keepdim=*/true, to));
      // Naive reference: for each output cell, collect the reduced elements.
      for (int64_t i = 0; i < osz[0]; ++i)
        for (int64_t j = 0; j < osz[1]; ++j)
          for (int64_t k = 0; k < osz[2]; ++k) {
            std::vector<double> vals;
            for (int64_t a = 0; a < A; ++a)
              for (int64_t b = 0; b < B; ++b)
                for (int64_t c = 0; c < C; ++c) {
                  if (!(mask & 1) && a != i) continue;
                  if (!(mask & 2) && b != j) continue;
                  if (!(mask & 4) && c != k) continue;
                  vals.push_back(logical[(a * B + b) * C + c]);
                }
            double mean = 0;
            for (double v : vals) mean += v;
            mean /= static_cast<double>(vals.size());
            double ss = 0;
            for (double v : vals) ss += (v - mean) * (v - mean);
            const double want = ss / (static_cast<double>(vals.size()) - (unbiased ? 1 : 0));
            CHECK(o[(i * osz[1] + j) * osz[2] + k] == Approx(want).epsilon(1e-12));
          }
    }
}

TEST_CASE("var.out: torch spot values, NaN, degenerate counts, errors", "[kernels][reduce]") {
  KernelContext ctx;
  // A.var.out(torch.tensor([[1., 2., 4.], [3., 7., 5.]]), [0], False, True) -> [[1.0, 6.25, 0.25]]
  // ... [-1], True -> [2.3333332538604736, 4.0]; None, True -> 4.666666507720947; None, False -> 3.8888888359069824
  std::vector<float> x{1, 2, 4, 3, 7, 5};
  std::vector<float> o3(3), o2(2), o0(1);
  Tensor to3 = mk(o3, {1, 3}), to2 = mk(o2, {2}), to0 = mk(o0, {});
  const Dims d0{0}, dm1{-1};
  REQUIRE(var_out<float_types>(ctx, mk(x, {2, 3}), dims(d0), false, true, to3));
  CHECK(o3 == std::vector<float>{1.0f, 6.25f, 0.25f});
  REQUIRE(var_out<float_types>(ctx, mk(x, {2, 3}), dims(dm1), true, false, to2));
  CHECK(o2[0] == Approx(2.3333332538604736).epsilon(1e-7));
  CHECK(o2[1] == 4.0f);
  REQUIRE(var_out<float_types>(ctx, mk(x, {2, 3}), std::nullopt, true, false, to0));
  CHECK(o0[0] == Approx(4.666666507720947).epsilon(1e-7));
  const Dims none{};  // an empty dim list reduces everything, as torch's var.out does
  REQUIRE(var_out<float_types>(ctx, mk(x, {2, 3}), dims(none), false, false, to0));
  CHECK(o0[0] == Approx(3.8888888359069824).epsilon(1e-7));
  // A.var.out(torch.tensor([[1., 2., 4.], [3., nan, 5.]]), [1], True, False) -> [2.3333332538604736, nan]
  std::vector<float> xn{1, 2, 4, 3, std::numeric_limits<float>::quiet_NaN(), 5};
  const Dims d1{1};
  REQUIRE(var_out<float_types>(ctx, mk(xn, {2, 3}), dims(d1), true, false, to2));
  CHECK(o2[0] == Approx(2.3333332538604736).epsilon(1e-7));
  CHECK(std::isnan(o2[1]));
  // torch.var(torch.tensor([2.])) -> nan (no degrees of freedom); unbiased=False -> 0
  std::vector<float> one{2};
  REQUIRE(var_out<float_types>(ctx, mk(one, {1}), std::nullopt, true, false, to0));
  CHECK(std::isnan(o0[0]));
  REQUIRE(var_out<float_types>(ctx, mk(one, {1}), std::nullopt, false, false, to0));
  CHECK(o0[0] == 0.0f);
  // torch: "std and var only support floating point and complex dtypes"
  std::vector<int64_t> xi{1, 2};
  auto st = var_out<float_types>(ctx, mk(xi, {2}), std::nullopt, true, false, to0);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("var.out: std and var only support floating point inputs, got Long"));
  const Dims bad{2};
  st = var_out<float_types>(ctx, mk(x, {2, 3}), dims(bad), true, false, to2);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("out of range"));
  st = var_out<float_types>(ctx, mk(x, {2, 3}), dims(d1), true, false, to3);  // out shape [1, 3] != [2]
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("var.out: output"));
  CHECK(slots_of("aten::var.out") == 6);
}

TEST_CASE("cumsum", "[kernels][reduce]") {
  KernelContext ctx;
  std::vector<int32_t> x{1, 2, 3, 4, 5, 6};  // [2, 3]
  std::vector<int64_t> o(6);
  Tensor to = mk(o, {2, 3});
  REQUIRE(cumsum_out<real_types>(ctx, mk(x, {2, 3}), 1, ScalarType::Long, to));
  CHECK(o == std::vector<int64_t>{1, 3, 6, 4, 9, 15});
  REQUIRE(cumsum_out<real_types>(ctx, mk(x, {2, 3}), 0, std::nullopt, to));
  CHECK(o == std::vector<int64_t>{1, 2, 3, 5, 7, 9});
  std::vector<float> xf{0.5f, 0.25f}, of(2);
  Tensor tof = mk(of, {2});
  REQUIRE(cumsum_out<real_types>(ctx, mk(xf, {2}), -1, std::nullopt, tof));
  CHECK(of == std::vector<float>{0.5f, 0.75f});
  std::vector<float> s{3}, os{0};
  Tensor tos = mk(os, {});
  REQUIRE(cumsum_out<real_types>(ctx, mk(s, {}), 0, std::nullopt, tos));
  CHECK(os[0] == 3);
  auto st = cumsum_out<real_types>(ctx, mk(xf, {2}), 1, std::nullopt, tof);
  REQUIRE(!st);
  CHECK(st.error().what.find("out of range") != std::string::npos);
}

TEST_CASE("reduce wrappers have the schema's slot counts", "[kernels][reduce]") {
  CHECK(slots_of("aten::sum.IntList_out") == 6);
  CHECK(slots_of("aten::mean.out") == 6);
  CHECK(slots_of("aten::mean.dtype_out") == 4);
  CHECK(slots_of("aten::amax.out") == 5);
  CHECK(slots_of("aten::amin.out") == 5);
  CHECK(slots_of("aten::argmax.out") == 5);
  CHECK(slots_of("aten::argmin.out") == 5);
  CHECK(slots_of("aten::max.dim_max") == 6);
  CHECK(slots_of("aten::min.dim_min") == 6);
  CHECK(slots_of("aten::max.unary_out") == 3);
  CHECK(slots_of("aten::min.unary_out") == 3);
  CHECK(slots_of("aten::prod.out") == 4);
  CHECK(slots_of("aten::prod.int_out") == 6);
  CHECK(slots_of("aten::any.out") == 5);
  CHECK(slots_of("aten::any.all_out") == 3);
  CHECK(slots_of("aten::any.dims_out") == 5);
  CHECK(slots_of("aten::var.correction_out") == 6);
  CHECK(slots_of("aten::var_mean.correction_out") == 7);
  CHECK(slots_of("aten::cumsum.out") == 5);
}
