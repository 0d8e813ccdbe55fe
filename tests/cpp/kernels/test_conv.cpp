#include <catch2/catch.hpp>

#include <random>

#include "etrt/kernels/ops/conv.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

namespace {
struct Case { int64_t N, C, H, W, O, KH, KW, s, p, d, g; bool bias; };

/// Runs one 2-D case (optionally NHWC input and output) against a naive double reference.
void run_case(const Case& c, bool nhwc) {
  KernelContext ctx;
  std::mt19937 gen(static_cast<unsigned>(c.C * 31 + c.O));
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t Cg = c.C / c.g, Og = c.O / c.g;
  std::vector<float> x(c.N * c.C * c.H * c.W), w(c.O * Cg * c.KH * c.KW), b(c.O);
  for (auto& v : x) v = dist(gen);
  for (auto& v : w) v = dist(gen);
  for (auto& v : b) v = dist(gen);
  const int64_t OH = (c.H + 2 * c.p - c.d * (c.KH - 1) - 1) / c.s + 1, OW = (c.W + 2 * c.p - c.d * (c.KW - 1) - 1) / c.s + 1;
  // x is stored in the tensor's memory order: logical accessor xl(n, ch, h, w)
  auto xl = [&](int64_t n, int64_t ch, int64_t h, int64_t ww) {
    return nhwc ? x[((n * c.H + h) * c.W + ww) * c.C + ch] : x[((n * c.C + ch) * c.H + h) * c.W + ww];
  };
  std::vector<float> o(c.N * c.O * OH * OW);
  const std::vector<uint8_t> ord = nhwc ? std::vector<uint8_t>{0, 2, 3, 1} : std::vector<uint8_t>{};
  Tensor in = mk(ScalarType::Float, {c.N, c.C, c.H, c.W}, x.data(), ord);
  Tensor wt = mk(ScalarType::Float, {c.O, Cg, c.KH, c.KW}, w.data());
  Tensor bt = mk(ScalarType::Float, {c.O}, b.data());
  Tensor out = mk(ScalarType::Float, {c.N, c.O, OH, OW}, o.data(), ord);
  const int64_t st[] = {c.s, c.s}, pd[] = {c.p, c.p}, dl[] = {c.d, c.d}, op[] = {0, 0};
  REQUIRE(convolution_out<float_types>(ctx, in, wt, c.bias ? &bt : nullptr, st, pd, dl, false, op, c.g, out));
  double err = 0;
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t oc = 0; oc < c.O; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = c.bias ? b[oc] : 0.0;
          const int64_t g = oc / Og;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < c.KH; ++kh)
              for (int64_t kw = 0; kw < c.KW; ++kw) {
                const int64_t ih = oh * c.s - c.p + kh * c.d, iw = ow * c.s - c.p + kw * c.d;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                s += double(xl(n, g * Cg + ci, ih, iw)) * w[((oc * Cg + ci) * c.KH + kh) * c.KW + kw];
              }
          const float got = nhwc ? o[((n * OH + oh) * OW + ow) * c.O + oc] : o[((n * c.O + oc) * OH + oh) * OW + ow];
          err = std::max(err, std::abs(got - s));
        }
  CHECK(err < 1e-4);
}
}  // namespace

TEST_CASE("convolution 2-D: im2col, pointwise, grouped, depthwise, NHWC", "[conv]") {
  for (bool nhwc : {false, true}) {
    run_case({1, 3, 8, 9, 4, 3, 3, 1, 1, 1, 1, true}, nhwc);
    run_case({2, 4, 7, 7, 6, 3, 2, 2, 1, 1, 2, false}, nhwc);
    run_case({1, 5, 6, 6, 7, 1, 1, 1, 0, 1, 1, true}, nhwc);
    run_case({1, 6, 9, 8, 6, 3, 3, 2, 1, 1, 6, true}, nhwc);
    run_case({1, 4, 9, 9, 8, 3, 3, 1, 2, 2, 4, false}, nhwc);
    run_case({1, 16, 20, 20, 24, 3, 3, 1, 1, 1, 1, true}, nhwc);
  }
}

TEST_CASE("convolution 1-D, double, failures", "[conv]") {
  KernelContext ctx;
  std::vector<double> x = {1, 2, 3, 4, 5}, w = {1, 0, -1}, b = {0.5}, o(3);
  Tensor in = mk(ScalarType::Double, {1, 1, 5}, x.data()), wt = mk(ScalarType::Double, {1, 1, 3}, w.data()),
         bt = mk(ScalarType::Double, {1}, b.data()), out = mk(ScalarType::Double, {1, 1, 3}, o.data());
  const int64_t s[] = {1}, p[] = {0}, d[] = {1}, op[] = {0};
  REQUIRE(convolution_out<float_types>(ctx, in, wt, &bt, s, p, d, false, op, 1, out));
  CHECK(o == std::vector<double>{-1.5, -1.5, -1.5});
  auto st = convolution_out<float_types>(ctx, in, wt, &bt, s, p, d, true, op, 1, out);
  REQUIRE(!st);
  CHECK(st.error().code == Error::NotSupported);
  CHECK_THAT(st.error().what, Catch::Contains("transposed convolution"));
  auto st2 = convolution_out<float_types>(ctx, in, wt, &bt, s, p, d, false, op, 2, out);
  REQUIRE(!st2);
  CHECK(st2.error().code == Error::InvalidArgument);
  // Half computes through float
  std::vector<Half> hx = {Half(1.f), Half(2.f), Half(3.f)}, hw = {Half(2.f)}, ho(3);
  Tensor hin = mk(ScalarType::Half, {1, 1, 3}, hx.data()), hwt = mk(ScalarType::Half, {1, 1, 1}, hw.data()),
         hout = mk(ScalarType::Half, {1, 1, 3}, ho.data());
  REQUIRE(convolution_out<float_types>(ctx, hin, hwt, nullptr, s, p, d, false, op, 1, hout));
  CHECK(static_cast<float>(ho[2]) == 6.f);
  CHECK(slots_of("aten::convolution.out") == 11);
}
