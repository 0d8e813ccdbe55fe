// Tests for elementwise math (include/etrt/kernels/ops/unary.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
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
