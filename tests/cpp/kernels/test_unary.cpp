// Tests for elementwise math (include/etrt/kernels/ops/unary.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "etrt/kernels/ops/unary.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
}  // namespace

namespace {
const std::vector<double> kInputs{-2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 3.7};

/// Runs a float kernel on kInputs (float and double) and compares against ref in double.
template <class K, class R>
void check_float_unary(K kernel, R ref, std::vector<double> xs = kInputs, double rtol = 1e-6) {
  KernelContext ctx;
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> xf(xs.begin(), xs.end()), of(xs.size());
  Tensor to = mk(of, {n});
  REQUIRE(kernel(ctx, mk(xf, {n}), to));
  std::vector<double> od(xs.size());
  Tensor tod = mk(od, {n});
  REQUIRE(kernel(ctx, mk(xs, {n}), tod));
  for (size_t i = 0; i < xs.size(); ++i) {
    const double r = ref(xs[i]);
    if (std::isnan(r)) {
      CHECK(std::isnan(of[i]));
      CHECK(std::isnan(od[i]));
    } else {
      CHECK(of[i] == Approx(r).epsilon(rtol).margin(1e-6));
      CHECK(od[i] == Approx(r).epsilon(1e-12).margin(1e-12));
    }
  }
}
}  // namespace

#define CALL(K) [](KernelContext& c, const Tensor& a, Tensor& o) { return K<float_types>(c, a, o); }

TEST_CASE("floating unary functions", "[kernels][unary]") {
  check_float_unary(CALL(exp_out), [](double x) { return std::exp(x); });
  check_float_unary(CALL(expm1_out), [](double x) { return std::expm1(x); });
  check_float_unary(CALL(log_out), [](double x) { return std::log(x); });
  check_float_unary(CALL(log1p_out), [](double x) { return std::log1p(x); });
  check_float_unary(CALL(log2_out), [](double x) { return std::log2(x); });
  check_float_unary(CALL(log10_out), [](double x) { return std::log10(x); });
  check_float_unary(CALL(sqrt_out), [](double x) { return std::sqrt(x); });
  check_float_unary(CALL(rsqrt_out), [](double x) { return 1 / std::sqrt(x); });
  check_float_unary(CALL(reciprocal_out), [](double x) { return 1 / x; });
  check_float_unary(CALL(sin_out), [](double x) { return std::sin(x); });
  check_float_unary(CALL(cos_out), [](double x) { return std::cos(x); });
  check_float_unary(CALL(tan_out), [](double x) { return std::tan(x); });
  check_float_unary(CALL(asin_out), [](double x) { return std::asin(x); });
  check_float_unary(CALL(acos_out), [](double x) { return std::acos(x); });
  check_float_unary(CALL(atan_out), [](double x) { return std::atan(x); });
  check_float_unary(CALL(sinh_out), [](double x) { return std::sinh(x); });
  check_float_unary(CALL(cosh_out), [](double x) { return std::cosh(x); });
  check_float_unary(CALL(tanh_out), [](double x) { return std::tanh(x); });
  check_float_unary(CALL(erf_out), [](double x) { return std::erf(x); });
  check_float_unary(CALL(sigmoid_out), [](double x) { return 1 / (1 + std::exp(-x)); });
  check_float_unary(CALL(sigmoid_out), [](double x) { return 1 / (1 + std::exp(-x)); }, {-200, -50, 0, 50, 200});
}

TEST_CASE("sigmoid: the vector body over long float tensors, special values inside it, every ISA level",
          "[kernels][unary]") {
  KernelContext ctx;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> real(-30.f, 30.f);
  std::vector<float> x(1003);
  for (float& v : x) v = real(rng);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special{inf, -inf, std::nanf(""), 100.f, -100.f, 88.5f, -88.5f, 0.f, -0.f, 1e-30f};
  std::copy(special.begin(), special.end(), x.begin() + 5);  // inside the first 16-lane block
  for (int level : {-1, 1, 0}) {
    isa::force_level = level;
    std::vector<float> o(x.size());
    Tensor to = mk(o, {static_cast<int64_t>(x.size())});
    REQUIRE(sigmoid_out<float_types>(ctx, mk(x, {static_cast<int64_t>(x.size())}), to));
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
      INFO("x = " << x[i] << ", ISA level " << level);
      if (std::isnan(want)) CHECK(std::isnan(o[i]));
      else CHECK(o[i] == Approx(want).epsilon(1e-6).margin(1e-30));
    }
  }
  isa::force_level = -1;
  // A transposed input takes the scalar form; values agree with the dense run.
  std::vector<float> a(48), ot(48), od(48);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.25f - 6.f;
  Tensor tt = mk(ot, {6, 8}), td = mk(od, {48});
  REQUIRE(sigmoid_out<float_types>(ctx, mk(a, {6, 8}, ScalarType::Float, {1, 0}), tt));
  REQUIRE(sigmoid_out<float_types>(ctx, mk(a, {48}), td));
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 8; ++c)
      CHECK(ot[static_cast<size_t>(r * 8 + c)] == Approx(od[static_cast<size_t>(c * 6 + r)]).epsilon(1e-6));
}

TEST_CASE("unary functions: int input to float output, Half, strided, NaN/inf, rank 0, empty", "[kernels][unary]") {
  KernelContext ctx;
  std::vector<int32_t> xi{0, 1, 2};
  std::vector<float> o(3);
  Tensor to = mk(o, {3});
  REQUIRE(exp_out<float_types>(ctx, mk(xi, {3}), to));
  CHECK(o[2] == Approx(std::exp(2.0)));
  std::vector<uint16_t> h{Half(0.5f).bits, Half(-1.0f).bits}, oh(2);
  Tensor toh = mk(oh, {2}, ScalarType::Half);
  REQUIRE(tanh_out<float_types>(ctx, mk(h, {2}, ScalarType::Half), toh));
  CHECK(Half::to_float(oh[0]) == Approx(std::tanh(0.5)).epsilon(1e-3));
  CHECK(Half::to_float(oh[1]) == Approx(std::tanh(-1.0)).epsilon(1e-3));
  // Transposed input layout to contiguous output.
  std::vector<float> a{1, 2, 3, 4, 5, 6}, ot(6);  // logical [2,3] stored as dim order {1,0}
  Tensor tt = mk(ot, {2, 3});
  REQUIRE(neg_out<real_types>(ctx, mk(a, {2, 3}, ScalarType::Float, {1, 0}), tt));
  CHECK(ot == std::vector<float>{-1, -3, -5, -2, -4, -6});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> sp{inf, -inf, nan}, os(3);
  Tensor tos = mk(os, {3});
  REQUIRE(exp_out<float_types>(ctx, mk(sp, {3}), tos));
  CHECK(std::isinf(os[0]));
  CHECK(os[1] == 0);
  CHECK(std::isnan(os[2]));
  std::vector<float> z{4}, oz{0};
  Tensor toz = mk(oz, {});
  REQUIRE(sqrt_out<float_types>(ctx, mk(z, {}), toz));
  CHECK(oz[0] == 2);
  std::vector<float> e;
  Tensor te = mk(e, {0, 2});
  REQUIRE(sin_out<float_types>(ctx, mk(e, {0, 2}), te));
  std::vector<int32_t> oi(3);
  Tensor toi = mk(oi, {3});
  auto s = exp_out<float_types>(ctx, mk(xi, {3}), toi);
  REQUIRE(!s);
  CHECK(s.error().what.find("unsupported dtype") != std::string::npos);
}

TEST_CASE("real unary: neg, abs, rounding, sign", "[kernels][unary]") {
  KernelContext ctx;
  std::vector<float> x{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, std::numeric_limits<float>::quiet_NaN()}, o(7);
  Tensor tx = mk(x, {7}), to = mk(o, {7});
  REQUIRE(round_out<real_types>(ctx, tx, to));
  CHECK(std::vector<float>(o.begin(), o.begin() + 6) == std::vector<float>{-2, -2, -0, 0, 2, 2});
  REQUIRE(floor_out<real_types>(ctx, tx, to));
  CHECK(std::vector<float>(o.begin(), o.begin() + 6) == std::vector<float>{-3, -2, -1, 0, 1, 2});
  REQUIRE(ceil_out<real_types>(ctx, tx, to));
  CHECK(std::vector<float>(o.begin(), o.begin() + 6) == std::vector<float>{-2, -1, -0, 1, 2, 3});
  REQUIRE(trunc_out<real_types>(ctx, tx, to));
  CHECK(std::vector<float>(o.begin(), o.begin() + 6) == std::vector<float>{-2, -1, -0, 0, 1, 2});
  REQUIRE(sign_out<real_types>(ctx, tx, to));
  CHECK(o == std::vector<float>{-1, -1, -1, 1, 1, 1, 0});
  REQUIRE(abs_out<real_types>(ctx, tx, to));
  CHECK(o[0] == 2.5f);
  CHECK(std::isnan(o[6]));
  std::vector<int8_t> i{-128, -3, 0, 5}, oi(4);
  Tensor ti = mk(i, {4}), toi = mk(oi, {4});
  REQUIRE(abs_out<real_types>(ctx, ti, toi));
  CHECK(oi == std::vector<int8_t>{-128, 3, 0, 5});
  REQUIRE(neg_out<real_types>(ctx, ti, toi));
  CHECK(oi == std::vector<int8_t>{-128, 3, 0, -5});
  REQUIRE(sign_out<real_types>(ctx, ti, toi));
  CHECK(oi == std::vector<int8_t>{-1, -1, 0, 1});
  REQUIRE(floor_out<real_types>(ctx, ti, toi));
  CHECK(oi == i);
}

TEST_CASE("logical_not, bitwise_not, isnan, isinf", "[kernels][unary]") {
  KernelContext ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x{0, 1, nan, -inf};
  std::vector<uint8_t> o(4);
  Tensor to = mk(o, {4}, ScalarType::Bool);
  REQUIRE(logical_not_out<real_bool_types>(ctx, mk(x, {4}), to));
  CHECK(o == std::vector<uint8_t>{1, 0, 0, 0});
  REQUIRE(isnan_out<real_bool_types>(ctx, mk(x, {4}), to));
  CHECK(o == std::vector<uint8_t>{0, 0, 1, 0});
  REQUIRE(isinf_out<real_bool_types>(ctx, mk(x, {4}), to));
  CHECK(o == std::vector<uint8_t>{0, 0, 0, 1});
  std::vector<int64_t> xi{1, 2, 3, 4};
  REQUIRE(isnan_out<real_bool_types>(ctx, mk(xi, {4}), to));
  CHECK(o == std::vector<uint8_t>{0, 0, 0, 0});
  std::vector<float> of(4);
  Tensor tof = mk(of, {4});
  auto s = isnan_out<real_bool_types>(ctx, mk(x, {4}), tof);
  REQUIRE(!s);
  CHECK(s.error().what.find("must be Bool") != std::string::npos);
  using IB = types<uint8_t, int8_t, int16_t, int32_t, int64_t, bool>;
  std::vector<int16_t> b{0, 5, -1}, ob(3);
  Tensor tob = mk(ob, {3});
  REQUIRE(bitwise_not_out<IB>(ctx, mk(b, {3}), tob));
  CHECK(ob == std::vector<int16_t>{-1, -6, 0});
  std::vector<uint8_t> bb{1, 0}, obb(2);
  Tensor tobb = mk(obb, {2}, ScalarType::Bool);
  REQUIRE(bitwise_not_out<IB>(ctx, mk(bb, {2}, ScalarType::Bool), tobb));
  CHECK(obb == std::vector<uint8_t>{0, 1});
}

TEST_CASE("pow", "[kernels][unary]") {
  KernelContext ctx;
  std::vector<float> x{-2, 0.5f, 3}, o(3);
  Tensor to = mk(o, {3});
  REQUIRE(pow_tensor_scalar_out<real_types>(ctx, mk(x, {3}), Scalar{2.0}, to));
  CHECK(o == std::vector<float>{4, 0.25f, 9});
  REQUIRE(pow_tensor_scalar_out<real_types>(ctx, mk(x, {3}), Scalar{3.0}, to));
  CHECK(o[0] == Approx(-8));
  CHECK(o[2] == Approx(27));
  REQUIRE(pow_tensor_scalar_out<real_types>(ctx, mk(x, {3}), Scalar{0.5}, to));
  CHECK(std::isnan(o[0]));
  CHECK(o[1] == Approx(std::sqrt(0.5)));
  std::vector<int64_t> xi{2, -3, 0}, oi(3);
  Tensor toi = mk(oi, {3});
  REQUIRE(pow_tensor_scalar_out<real_types>(ctx, mk(xi, {3}), Scalar{int64_t{3}}, toi));
  CHECK(oi == std::vector<int64_t>{8, -27, 0});
  auto s = pow_tensor_scalar_out<real_types>(ctx, mk(xi, {3}), Scalar{int64_t{-1}}, toi);
  REQUIRE(!s);
  CHECK(s.error().what.find("negative integer powers") != std::string::npos);
  std::vector<float> e{1, 2, 3};  // broadcast exponent [3] against base [2, 3]
  std::vector<float> base{2, 2, 2, 3, 3, 3}, ob(6);
  Tensor tob = mk(ob, {2, 3});
  REQUIRE(pow_tensor_tensor_out<real_types>(ctx, mk(base, {2, 3}), mk(e, {3}), tob));
  CHECK(ob == std::vector<float>{2, 4, 8, 3, 9, 27});
}

TEST_CASE("clamp and maximum/minimum", "[kernels][unary]") {
  KernelContext ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x{nan, 1, 5, 3}, o(4);
  Tensor tx = mk(x, {4}), to = mk(o, {4});
  REQUIRE(clamp_out<real_types>(ctx, tx, Scalar{int64_t{2}}, Scalar{int64_t{4}}, to));
  CHECK(std::isnan(o[0]));
  CHECK(std::vector<float>(o.begin() + 1, o.end()) == std::vector<float>{2, 4, 3});
  REQUIRE(clamp_out<real_types>(ctx, tx, std::nullopt, Scalar{2.5}, to));
  CHECK(std::vector<float>(o.begin() + 1, o.end()) == std::vector<float>{1, 2.5f, 2.5f});
  REQUIRE(clamp_out<real_types>(ctx, tx, Scalar{2.5}, std::nullopt, to));
  CHECK(std::vector<float>(o.begin() + 1, o.end()) == std::vector<float>{2.5f, 5, 3});
  auto s = clamp_out<real_types>(ctx, tx, std::nullopt, std::nullopt, to);
  REQUIRE(!s);
  CHECK(s.error().what.find("at least one") != std::string::npos);
  std::vector<float> lo{0, 2, 0, 0}, hi{10};
  Tensor tlo = mk(lo, {4}), thi = mk(hi, {1});
  REQUIRE(clamp_tensor_out<real_types>(ctx, tx, &tlo, &thi, to));
  CHECK(std::vector<float>(o.begin() + 1, o.end()) == std::vector<float>{2, 5, 3});
  REQUIRE(clamp_tensor_out<real_types>(ctx, tx, nullptr, &thi, to));
  REQUIRE(maximum_out<real_bool_types>(ctx, tx, tlo, to));
  CHECK(std::isnan(o[0]));
  CHECK(std::vector<float>(o.begin() + 1, o.end()) == std::vector<float>{2, 5, 3});
  REQUIRE(minimum_out<real_bool_types>(ctx, tx, tlo, to));
  CHECK(std::isnan(o[0]));
  CHECK(std::vector<float>(o.begin() + 1, o.end()) == std::vector<float>{1, 0, 0});
  std::vector<int32_t> a{1, 7}, b{3, 2}, oi(2);
  Tensor toi = mk(oi, {2});
  REQUIRE(maximum_out<real_bool_types>(ctx, mk(a, {2}), mk(b, {2}), toi));
  CHECK(oi == std::vector<int32_t>{3, 7});
}

TEST_CASE("remainder, fmod, floor_divide, atan2", "[kernels][unary]") {
  KernelContext ctx;
  std::vector<int64_t> a{-3, 3, 7, -7}, b{2, -2, 3, -3}, o(4);
  Tensor ta = mk(a, {4}), tb = mk(b, {4}), to = mk(o, {4});
  REQUIRE(remainder_tensor_out<real_types>(ctx, ta, tb, to));
  CHECK(o == std::vector<int64_t>{1, -1, 1, -1});
  REQUIRE(fmod_tensor_out<real_types>(ctx, ta, tb, to));
  CHECK(o == std::vector<int64_t>{-1, 1, 1, -1});
  REQUIRE(floor_divide_out<real_types>(ctx, ta, tb, to));
  CHECK(o == std::vector<int64_t>{-2, -2, 2, 2});
  REQUIRE(remainder_scalar_out<real_types>(ctx, ta, Scalar{int64_t{4}}, to));
  CHECK(o == std::vector<int64_t>{1, 3, 3, 1});
  REQUIRE(fmod_scalar_out<real_types>(ctx, ta, Scalar{int64_t{4}}, to));
  CHECK(o == std::vector<int64_t>{-3, 3, 3, -3});
  std::vector<int64_t> z{0, 1, 1, 1};
  auto s = floor_divide_out<real_types>(ctx, ta, mk(z, {4}), to);
  REQUIRE(!s);
  CHECK(s.error().what.find("division by zero") != std::string::npos);
  std::vector<float> fa{-3, 3, 5.5f, -5.5f}, fb{2, -2, 2, 0}, of(4);
  Tensor tfa = mk(fa, {4}), tfb = mk(fb, {4}), tof = mk(of, {4});
  REQUIRE(remainder_tensor_out<real_types>(ctx, tfa, tfb, tof));
  CHECK(of[0] == 1);
  CHECK(of[1] == -1);
  CHECK(of[2] == 1.5f);
  CHECK(std::isnan(of[3]));
  REQUIRE(floor_divide_out<real_types>(ctx, tfa, tfb, tof));
  CHECK(of[0] == -2);
  CHECK(of[1] == -2);
  CHECK(of[2] == 2);
  CHECK(std::isinf(of[3]));
  REQUIRE(fmod_scalar_out<real_types>(ctx, tfa, Scalar{2.0}, tof));
  CHECK(of[0] == -1);
  CHECK(of[2] == 1.5f);
  REQUIRE(atan2_out<float_types>(ctx, tfa, tfb, tof));
  for (int i = 0; i < 4; ++i) CHECK(of[i] == Approx(std::atan2(fa[i], fb[i])));
}

TEST_CASE("unary wrappers have the schema's slot counts", "[kernels][unary]") {
  for (const char* op : {"exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "neg", "abs",
                         "floor", "round", "sign", "logical_not", "bitwise_not", "isnan", "isinf", "expm1", "tan"})
    CHECK(slots_of(std::string("aten::") + op + ".out") == 3);
  CHECK(slots_of("aten::pow.Tensor_Scalar_out") == 4);
  CHECK(slots_of("aten::pow.Tensor_Tensor_out") == 4);
  CHECK(slots_of("aten::clamp.out") == 5);
  CHECK(slots_of("aten::clamp.Tensor_out") == 5);
  CHECK(slots_of("aten::maximum.out") == 4);
  CHECK(slots_of("aten::remainder.Scalar_out") == 4);
  CHECK(slots_of("aten::floor_divide.out") == 4);
  CHECK(slots_of("aten::atan2.out") == 4);
}

// ---- acosh, asinh, atanh --------------------------------------------------------------------------------------

namespace {
/// Runs `kernel` on float and double copies of `xs` and compares with `ref` evaluated in long double on the
/// values actually stored (so float rounding of the input is not counted as kernel error).
template <class K, class R>
void check_inverse_hyperbolic(K kernel, R ref, const std::vector<double>& xs) {
  KernelContext ctx;
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> xf(xs.begin(), xs.end()), of(xs.size());
  std::vector<double> od(xs.size());
  std::vector<double> xd(xs);
  Tensor tof = mk(of, {n}), tod = mk(od, {n});
  REQUIRE(kernel(ctx, mk(xf, {n}), tof));
  REQUIRE(kernel(ctx, mk(xd, {n}), tod));
  for (size_t i = 0; i < xs.size(); ++i) {
    const double rf = static_cast<double>(ref(static_cast<long double>(xf[i])));
    const double rd = static_cast<double>(ref(static_cast<long double>(xd[i])));
    CHECK(of[i] == Approx(rf).epsilon(2e-7).margin(1e-30));
    CHECK(od[i] == Approx(rd).epsilon(1e-14).margin(1e-300));
  }
}
}  // namespace

TEST_CASE("acosh, asinh, atanh: random inputs against a long double reference", "[kernels][unary]") {
  std::mt19937 g(11);
  std::vector<double> ac, as, at;
  std::uniform_real_distribution<double> big(1.0, 50.0), any(-30.0, 30.0), unit(-0.995, 0.995);
  for (int i = 0; i < 200; ++i) {
    ac.push_back(big(g));
    as.push_back(any(g));
    at.push_back(unit(g));
  }
  check_inverse_hyperbolic(CALL(acosh_out), [](long double x) { return std::log(x + std::sqrt(x * x - 1)); }, ac);
  check_inverse_hyperbolic(CALL(asinh_out), [](long double x) {
    const long double a = std::fabs(x), r = std::log(a + std::sqrt(a * a + 1));
    return x < 0 ? -r : r;
  }, as);
  check_inverse_hyperbolic(CALL(atanh_out), [](long double x) { return 0.5L * std::log((1 + x) / (1 - x)); }, at);
}

TEST_CASE("acosh, asinh, atanh: domain edges, NaN/inf, int input, Half, transposed input", "[kernels][unary]") {
  KernelContext ctx;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto run = [&](auto kernel, std::vector<float> x) {
    std::vector<float> o(x.size());
    Tensor to = mk(o, {static_cast<int64_t>(x.size())});
    REQUIRE(kernel(ctx, mk(x, {static_cast<int64_t>(x.size())}), to));
    return o;
  };
  // torch.acosh(torch.tensor([0.5, 1.0, 1.5, 10.0, -1.0, inf, nan]))
  auto a = run(CALL(acosh_out), {0.5f, 1.0f, 1.5f, 10.0f, -1.0f, inf, nan});
  CHECK(std::isnan(a[0]));
  CHECK(a[1] == 0.0f);
  CHECK(a[2] == Approx(0.9624236822128296).epsilon(1e-6));
  CHECK(a[3] == Approx(2.993222951889038).epsilon(1e-6));
  CHECK(std::isnan(a[4]));
  CHECK(a[5] == inf);
  CHECK(std::isnan(a[6]));
  // torch.asinh(torch.tensor([-0.0, -2.0, 0.5, 1e30, -inf]))
  auto s = run(CALL(asinh_out), {-0.0f, -2.0f, 0.5f, 1e30f, -inf});
  CHECK(s[0] == 0.0f);
  CHECK(std::signbit(s[0]));
  CHECK(s[1] == Approx(-1.4436354637145996).epsilon(1e-6));
  CHECK(s[2] == Approx(0.4812118411064148).epsilon(1e-6));
  CHECK(s[3] == Approx(69.77069854736328).epsilon(1e-6));
  CHECK(s[4] == -inf);
  // torch.atanh(torch.tensor([-1.0, 1.0, 0.5, -0.999, 1.5, -0.0]))
  auto t = run(CALL(atanh_out), {-1.0f, 1.0f, 0.5f, -0.999f, 1.5f, -0.0f});
  CHECK(t[0] == -inf);
  CHECK(t[1] == inf);
  CHECK(t[2] == Approx(0.5493061542510986).epsilon(1e-6));
  CHECK(t[3] == Approx(-3.8002076148986816).epsilon(1e-5));
  CHECK(std::isnan(t[4]));
  CHECK(std::signbit(t[5]));
  // torch.acosh(torch.tensor([1, 2, 3])) -> float32 [0.0, 1.316957950592041, 1.7627471685409546]
  std::vector<int64_t> xi{1, 2, 3};
  std::vector<float> oi(3);
  Tensor toi = mk(oi, {3});
  REQUIRE(acosh_out<float_types>(ctx, mk(xi, {3}), toi));
  CHECK(oi[0] == 0.0f);
  CHECK(oi[1] == Approx(1.316957950592041).epsilon(1e-6));
  CHECK(oi[2] == Approx(1.7627471685409546).epsilon(1e-6));
  // torch.atanh(torch.tensor([0.25, 0.5], dtype=torch.half)) -> [0.25537109375, 0.54931640625]
  std::vector<uint16_t> h{Half(0.25f).bits, Half(0.5f).bits}, oh(2);
  Tensor toh = mk(oh, {2}, ScalarType::Half);
  REQUIRE(atanh_out<float_types>(ctx, mk(h, {2}, ScalarType::Half), toh));
  CHECK(Half::to_float(oh[0]) == 0.25537109375f);
  CHECK(Half::to_float(oh[1]) == 0.54931640625f);
  // Transposed input: logical [2, 3] stored with dim order {1, 0}.
  std::vector<double> xt{0.1, 0.4, 0.2, 0.5, 0.3, 0.6}, ot(6);
  Tensor tot = mk(ot, {2, 3});
  REQUIRE(asinh_out<float_types>(ctx, mk(xt, {2, 3}, ScalarType::Double, {1, 0}), tot));
  const double logical[] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  for (int i = 0; i < 6; ++i) CHECK(ot[i] == Approx(std::asinh(logical[i])).epsilon(1e-15));
  // An integral output cannot hold the result.
  std::vector<int64_t> bad(3);
  Tensor tbad = mk(bad, {3});
  auto st = atanh_out<float_types>(ctx, mk(xi, {3}), tbad);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("atanh.out") && Catch::Contains("unsupported dtype Long"));
  CHECK(slots_of("aten::acosh.out") == 3);
  CHECK(slots_of("aten::asinh.out") == 3);
  CHECK(slots_of("aten::atanh.out") == 3);
}

// ---- pow.Scalar_out -------------------------------------------------------------------------------------------

TEST_CASE("pow.Scalar_out: random exponents against std::pow, transposed exponent", "[kernels][unary]") {
  KernelContext ctx;
  std::mt19937 g(5);
  std::uniform_real_distribution<double> ed(-4.0, 4.0);
  std::vector<double> e(24), o(24);
  for (auto& v : e) v = ed(g);
  Tensor to = mk(o, {4, 6});
  // Logical [4, 6] stored with dim order {1, 0}: logical (i, j) is at j * 4 + i.
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{2.75}, mk(e, {4, 6}, ScalarType::Double, {1, 0}), to));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) CHECK(o[i * 6 + j] == Approx(std::exp(e[j * 4 + i] * std::log(2.75))).epsilon(1e-13));
  std::vector<float> ef(24), of(24);
  for (auto& v : ef) v = static_cast<float>(ed(g));
  Tensor tof = mk(of, {24});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{0.6}, mk(ef, {24}), tof));
  for (int i = 0; i < 24; ++i) CHECK(of[i] == Approx(std::exp(ef[i] * std::log(0.6))).epsilon(2e-6));
  // Integer exponents with an integer base: exact integer powers.
  std::vector<int64_t> ei(10), oi(10);
  for (int i = 0; i < 10; ++i) ei[i] = i;
  Tensor toi = mk(oi, {10});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{-3}}, mk(ei, {10}), toi));
  int64_t want = 1;
  for (int i = 0; i < 10; ++i, want *= -3) CHECK(oi[i] == want);
}

TEST_CASE("pow.Scalar_out: torch's result types, integer wrap, negative powers, NaN", "[kernels][unary]") {
  KernelContext ctx;
  // torch.pow(2, torch.tensor([1, 2, -1, 0], dtype=torch.int32)) -> int32 [2, 4, 0, 1]
  std::vector<int32_t> e32{1, 2, -1, 0}, o32(4);
  Tensor to32 = mk(o32, {4});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{2}}, mk(e32, {4}), to32));
  CHECK(o32 == std::vector<int32_t>{2, 4, 0, 1});
  // torch.pow(-1, torch.tensor([1, 2, -1, -2, -3])) -> [-1, 1, -1, 1, -1]
  std::vector<int64_t> em{1, 2, -1, -2, -3}, om(5);
  Tensor tom = mk(om, {5});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{-1}}, mk(em, {5}), tom));
  CHECK(om == std::vector<int64_t>{-1, 1, -1, 1, -1});
  // torch.pow(0, torch.tensor([-1, 0, 2])) -> [0, 1, 0]
  std::vector<int64_t> ez{-1, 0, 2}, oz(3);
  Tensor toz = mk(oz, {3});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{0}}, mk(ez, {3}), toz));
  CHECK(oz == std::vector<int64_t>{0, 1, 0});
  // torch.pow(3, torch.tensor([100])) -> [-2984622845537545263];
  // torch.pow(3, torch.tensor([10], dtype=torch.int8)) -> [-87]
  std::vector<int64_t> e100{100}, o100(1);
  Tensor to100 = mk(o100, {1});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{3}}, mk(e100, {1}), to100));
  CHECK(o100[0] == -2984622845537545263LL);
  std::vector<int8_t> e8{10}, o8(1);
  Tensor to8 = mk(o8, {1});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{3}}, mk(e8, {1}), to8));
  CHECK(o8[0] == -87);
  // torch.pow(2.5, torch.tensor([1, 2, -1], dtype=torch.int32)) -> float32 [2.5, 6.25, 0.4]
  std::vector<float> of(3);
  Tensor tof = mk(of, {3});
  std::vector<int32_t> e3{1, 2, -1};
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{2.5}, mk(e3, {3}), tof));
  CHECK(of[0] == 2.5f);
  CHECK(of[1] == 6.25f);
  CHECK(of[2] == Approx(0.4).epsilon(1e-7));
  // torch.pow(2, torch.tensor([True, False])) -> int64 [2, 1]
  std::vector<uint8_t> eb{1, 0};
  std::vector<int64_t> ob(2);
  Tensor tob = mk(ob, {2});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{2}}, mk(eb, {2}, ScalarType::Bool), tob));
  CHECK(ob == std::vector<int64_t>{2, 1});
  // torch.pow(2, torch.tensor([0.5, -1.0, nan])) -> [1.4142, 0.5, nan]; torch.pow(1, nan) -> 1;
  // torch.pow(-8.0, torch.tensor([1/3])) -> nan; torch.pow(0, torch.tensor([-1.0, 0.0])) -> [inf, 1]
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> ef{0.5f, -1.0f, nan}, o3(3);
  Tensor to3 = mk(o3, {3});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{2}}, mk(ef, {3}), to3));
  CHECK(o3[0] == Approx(1.41421356).epsilon(1e-6));
  CHECK(o3[1] == 0.5f);
  CHECK(std::isnan(o3[2]));
  std::vector<float> en{nan}, on(1);
  Tensor ton = mk(on, {1});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{1}}, mk(en, {1}), ton));
  CHECK(on[0] == 1.0f);
  std::vector<float> ec{1.0f / 3};
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{-8.0}, mk(ec, {1}), ton));
  CHECK(std::isnan(on[0]));
  std::vector<float> e0{-1.0f, 0.0f}, o0(2);
  Tensor to0 = mk(o0, {2});
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{0}}, mk(e0, {2}), to0));
  CHECK(std::isinf(o0[0]));
  CHECK(o0[1] == 1.0f);
  // Half exponent: result Half.
  std::vector<uint16_t> eh{Half(3.0f).bits, Half(-2.0f).bits}, oh(2);
  Tensor toh = mk(oh, {2}, ScalarType::Half);
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{2}}, mk(eh, {2}, ScalarType::Half), toh));
  CHECK(Half::to_float(oh[0]) == 8.0f);
  CHECK(Half::to_float(oh[1]) == 0.25f);
  // An integer result may go into a float output: torch.pow(3, torch.tensor([1, 2, 3]), out=float) -> [3, 9, 27]
  std::vector<int64_t> e123{1, 2, 3};
  REQUIRE(pow_scalar_out<real_types>(ctx, Scalar{int64_t{3}}, mk(e123, {3}), tof));
  CHECK(of == std::vector<float>{3, 9, 27});
  CHECK(slots_of("aten::pow.Scalar_out") == 4);
}

TEST_CASE("pow.Scalar_out: refused casts and dtypes", "[kernels][unary]") {
  KernelContext ctx;
  std::vector<int64_t> e{1, 2, 3}, o(3);
  Tensor to = mk(o, {3});
  // torch: "result type Float can't be cast to the desired output type Long"
  auto st = pow_scalar_out<real_types>(ctx, Scalar{2.5}, mk(e, {3}), to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("result type Float can't be cast to the output dtype Long"));
  // torch: "pow" not implemented for 'Bool' (a bool base with a bool exponent)
  std::vector<uint8_t> eb{1, 0}, ob(2);
  Tensor tob = mk(ob, {2}, ScalarType::Bool);
  st = pow_scalar_out<real_types>(ctx, Scalar{true}, mk(eb, {2}, ScalarType::Bool), tob);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("result type Bool"));
  // The output shape must follow the exponent's.
  std::vector<int64_t> o2(2);
  Tensor to2 = mk(o2, {2});
  st = pow_scalar_out<real_types>(ctx, Scalar{int64_t{2}}, mk(e, {3}), to2);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("pow.Scalar_out: output shape [3]"));
}
