// Tests for elementwise arithmetic (include/etrt/kernels/ops/arithmetic.h): div with rounding modes.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "etrt/kernels/ops/arithmetic.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

/// Element-wise equality where NaN equals NaN and the sign of zero counts.
bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

std::vector<float> div_scalar(const std::vector<float>& x, Scalar other, std::optional<std::string_view> mode) {
  KernelContext ctx;
  std::vector<float> in(x), o(x.size());
  const int64_t n = static_cast<int64_t>(x.size());
  Tensor to = mk(o, {n});
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(in, {n}), other, mode, to));
  return o;
}
}  // namespace

TEST_CASE("div.Scalar_mode_out: float spot values from torch", "[kernels][arith]") {
  const std::vector<float> x{1.0f, -1.0f, 7.5f, -7.5f, 0.0f, kNan, kInf, -0.0f};
  struct Case {
    double divisor;
    std::optional<std::string_view> mode;
    std::vector<float> want;
  };
  // torch.div(torch.tensor([1.0, -1.0, 7.5, -7.5, 0.0, nan, inf, -0.0]), d, rounding_mode=m).tolist()
  const std::vector<Case> cases{
      {0.1, std::nullopt, {10.0f, -10.0f, 75.0f, -75.0f, 0.0f, kNan, kInf, -0.0f}},
      {0.1, "trunc", {10.0f, -10.0f, 75.0f, -75.0f, 0.0f, kNan, kInf, -0.0f}},
      {0.1, "floor", {9.0f, -10.0f, 74.0f, -75.0f, 0.0f, kNan, kNan, -0.0f}},
      {-2, std::nullopt, {-0.5f, 0.5f, -3.75f, 3.75f, -0.0f, kNan, -kInf, 0.0f}},
      {-2, "trunc", {-0.0f, 0.0f, -3.0f, 3.0f, -0.0f, kNan, -kInf, 0.0f}},
      {-2, "floor", {-1.0f, 0.0f, -4.0f, 3.0f, -0.0f, kNan, kNan, 0.0f}},
      {0, std::nullopt, {kInf, -kInf, kInf, -kInf, kNan, kNan, kInf, kNan}},
      {0, "trunc", {kInf, -kInf, kInf, -kInf, kNan, kNan, kInf, kNan}},
      {0, "floor", {kInf, -kInf, kInf, -kInf, kNan, kNan, kInf, kNan}},
  };
  for (const Case& c : cases) {
    const Scalar s = c.divisor == std::floor(c.divisor) ? Scalar{static_cast<int64_t>(c.divisor)} : Scalar{c.divisor};
    const auto got = div_scalar(x, s, c.mode);
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("divisor " << c.divisor << " mode " << (c.mode ? std::string(*c.mode) : "None") << " x " << x[i]);
      CHECK(same(got[i], c.want[i]));
    }
  }
}

TEST_CASE("div.Scalar_mode_out: integer and mixed-dtype spot values from torch", "[kernels][arith]") {
  KernelContext ctx;
  std::vector<int32_t> xi{7, -7, 5, -5, 0};
  std::vector<int32_t> oi(5);
  Tensor toi = mk(oi, {5});
  // torch.div(torch.tensor([7, -7, 5, -5, 0], dtype=torch.int32), 2, rounding_mode='trunc'/'floor') -> int32
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(xi, {5}), Scalar{int64_t{2}}, "trunc", toi));
  CHECK(oi == std::vector<int32_t>{3, -3, 2, -2, 0});
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(xi, {5}), Scalar{int64_t{2}}, "floor", toi));
  CHECK(oi == std::vector<int32_t>{3, -4, 2, -3, 0});
  // ... / -2.5 -> float32 trunc [-2, 2, -2, 2, -0], floor [-3, 2, -2, 2, -0]; None with 2 -> [3.5, -3.5, 2.5, -2.5, 0]
  std::vector<float> of(5);
  Tensor tof = mk(of, {5});
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(xi, {5}), Scalar{-2.5}, "trunc", tof));
  CHECK(of == std::vector<float>{-2, 2, -2, 2, 0});
  CHECK(std::signbit(of[4]));
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(xi, {5}), Scalar{-2.5}, "floor", tof));
  CHECK(of == std::vector<float>{-3, 2, -2, 2, 0});
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(xi, {5}), Scalar{int64_t{2}}, std::nullopt, tof));
  CHECK(of == std::vector<float>{3.5f, -3.5f, 2.5f, -2.5f, 0});
  // torch.div(torch.tensor([-2**31], dtype=torch.int32), -1, rounding_mode='floor') -> [-2147483648] (wraps); torch's
  // trunc traps (SIGFPE) there, where this kernel wraps the same way instead of crashing.
  std::vector<int32_t> mn{std::numeric_limits<int32_t>::min()}, omn(1);
  Tensor tomn = mk(omn, {1});
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(mn, {1}), Scalar{int64_t{-1}}, "floor", tomn));
  CHECK(omn[0] == std::numeric_limits<int32_t>::min());
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(mn, {1}), Scalar{int64_t{-1}}, "trunc", tomn));
  CHECK(omn[0] == std::numeric_limits<int32_t>::min());
  // torch.div(torch.tensor([True, False]), 2, rounding_mode='floor') -> int64 [0, 0]
  std::vector<uint8_t> xb{1, 0};
  std::vector<int64_t> ob(2, 7);
  Tensor tob = mk(ob, {2});
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(xb, {2}, ScalarType::Bool), Scalar{int64_t{2}}, "floor", tob));
  CHECK(ob == std::vector<int64_t>{0, 0});
  // torch.div(torch.tensor([1.0, 7.5], dtype=torch.half), 0.1, rounding_mode='floor'/'trunc') -> [9, 74] / [10, 75]:
  // the scalar is used as float 0.1, not rounded to half first.
  std::vector<uint16_t> h{Half(1.0f).bits, Half(7.5f).bits}, oh(2);
  Tensor toh = mk(oh, {2}, ScalarType::Half);
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(h, {2}, ScalarType::Half), Scalar{0.1}, "floor", toh));
  CHECK(Half::to_float(oh[0]) == 9.0f);
  CHECK(Half::to_float(oh[1]) == 74.0f);
  REQUIRE(div_scalar_mode_out<real_types>(ctx, mk(h, {2}, ScalarType::Half), Scalar{0.1}, "trunc", toh));
  CHECK(Half::to_float(oh[0]) == 10.0f);
  CHECK(Half::to_float(oh[1]) == 75.0f);
}

TEST_CASE("div.Scalar_mode_out: random inputs against a double reference, transposed input", "[kernels][arith]") {
  KernelContext ctx;
  std::mt19937 g(17);
  std::uniform_real_distribution<float> xd(-100.0f, 100.0f), yd(0.5f, 9.0f);
  std::uniform_int_distribution<int64_t> id(-1000, 1000);
  for (int round = 0; round < 20; ++round) {
    const float yf = (round % 2 ? -1.0f : 1.0f) * yd(g);
    std::vector<float> x(12), ot(12), of(12);
    for (auto& v : x) v = xd(g);
    // x holds logical [3, 4] in dim order {1, 0}: logical (i, j) is at j * 3 + i.
    Tensor tin = mk(x, {3, 4}, ScalarType::Float, {1, 0});
    Tensor tt = mk(ot, {3, 4}), tf = mk(of, {3, 4});
    REQUIRE(div_scalar_mode_out<real_types>(ctx, tin, Scalar{static_cast<double>(yf)}, "trunc", tt));
    REQUIRE(div_scalar_mode_out<real_types>(ctx, tin, Scalar{static_cast<double>(yf)}, "floor", tf));
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        const double q = static_cast<double>(x[j * 3 + i]) / static_cast<double>(yf);
        // trunc rounds the float quotient (torch: trunc(x / y)); floor is exact (torch's fmod-based div_floor).
        CHECK(ot[i * 4 + j] == std::trunc(static_cast<float>(q)));
        CHECK(of[i * 4 + j] == static_cast<float>(std::floor(q)));
      }
    const int64_t yi = (round % 3 == 0 ? -1 : 1) * (1 + round % 7);
    std::vector<int64_t> xi(12), oti(12), ofi(12);
    for (auto& v : xi) v = id(g);
    Tensor ti = mk(xi, {12}), toti = mk(oti, {12}), tofi = mk(ofi, {12});
    REQUIRE(div_scalar_mode_out<real_types>(ctx, ti, Scalar{yi}, "trunc", toti));
    REQUIRE(div_scalar_mode_out<real_types>(ctx, ti, Scalar{yi}, "floor", tofi));
    for (int k = 0; k < 12; ++k) {
      const long double q = static_cast<long double>(xi[k]) / static_cast<long double>(yi);
      CHECK(oti[k] == static_cast<int64_t>(std::trunc(q)));
      CHECK(ofi[k] == static_cast<int64_t>(std::floor(q)));
    }
  }
}

TEST_CASE("div.Scalar_mode_out: errors", "[kernels][arith]") {
  KernelContext ctx;
  std::vector<int32_t> xi{7, -7};
  std::vector<int32_t> oi(2);
  Tensor toi = mk(oi, {2});
  // torch raises ZeroDivisionError for integer division by zero in both rounding modes.
  for (std::string_view mode : {"trunc", "floor"}) {
    auto st = div_scalar_mode_out<real_types>(ctx, mk(xi, {2}), Scalar{int64_t{0}}, mode, toi);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().what, Catch::Contains("integer division by zero"));
  }
  // torch: "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"
  auto st = div_scalar_mode_out<real_types>(ctx, mk(xi, {2}), Scalar{int64_t{2}}, "round", toi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("rounding_mode") && Catch::Contains("'round'"));
  // A floating result cannot go into an integer output (torch: "Expected out tensor to have dtype float").
  st = div_scalar_mode_out<real_types>(ctx, mk(xi, {2}), Scalar{2.5}, "floor", toi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("result type Float can't be cast to the output dtype Int"));
  st = div_scalar_mode_out<real_types>(ctx, mk(xi, {2}), Scalar{int64_t{2}}, std::nullopt, toi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("can't be cast"));
  // Bool / Bool has no integer division kernel in torch ("div_trunc_cpu" not implemented for 'Bool').
  std::vector<uint8_t> xb{1, 0}, ob(2);
  Tensor tob = mk(ob, {2}, ScalarType::Bool);
  st = div_scalar_mode_out<real_types>(ctx, mk(xb, {2}, ScalarType::Bool), Scalar{true}, "trunc", tob);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("unsupported dtype Bool"));
  CHECK(slots_of("aten::div.Scalar_mode_out") == 5);
}

TEST_CASE("div.out_mode: torch's floor rounding and integer division by zero", "[kernels][arith]") {
  KernelContext ctx;
  // torch.div(torch.tensor([1.0, 7.5, inf]), torch.tensor([0.1, 0.1, 0.1]), rounding_mode='floor') -> [9, 74, nan]
  std::vector<float> x{1.0f, 7.5f, kInf}, y{0.1f, 0.1f, 0.1f}, o(3);
  Tensor to = mk(o, {3});
  REQUIRE(div_out_mode<real_types>(ctx, mk(x, {3}), mk(y, {3}), "floor", to));
  CHECK(o[0] == 9.0f);
  CHECK(o[1] == 74.0f);
  CHECK(std::isnan(o[2]));
  std::vector<int64_t> xi{5, -5}, yi{0, 2}, oi(2);
  Tensor toi = mk(oi, {2});
  for (std::string_view mode : {"trunc", "floor"}) {
    auto st = div_out_mode<real_types>(ctx, mk(xi, {2}), mk(yi, {2}), mode, toi);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().what, Catch::Contains("div.out_mode: integer division by zero"));
  }
  std::vector<int64_t> yok{-1, 2};
  REQUIRE(div_out_mode<real_types>(ctx, mk(xi, {2}), mk(yok, {2}), "floor", toi));
  CHECK(oi == std::vector<int64_t>{-5, -3});
  REQUIRE(div_out_mode<real_types>(ctx, mk(xi, {2}), mk(yok, {2}), "trunc", toi));
  CHECK(oi == std::vector<int64_t>{-5, -2});
  auto st = div_out_mode<real_types>(ctx, mk(xi, {2}), mk(yok, {2}), "ceil", toi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("'ceil'"));
}
