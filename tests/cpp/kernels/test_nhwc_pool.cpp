// NHWC max and average pooling (kernels/util/nhwc_pool.h), the XNNPACK delegate's MaxPooling2d and AvgPooling2d:
// windows against a direct reference over strides, dilations, asymmetric padding, channel counts off the vector
// width, and NaN.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "etrt/kernels/util/nhwc_pool.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using etrt::ktest::each_level;

namespace {
struct MaxCase {
  int64_t n, h, w, c, k, s, d, pt, pl, pb, pr;
};
nhwc::Geometry max_geometry(const MaxCase& t) {
  nhwc::Geometry g;
  g.N = t.n, g.H = t.h, g.W = t.w, g.C = t.c, g.O = t.c, g.KH = g.KW = t.k, g.sh = g.sw = t.s, g.dh = g.dw = t.d;
  g.pt = t.pt, g.pl = t.pl, g.pb = t.pb, g.pr = t.pr;
  g.OH = nhwc::Geometry::out_size(t.h, t.pt, t.pb, t.k, t.s, t.d);
  g.OW = nhwc::Geometry::out_size(t.w, t.pl, t.pr, t.k, t.s, t.d);
  return g;
}
}  // namespace

TEST_CASE("nhwc max pooling: windows, padding as -inf, NaN propagates", "[packed][pool]") {
  using Case = MaxCase;
  const Case cases[] = {{1, 112, 112, 64, 3, 2, 1, 1, 1, 1, 1},  // resnet's stem pool
                        {2, 7, 9, 13, 2, 2, 1, 0, 0, 0, 0},
                        {1, 8, 8, 19, 3, 1, 2, 0, 1, 2, 1},     // dilated, asymmetric
                        {1, 3, 3, 5, 2, 1, 1, 2, 2, 2, 2},      // windows entirely in the padding
                        {1, 11, 10, 9, 9, 1, 1, 0, 0, 0, 0}};   // 81 taps: more than the tap list holds
  // At every level: each runs its own register width (Note [vector lanes per level]).
  each_level([&] {
    for (const Case& t : cases) {
      const nhwc::Geometry g = max_geometry(t);
      REQUIRE(g.valid());
      std::mt19937 rng(3);
      std::uniform_real_distribution<float> u(-5, 5);
      std::vector<float> in(static_cast<size_t>(g.N * g.H * g.W * g.C));
      for (auto& v : in) v = u(rng);
      in[5] = std::nanf("");  // pixel (0, 0, 0): channel 5
      std::vector<float> out(static_cast<size_t>(g.N * g.OH * g.OW * g.C), 123.f);
      nhwc::max_pool(g, in.data(), out.data());
      INFO("H " << g.H << " C " << g.C << " k " << t.k << " s " << t.s << " d " << t.d);
      int nans = 0;
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow)
            for (int64_t c = 0; c < g.C; ++c) {
              float m = -std::numeric_limits<float>::infinity();
              bool nan = false;
              for (int64_t kh = 0; kh < t.k; ++kh)
                for (int64_t kw = 0; kw < t.k; ++kw) {
                  const int64_t ih = oh * t.s - t.pt + kh * t.d, iw = ow * t.s - t.pl + kw * t.d;
                  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                  const float x = in[((n * g.H + ih) * g.W + iw) * g.C + c];
                  nan = nan || std::isnan(x);
                  m = std::max(m, x);
                }
              const float got = out[((n * g.OH + oh) * g.OW + ow) * g.C + c];
              if (nan) {
                ++nans;
                REQUIRE(std::isnan(got));
              } else {
                REQUIRE(got == m);
              }
            }
      CHECK(nans > 0);
    }
  });
}

TEST_CASE("nhwc max pooling of bytes: the largest byte of each window, 0 for one wholly in the padding", "[byte][pool]") {
  using Case = MaxCase;
  const Case cases[] = {{1, 112, 112, 64, 3, 2, 1, 1, 1, 1, 1},  // resnet18_q8's stem pool
                        {2, 7, 9, 13, 2, 2, 1, 0, 0, 0, 0},      // channels off every vector width
                        {1, 8, 8, 77, 3, 1, 2, 0, 1, 2, 1},      // dilated, asymmetric; 77 = 64 + 13 bytes
                        {1, 3, 3, 40, 2, 1, 1, 2, 2, 2, 2},      // windows entirely in the padding
                        {1, 12, 11, 33, 8, 1, 1, 0, 0, 0, 0}};   // 64 taps: as many as the tap list holds
  each_level([&] {
    for (const Case& t : cases) {
      const nhwc::Geometry g = max_geometry(t);
      REQUIRE(g.valid());
      REQUIRE(nhwc::max_pool_bytes_fits(g));
      std::mt19937 rng(4);
      std::uniform_int_distribution<int> u(0, 255);
      std::vector<uint8_t> in(static_cast<size_t>(g.N * g.H * g.W * g.C));
      for (auto& v : in) v = static_cast<uint8_t>(u(rng));
      std::vector<uint8_t> out(static_cast<size_t>(g.N * g.OH * g.OW * g.C), 123);
      nhwc::max_pool_bytes(g, in.data(), out.data());
      INFO("H " << g.H << " C " << g.C << " k " << t.k << " s " << t.s << " d " << t.d);
      int empty = 0;
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow)
            for (int64_t c = 0; c < g.C; ++c) {
              int m = -1;  // no tap inside
              for (int64_t kh = 0; kh < t.k; ++kh)
                for (int64_t kw = 0; kw < t.k; ++kw) {
                  const int64_t ih = oh * t.s - t.pt + kh * t.d, iw = ow * t.s - t.pl + kw * t.d;
                  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                  m = std::max(m, int{in[((n * g.H + ih) * g.W + iw) * g.C + c]});
                }
              empty += m < 0;
              REQUIRE(int{out[((n * g.OH + oh) * g.OW + ow) * g.C + c]} == std::max(m, 0));
            }
      if (t.pt == 2) CHECK(empty > 0);
    }
  });
}

TEST_CASE("nhwc average pooling: the mean of the in-bounds taps, summed in window order, at every level", "[packed][pool]") {
  struct Case {
    int64_t n, h, w, c, k, s, pt, pl, pb, pr;
  };
  const Case cases[] = {{2, 4, 4, 12, 2, 2, 0, 0, 0, 0},     // xnn_cnn's pool
                        {1, 9, 7, 19, 3, 1, 1, 1, 1, 1},     // padding: edge windows count fewer taps
                        {1, 8, 9, 37, 3, 2, 0, 1, 2, 1},     // asymmetric padding, channels off the width
                        {1, 3, 3, 5, 2, 1, 2, 2, 2, 2},      // windows entirely in the padding give 0
                        {1, 5, 6, 8, 5, 1, 2, 2, 2, 2}};
  each_level([&] {
    for (const Case& t : cases) {
      nhwc::Geometry g;
      g.N = t.n, g.H = t.h, g.W = t.w, g.C = t.c, g.O = t.c, g.KH = g.KW = t.k, g.sh = g.sw = t.s, g.dh = g.dw = 1;
      g.pt = t.pt, g.pl = t.pl, g.pb = t.pb, g.pr = t.pr;
      g.OH = nhwc::Geometry::out_size(t.h, t.pt, t.pb, t.k, t.s, 1);
      g.OW = nhwc::Geometry::out_size(t.w, t.pl, t.pr, t.k, t.s, 1);
      REQUIRE(g.valid());
      std::mt19937 rng(4);
      std::uniform_real_distribution<float> u(-5, 5);
      std::vector<float> in(static_cast<size_t>(g.N * g.H * g.W * g.C));
      for (auto& v : in) v = u(rng);
      std::vector<float> out(static_cast<size_t>(g.N * g.OH * g.OW * g.C), 123.f);
      REQUIRE(nhwc::avg_pool(g, in.data(), out.data()));
      INFO("H " << g.H << " C " << g.C << " k " << t.k << " s " << t.s);
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow)
            for (int64_t c = 0; c < g.C; ++c) {
              float sum = 0.f;  // the portable avg_pool2d's float sum in the same order
              int count = 0;
              for (int64_t kh = 0; kh < t.k; ++kh)
                for (int64_t kw = 0; kw < t.k; ++kw) {
                  const int64_t ih = oh * t.s - t.pt + kh, iw = ow * t.s - t.pl + kw;
                  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                  sum += in[((n * g.H + ih) * g.W + iw) * g.C + c];
                  ++count;
                }
              REQUIRE(out[((n * g.OH + oh) * g.OW + ow) * g.C + c] == (count ? sum / static_cast<float>(count) : 0.f));
            }
    }
  });
  nhwc::Geometry big;  // 81 taps: more than the tap list holds, left to the portable kernel
  big.N = 1, big.H = big.W = 9, big.C = big.O = 4, big.KH = big.KW = 9, big.OH = big.OW = 1;
  REQUIRE(big.valid());
  std::vector<float> in(9 * 9 * 4, 1.f), out(4, 7.f);
  CHECK_FALSE(nhwc::avg_pool(big, in.data(), out.data()));
  CHECK(out[0] == 7.f);
}

TEST_CASE("nhwc global average pool: tails, long sums, NaN and infinity, against a double reference", "[nhwc][pool]") {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto [n, p, c] : {std::array<int64_t, 3>{1, 1, 1}, {2, 49, 144}, {1, 3136, 144}, {3, 5, 17}, {1, 130, 40},
                         {2, 12544, 32}}) {
    std::vector<float> in(static_cast<size_t>(n * p * c));
    for (float& v : in) v = d(rng) + 100.f;  // a large common offset: float sums over thousands would drift
    std::vector<float> out(static_cast<size_t>(n * c), -1.f);
    nhwc::global_avg_pool(in.data(), n, p, c, out.data());
    double err = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        double s = 0;
        for (int64_t q = 0; q < p; ++q) s += in[static_cast<size_t>((b * p + q) * c + ch)];
        err = std::max(err, std::abs(out[static_cast<size_t>(b * c + ch)] - s / static_cast<double>(p)));
      }
    INFO("N " << n << " P " << p << " C " << c);
    CHECK(err <= 4e-5);  // a few float ulps of 100 (7.6e-6 each)
  }
  std::vector<float> in(4 * 20, 1.f), out(20);
  in[2 * 20 + 3] = std::numeric_limits<float>::quiet_NaN();
  in[1 * 20 + 18] = std::numeric_limits<float>::infinity();
  nhwc::global_avg_pool(in.data(), 1, 4, 20, out.data());
  CHECK(std::isnan(out[3]));
  CHECK(std::isinf(out[18]));
  CHECK(out[0] == 1.f);
  std::vector<float> none(3, 0.f);
  nhwc::global_avg_pool(nullptr, 1, 0, 3, none.data());  // no pixels: 0 / 0
  CHECK(std::isnan(none[0]));
}
