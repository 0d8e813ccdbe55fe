// Tests for activations (include/etrt/kernels/ops/activation.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "etrt/kernels/ops/activation.h"
#include "etrt/kernels/util/vec.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
}  // namespace

namespace {
const std::vector<double> kX{-4.0, -1.5, -0.2, 0.0, 0.3, 1.2, 5.0};

template <class K, class R>
void check_act(K kernel, R ref) {
  KernelContext ctx;
  const int64_t n = static_cast<int64_t>(kX.size());
  std::vector<float> xf(kX.begin(), kX.end()), of(kX.size());
  Tensor to = mk(of, {n});
  REQUIRE(kernel(ctx, mk(xf, {n}), to));
  std::vector<double> xd = kX, od(kX.size());
  Tensor tod = mk(od, {n});
  REQUIRE(kernel(ctx, mk(xd, {n}), tod));
  for (size_t i = 0; i < kX.size(); ++i) {
    CHECK(of[i] == Approx(ref(kX[i])).epsilon(1e-6).margin(1e-6));
    CHECK(od[i] == Approx(ref(kX[i])).epsilon(1e-12).margin(1e-12));
  }
}
}  // namespace

TEST_CASE("pointwise activations against double references", "[kernels][activation]") {
  check_act([](KernelContext& c, const Tensor& a, Tensor& o) { return relu_out<real_types>(c, a, o); },
            [](double x) { return x > 0 ? x : 0.0; });
  check_act([](KernelContext& c, const Tensor& a, Tensor& o) { return gelu_out<float_types>(c, a, "none", o); },
            [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
  check_act([](KernelContext& c, const Tensor& a, Tensor& o) { return gelu_out<float_types>(c, a, "tanh", o); },
            [](double x) {
              return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
            });
  check_act([](KernelContext& c, const Tensor& a, Tensor& o) {
              return hardtanh_out<real_types>(c, a, Scalar{-1.0}, Scalar{int64_t{1}}, o);
            },
            [](double x) { return std::min(1.0, std::max(-1.0, x)); });
  check_act([](KernelContext& c, const Tensor& a, Tensor& o) {
              return leaky_relu_out<float_types>(c, a, Scalar{0.01}, o);
            },
            [](double x) { return x > 0 ? x : 0.01 * x; });
  check_act([](KernelContext& c, const Tensor& a, Tensor& o) {
              return elu_out<float_types>(c, a, Scalar{1.5}, Scalar{2.0}, Scalar{0.5}, o);
            },
            [](double x) { return x > 0 ? 2.0 * x : 1.5 * 2.0 * (std::exp(0.5 * x) - 1); });
  check_act([](KernelContext& c, const Tensor& a, Tensor& o) { return silu_out<float_types>(c, a, o); },
            [](double x) { return x / (1 + std::exp(-x)); });
  check_act([](KernelContext& c, const Tensor& a, Tensor& o) { return hardswish_out<float_types>(c, a, o); },
            [](double x) { return x * std::min(6.0, std::max(0.0, x + 3)) / 6; });
  check_act([](KernelContext& c, const Tensor& a, Tensor& o) { return hardsigmoid_out<float_types>(c, a, o); },
            [](double x) { return std::min(6.0, std::max(0.0, x + 3)) / 6; });
}

TEST_CASE("relu on ints, NaN, Half, rank 0, empty; gelu failure", "[kernels][activation]") {
  KernelContext ctx;
  std::vector<int32_t> xi{-3, 0, 4}, oi(3);
  Tensor toi = mk(oi, {3});
  REQUIRE(relu_out<real_types>(ctx, mk(xi, {3}), toi));
  CHECK(oi == std::vector<int32_t>{0, 0, 4});
  std::vector<float> xn{std::numeric_limits<float>::quiet_NaN()}, on{0};
  Tensor ton = mk(on, {});
  REQUIRE(relu_out<real_types>(ctx, mk(xn, {}), ton));
  CHECK(std::isnan(on[0]));
  std::vector<uint16_t> h{Half(-1.0f).bits, Half(2.0f).bits}, oh(2);
  Tensor toh = mk(oh, {2}, ScalarType::Half);
  REQUIRE(gelu_out<float_types>(ctx, mk(h, {2}, ScalarType::Half), "none", toh));
  CHECK(Half::to_float(oh[1]) == Approx(2.0 * 0.5 * (1 + std::erf(2.0 / std::sqrt(2.0)))).epsilon(2e-3));
  std::vector<float> e;
  Tensor te = mk(e, {0});
  REQUIRE(relu_out<real_types>(ctx, mk(e, {0}), te));
  std::vector<float> x{1}, o{0};
  Tensor to = mk(o, {1});
  auto s = gelu_out<float_types>(ctx, mk(x, {1}), "fast", to);
  REQUIRE(!s);
  CHECK(s.error().code == Error::InvalidArgument);
  CHECK(s.error().what.find("approximate") != std::string::npos);
}

TEST_CASE("logit", "[kernels][activation]") {
  KernelContext ctx;
  std::vector<float> x{0.0f, 0.25f, 0.5f, 1.0f}, o(4);
  Tensor to = mk(o, {4});
  REQUIRE(logit_out<float_types>(ctx, mk(x, {4}), std::nullopt, to));
  CHECK(std::isinf(o[0]));
  CHECK(o[1] == Approx(std::log(0.25 / 0.75)));
  CHECK(o[2] == Approx(0.0).margin(1e-7));
  REQUIRE(logit_out<float_types>(ctx, mk(x, {4}), 0.1, to));
  CHECK(o[0] == Approx(std::log(0.1 / 0.9)));
  CHECK(o[3] == Approx(std::log(0.9 / 0.1)));
}

TEST_CASE("glu", "[kernels][activation]") {
  KernelContext ctx;
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8};  // [2, 4]
  std::vector<float> o(4);
  Tensor to = mk(o, {2, 2});
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  REQUIRE(glu_out<float_types>(ctx, mk(x, {2, 4}), -1, to));
  CHECK(o[0] == Approx(1 * sig(3)));
  CHECK(o[1] == Approx(2 * sig(4)));
  CHECK(o[2] == Approx(5 * sig(7)));
  CHECK(o[3] == Approx(6 * sig(8)));
  std::vector<double> o0(4);
  std::vector<double> xd(x.begin(), x.end());
  Tensor t0 = mk(o0, {1, 4});
  REQUIRE(glu_out<float_types>(ctx, mk(xd, {2, 4}), 0, t0));
  CHECK(o0[0] == Approx(1 * sig(5)));
  CHECK(o0[3] == Approx(4 * sig(8)));
  std::vector<float> odd(3);
  Tensor tbad = mk(odd, {3});
  auto s = glu_out<float_types>(ctx, mk(x, {2, 4}), 2, tbad);
  REQUIRE(!s);
  CHECK(s.error().what.find("out of range") != std::string::npos);
  std::vector<float> x3{1, 2, 3};
  s = glu_out<float_types>(ctx, mk(x3, {3}), 0, tbad);
  REQUIRE(!s);
  CHECK(s.error().what.find("even") != std::string::npos);
}

TEST_CASE("activation wrappers have the schema's slot counts", "[kernels][activation]") {
  CHECK(slots_of("aten::relu.out") == 3);
  CHECK(slots_of("aten::gelu.out") == 4);
  CHECK(slots_of("aten::hardtanh.out") == 5);
  CHECK(slots_of("aten::leaky_relu.out") == 4);
  CHECK(slots_of("aten::elu.out") == 6);
  CHECK(slots_of("aten::glu.out") == 4);
  CHECK(slots_of("aten::silu.out") == 3);
  CHECK(slots_of("aten::hardswish.out") == 3);
  CHECK(slots_of("aten::hardsigmoid.out") == 3);
  CHECK(slots_of("aten::logit.out") == 4);
}

TEST_CASE("vec::erf stays within 2.5 ulp of erf over [-6, 6]; float gelu uses it, vectorized and scalar alike",
          "[kernels][activation][fast_math]") {
  // Every float in [-6, 6] is too many for a unit test; one in 61 of them, plus the powers of two down to the
  // subnormals and the two regions' boundary (0.875) and saturation point (3.95) with their neighbours.
  std::vector<float> xs;
  for (float x = -6.f; x <= 6.f; x = std::nextafter(x, 7.f)) {
    xs.push_back(x);
    for (int i = 0; i < 60 && x <= 6.f; ++i) x = std::nextafter(x, 7.f);
  }
  for (float p = 1.f; p > 0.f; p /= 2) xs.insert(xs.end(), {p, -p});
  for (float edge : {0.875f, 3.95f})
    for (float e : {std::nextafter(edge, 0.f), edge, std::nextafter(edge, 5.f)}) xs.insert(xs.end(), {e, -e});
  double worst = 0;
  float at = 0;
  for (float x : xs) {
    const double want = std::erf(static_cast<double>(x));
    const double ulp = std::nextafter(static_cast<float>(std::abs(want)), 2.f) - static_cast<float>(std::abs(want));
    float got;
    vec::erf(got, x);
    const double err = std::abs(static_cast<double>(got) - want) / (ulp > 0 ? ulp : 1e-45);
    if (err > worst) worst = err, at = x;
  }
  INFO("worst at x = " << at);
  CHECK(worst <= 2.5);
  const auto erf = [](float x) {
    float y;
    vec::erf(y, x);
    return y;
  };
  CHECK(std::isnan(erf(std::numeric_limits<float>::quiet_NaN())));
  CHECK(erf(std::numeric_limits<float>::infinity()) == 1.f);
  CHECK(erf(-std::numeric_limits<float>::infinity()) == -1.f);
  CHECK(erf(-0.f) == 0.f);
  // gelu.out on float goes through it: the same value as the scalar form, element for element (1000 elements:
  // 62 blocks of 16 and a tail of 8).
  KernelContext ctx;
  std::vector<float> in(1000), want(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = -8.f + 0.016f * static_cast<float>(i);
  for (size_t i = 0; i < in.size(); ++i) vec::gelu_erf(want[i], in[i]);
  std::vector<float> out(in.size());
  Tensor a = mk(in, {1000}), o = mk(out, {1000});
  REQUIRE(gelu_out<float_types>(ctx, a, "none", o));
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("x = " << in[i]);
    CHECK(o.data_as<float>()[i] == want[i]);
    CHECK(std::abs(o.data_as<float>()[i] - 0.5 * in[i] * std::erfc(-in[i] / std::sqrt(2.0))) < 2e-7 * (1 + std::abs(in[i])));
  }
}
