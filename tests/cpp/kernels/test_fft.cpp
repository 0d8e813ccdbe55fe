// Tests for _fft_r2c / _fft_c2r (include/etrt/kernels/ops/fft.h): NumPy's numpy.fft values for a few cases
// (computed with numpy 2.4 and pasted here), a naive O(n^2) DFT for every length 1..40 (so the radix-2 and the
// Bluestein paths both run), round trips, and the refusals.
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

#include "etrt/kernels/ops/fft.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
using cf = std::complex<float>;
using cd = std::complex<double>;
using CT = types<std::complex<float>, std::complex<double>>;
using RT = types<float, double>;

std::string message(const Status& s) { return s ? std::string() : s.error().what; }

std::vector<cd> naive_dft(const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<cd> out(n);
  for (size_t k = 0; k < n; ++k) {
    long double re = 0, im = 0;
    for (size_t t = 0; t < n; ++t) {
      const long double a = -2.0L * std::numbers::pi_v<long double> * static_cast<long double>((k * t) % n) / n;
      re += x[t] * std::cos(a);
      im += x[t] * std::sin(a);
    }
    out[k] = cd(static_cast<double>(re), static_cast<double>(im));
  }
  return out;
}
}  // namespace

TEST_CASE("_fft_r2c: numpy values (odd length, 2-D with ortho norm), onesided=False", "[kernels][fft]") {
  KernelContext ctx;
  // numpy.fft.rfft([0.5, -1.25, 2.0, 3.5, -0.75])
  std::vector<double> x{0.5, -1.25, 2.0, 3.5, -0.75};
  std::vector<cd> o(3);
  Tensor out = mk(o, {3});
  const std::vector<int64_t> d0{0};
  REQUIRE(fft_r2c_out<CT>(ctx, mk(x, {5}), d0, 0, true, out));
  const cd want[] = {{4.0, 0.0}, {-4.567627457812106, 1.3572061365862864}, {3.817627457812106, -1.1326921482964938}};
  for (int k = 0; k < 3; ++k) {
    CHECK(o[k].real() == Approx(want[k].real()).margin(1e-13));
    CHECK(o[k].imag() == Approx(want[k].imag()).margin(1e-13));
  }
  // numpy.fft.rfft2(np.arange(12.).reshape(3, 4) ** 1.5 - 4, norm="ortho"), in float32.
  std::vector<float> x2(12);
  for (int i = 0; i < 12; ++i) x2[i] = static_cast<float>(std::pow(static_cast<double>(i), 1.5) - 4);
  std::vector<cf> o2(9);
  Tensor out2 = mk(o2, {3, 3});
  const std::vector<int64_t> d01{0, 1};
  REQUIRE(fft_r2c_out<CT>(ctx, mk(x2, {3, 4}), d01, 1, true, out2));
  const cd want2[] = {{37.86124021002488, 0},   {-5.346472835619469, 6.067646605607259},
                      {-5.659206102615719, 0},  {-21.951065762004145, 16.33388219297814},
                      {0.912753195429092, -1.791441291449649}, {1.3713352208072283, -0.5572546215010173},
                      {-21.951065762004145, -16.33388219297814}, {1.9842298974071984, -0.6422307179420484},
                      {1.3713352208072283, 0.5572546215010173}};
  for (int k = 0; k < 9; ++k) {
    CHECK(o2[k].real() == Approx(want2[k].real()).margin(2e-5));
    CHECK(o2[k].imag() == Approx(want2[k].imag()).margin(2e-5));
  }
  // onesided=False (torch.fft.fft of a real tensor): the full spectrum, Hermitian.
  std::vector<cd> full(5);
  Tensor tfull = mk(full, {5});
  REQUIRE(fft_r2c_out<CT>(ctx, mk(x, {5}), d0, 2, false, tfull));
  CHECK(full[0].real() == Approx(4.0 / 5));
  CHECK(full[4].real() == Approx(want[1].real() / 5).epsilon(1e-12));
  CHECK(full[4].imag() == Approx(-want[1].imag() / 5).epsilon(1e-12));
}

TEST_CASE("_fft_r2c: every length 1..40 against a naive DFT, along a middle dim", "[kernels][fft]") {
  KernelContext ctx;
  std::mt19937 g(11);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (int64_t n = 1; n <= 40; ++n) {
    // [2, n, 3], transformed along dim 1: each of the 6 lines on its own.
    std::vector<double> x(static_cast<size_t>(2 * n * 3));
    for (auto& v : x) v = dist(g);
    const int64_t h = n / 2 + 1;
    std::vector<cd> o(static_cast<size_t>(2 * h * 3));
    Tensor out = mk(o, {2, h, 3});
    const std::vector<int64_t> d1{1};
    REQUIRE(fft_r2c_out<CT>(ctx, mk(x, {2, n, 3}), d1, 0, true, out));
    double worst = 0;
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) {
        std::vector<double> line(static_cast<size_t>(n));
        for (int64_t t = 0; t < n; ++t) line[t] = x[(b * n + t) * 3 + c];
        const auto want = naive_dft(line);
        for (int64_t k = 0; k < h; ++k) worst = std::max(worst, std::abs(o[(b * h + k) * 3 + c] - want[k]));
      }
    INFO("n = " << n);
    CHECK(worst < 1e-11 * static_cast<double>(n));
  }
}

TEST_CASE("_fft_c2r: numpy values and round trips", "[kernels][fft]") {
  KernelContext ctx;
  std::vector<cd> h{{1, 0}, {2, -1}, {-0.5, 0.25}, {0.75, 0.5}};
  const std::vector<int64_t> d0{0};
  // numpy.fft.irfft(h, n=6): reads 4 entries, ignoring the imaginary parts of h[0] and h[3].
  std::vector<double> o6(6);
  Tensor t6 = mk(o6, {6});
  REQUIRE(fft_c2r_out<RT>(ctx, mk(h, {4}), d0, 2, 6, t6));
  const double want6[] = {0.7916666666666666, 0.674839684279443, 0.4025105849101827, -0.7916666666666666,
                          -0.3191772515768494, 0.24182698238722358};
  for (int k = 0; k < 6; ++k) CHECK(o6[k] == Approx(want6[k]).epsilon(1e-12));
  // numpy.fft.irfft(h, n=7, norm="forward"): no scaling (normalization 0).
  std::vector<double> o7(7);
  Tensor t7 = mk(o7, {7});
  REQUIRE(fft_c2r_out<RT>(ctx, mk(h, {4}), d0, 0, 7, t7));
  const double want7[] = {5.5, 3.0073421092652097, 4.894749011255717, -3.2773913671155737, -3.8449019816901884,
                          -1.0025093415251942, 1.72271156981003};
  for (int k = 0; k < 7; ++k) CHECK(o7[k] == Approx(want7[k]).epsilon(1e-12));
  // Round trip of a 2-D float32 signal over both dims: irfft2(rfft2(x)) == x.
  std::mt19937 g(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t w : {9, 12}) {
    std::vector<float> x(static_cast<size_t>(5 * w)), back(x.size());
    for (auto& v : x) v = dist(g);
    std::vector<cf> spec(static_cast<size_t>(5 * (w / 2 + 1)));
    Tensor ts = mk(spec, {5, w / 2 + 1}), tb = mk(back, {5, w});
    const std::vector<int64_t> d01{0, 1};
    REQUIRE(fft_r2c_out<CT>(ctx, mk(x, {5, w}), d01, 1, true, ts));
    REQUIRE(fft_c2r_out<RT>(ctx, ts, d01, 1, w, tb));
    for (size_t i = 0; i < x.size(); ++i) CHECK(back[i] == Approx(x[i]).margin(1e-5));
  }
}

TEST_CASE("_fft_r2c / _fft_c2r refusals", "[kernels][fft]") {
  KernelContext ctx;
  std::vector<float> x(8);
  std::vector<cf> o(5);
  Tensor out = mk(o, {5});
  const std::vector<int64_t> d0{0}, none{}, d3{3}, rep{0, 0};
  CHECK_THAT(message(fft_r2c_out<CT>(ctx, mk(x, {8}), none, 0, true, out)), Catch::Contains("_fft_r2c.out: dim must not be empty"));
  CHECK_THAT(message(fft_r2c_out<CT>(ctx, mk(x, {8}), d3, 0, true, out)), Catch::Contains("out of range"));
  CHECK_THAT(message(fft_r2c_out<CT>(ctx, mk(x, {8}), rep, 0, true, out)), Catch::Contains("repeated"));
  CHECK_THAT(message(fft_r2c_out<CT>(ctx, mk(x, {8}), d0, 3, true, out)), Catch::Contains("unsupported normalization 3"));
  std::vector<cd> od(5);
  Tensor tod = mk(od, {5});
  CHECK_THAT(message(fft_r2c_out<CT>(ctx, mk(x, {8}), d0, 0, true, tod)), Catch::Contains("out must be ComplexFloat"));
  std::vector<int32_t> xi(8);
  CHECK_THAT(message(fft_r2c_out<CT>(ctx, mk(xi, {8}), d0, 0, true, out)), Catch::Contains("float32 or float64"));
  std::vector<float> r(8);
  Tensor tr = mk(r, {8});
  CHECK_THAT(message(fft_c2r_out<RT>(ctx, mk(o, {5}), d0, 0, 0, tr)), Catch::Contains("last_dim_size 0"));
  CHECK_THAT(message(fft_c2r_out<RT>(ctx, mk(o, {3}), d0, 0, 8, tr)), Catch::Contains("has 3 entries, a real output of 8 needs 5"));
  CHECK_THAT(message(fft_c2r_out<RT>(ctx, mk(x, {8}), d0, 0, 8, tr)), Catch::Contains("_fft_c2r.out: input must be complex"));
  CHECK(slots_of("aten::_fft_r2c.out") == 6);
  CHECK(slots_of("aten::_fft_c2r.out") == 6);
}
