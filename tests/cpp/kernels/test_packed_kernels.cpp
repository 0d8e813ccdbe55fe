// The packed-filter kernels the XNNPACK delegate runs on (kernels/util/packed_gemm.h, nhwc_conv.h), on every
// micro-kernel level, against double-precision references: row remainders, K over one block, N off the panel width,
// bias and clamp, and convolutions with groups, strides, dilations, asymmetric padding and channel multipliers; the
// Winograd convolutions F(2x2, 3x3) and F(4x4, 3x3) against the same reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "etrt/kernels/util/nhwc_conv.h"
#include "etrt/kernels/util/packed_gemm.h"
#include "etrt/kernels/util/sigmoid.h"
#include "etrt/kernels/util/vec.h"
#include "etrt/kernels/util/winograd.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using etrt::ktest::each_level;
using etrt::ktest::random_floats;

namespace {

double clamp_ref(double v, float lo, float hi) { return std::min<double>(std::max<double>(v, lo), hi); }

/// NHWC convolution in double: filter OHWI [O, KH, KW, C / groups].
std::vector<double> conv_ref(const nhwc::Geometry& g, int64_t groups, const std::vector<float>& in,
                             const std::vector<float>& w, const float* bias) {
  const int64_t cg = g.C / groups, og = g.O / groups;
  std::vector<double> out(static_cast<size_t>(g.N * g.OH * g.OW * g.O));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow)
        for (int64_t o = 0; o < g.O; ++o) {
          const int64_t grp = o / og;
          double s = bias ? bias[o] : 0.0;
          for (int64_t kh = 0; kh < g.KH; ++kh)
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              const int64_t ih = oh * g.sh - g.pt + kh * g.dh, iw = ow * g.sw - g.pl + kw * g.dw;
              if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
              for (int64_t c = 0; c < cg; ++c)
                s += double(in[((n * g.H + ih) * g.W + iw) * g.C + grp * cg + c]) *
                     w[((o * g.KH + kh) * g.KW + kw) * cg + c];
            }
          out[((n * g.OH + oh) * g.OW + ow) * g.O + o] = s;
        }
  return out;
}

nhwc::Geometry geometry(int64_t n, int64_t h, int64_t w, int64_t c, int64_t o, int64_t k, int64_t s, int64_t d,
                        std::array<int64_t, 4> pad /* top, left, bottom, right */) {
  nhwc::Geometry g;
  g.N = n, g.H = h, g.W = w, g.C = c, g.O = o, g.KH = k, g.KW = k, g.sh = s, g.sw = s, g.dh = d, g.dw = d;
  g.pt = pad[0], g.pl = pad[1], g.pb = pad[2], g.pr = pad[3];
  g.OH = nhwc::Geometry::out_size(h, g.pt, g.pb, k, s, d);
  g.OW = nhwc::Geometry::out_size(w, g.pl, g.pr, k, s, d);
  return g;
}

/// g with its kernel rows two input rows apart (dilation along H only, which the in-place rows allow).
nhwc::Geometry rows_dilated(nhwc::Geometry g) {
  g.dh = 2;
  g.OH = nhwc::Geometry::out_size(g.H, g.pt, g.pb, g.KH, g.sh, g.dh);
  return g;
}

}  // namespace

TEST_CASE("packed gemm: rows, K blocks, panel edges, half panels, bias and clamp match a double reference", "[packed][gemm]") {
  each_level([] {
    for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 1}, {1, 100, 300}, {5, 33, 7}, {13, 64, 600}, {150, 40, 50},
                           {300, 70, 33}, {20, 16, 9}, {17, 48, 20}, {9, 8, 5},
                           // last panels of 24 and 20 of 32 columns: AVX-512's 24-wide tiles (Note [narrow tiles])
                           {11, 24, 30}, {23, 56, 300}, {9, 52, 17}}) {
      const auto a = random_floats(static_cast<size_t>(m * k), 1), w = random_floats(static_cast<size_t>(n * k), 2);
      const auto bias = random_floats(static_cast<size_t>(n), 3);
      for (bool transposed : {false, true}) {
        // w holds B^T ([n, k], a linear layer's weight) or B ([k, n]).
        auto packed = transposed ? gemm::pack_b(w.data(), n, 1, k, n) : gemm::pack_b(w.data(), 1, k, k, n);
        REQUIRE(packed);
#ifdef ETRT_ISA_X86
        // At most 8 columns take AVX2's panels on an AVX-512 CPU (packing_level), whose half tile is 8 wide.
        CHECK(packed->level == (isa::level() >= isa::kAvx512 && n <= 8 ? 1 : isa::level()));
#endif
        gemm::Epilogue ep;
        ep.bias = bias.data();
        ep.lo = -0.5f;
        ep.hi = 2.0f;
        std::vector<float> c(static_cast<size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
        gemm::packed_gemm(m, *packed, ep, c.data(), n, gemm::MatrixRows{a.data(), k});
        double err = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = bias[j];
            for (int64_t p = 0; p < k; ++p) s += double(a[i * k + p]) * (transposed ? w[p * n + j] : w[j * k + p]);
            err = std::max(err, std::abs(c[i * n + j] - clamp_ref(s, ep.lo, ep.hi)));
          }
        INFO("m " << m << " n " << n << " k " << k << " transposed " << transposed);
        CHECK(err < 1e-4);
      }
    }
  });
}

TEST_CASE("packed gemm: a last panel runs the narrowest tile that holds its columns", "[packed][gemm]") {
  each_level([] {
    const gemm::detail::Micro<float>& mk = gemm::detail::micro_c_kernels(isa::level());
    const int64_t nr = mk.nr;
#ifdef ETRT_ISA_X86
    if (isa::level() >= isa::kAvx512) {  // 8 / 16 / 24 / 32 (Note [narrow tiles])
      for (auto [cols, width] : {std::array<int64_t, 2>{1, 8}, {8, 8}, {9, 16}, {16, 16}, {17, 24}, {24, 24}, {25, 32}})
        CHECK(mk.width(cols) == width);
      CHECK(mk.kernel(8, 20) == mk.three_quarters.full);
      CHECK(mk.kernel(3, 5) == mk.quarter.tail[3]);
      return;
    }
#endif
    CHECK(mk.width(1) == nr / 2);  // elsewhere half and whole panels only
    CHECK(mk.width(nr / 2 + 1) == nr);
    CHECK(mk.kernel(mk.mr, nr / 2) == mk.half_full);
  });
}

TEST_CASE("packed gemm: a NaN product stays NaN through the clamp; an empty K writes the clamped bias", "[packed][gemm]") {
  const std::vector<float> a{std::numeric_limits<float>::quiet_NaN(), 1.f}, w{1.f, 1.f, 2.f, 2.f};  // k 2, n 2
  auto packed = gemm::pack_b(w.data(), 1, 2, 2, 2);
  REQUIRE(packed);
  gemm::Epilogue ep;
  ep.lo = 0.f;
  ep.hi = 6.f;
  std::vector<float> c(2);
  gemm::packed_gemm(1, *packed, ep, c.data(), 2, gemm::MatrixRows{a.data(), 2});
  CHECK(std::isnan(c[0]));
  CHECK(std::isnan(c[1]));

  auto empty = gemm::pack_b(w.data(), 1, 0, 0, 2);
  REQUIRE(empty);
  const std::vector<float> bias{-3.f, 9.f};
  ep.bias = bias.data();
  gemm::packed_gemm(1, *empty, ep, c.data(), 2, gemm::MatrixRows{a.data(), 0});
  CHECK(c == std::vector<float>{0.f, 6.f});
}

TEST_CASE("nhwc convolution: groups, strides, dilation, asymmetric padding, pointwise", "[packed][conv]") {
  struct Case {
    nhwc::Geometry g;
    int64_t groups;
  };
  const Case cases[] = {
      {geometry(2, 9, 7, 3, 8, 3, 1, 1, {1, 1, 1, 1}), 1},
      {geometry(1, 12, 11, 4, 6, 3, 2, 1, {0, 0, 1, 1}), 1},   // the exporter's asymmetric "same" padding
      {geometry(1, 10, 10, 6, 9, 3, 1, 2, {2, 2, 2, 2}), 3},   // grouped, dilated
      {geometry(3, 5, 6, 40, 17, 1, 1, 1, {0, 0, 0, 0}), 1},   // pointwise: the input is A
      {geometry(1, 8, 8, 70, 33, 2, 2, 1, {0, 0, 0, 0}), 1},   // K = 280 spans two K blocks
      {geometry(3, 3, 4, 5, 7, 3, 1, 1, {3, 3, 2, 3}), 1},     // windows wholly or partly in the padding
      {geometry(2, 1, 9, 8, 12, 3, 3, 1, {1, 2, 1, 1}), 1},    // one input row, stride wider than the window
      // K blocks of 256 that cut kernel rows (K = 9 C), at image edges: the sliced gather (gather_windows)
      {geometry(1, 6, 5, 64, 20, 3, 1, 1, {1, 1, 1, 1}), 1},   // K = 576: blocks [0, 256) [256, 512) [512, 576)
      {geometry(2, 7, 6, 40, 9, 3, 2, 1, {0, 0, 1, 1}), 1},    // K = 360, stride 2, asymmetric padding
      // K <= 256 and no groups: kernel rows read in place (Note [conv rows in place]), the row ends gathered
      {geometry(2, 11, 13, 3, 32, 3, 2, 1, {1, 1, 1, 1}), 1},  // a 3-channel stem, stride 2
      {geometry(1, 9, 17, 3, 40, 7, 2, 1, {3, 3, 3, 3}), 1},   // a 7x7 stem; a narrow last panel
      {geometry(1, 10, 10, 28, 64, 3, 1, 1, {0, 1, 2, 1}), 1}, // K = 252, asymmetric padding
      {geometry(2, 8, 9, 64, 32, 1, 2, 1, {0, 0, 0, 0}), 1},   // a strided 1x1 (a downsample)
      {geometry(1, 2, 20, 5, 32, 3, 1, 1, {3, 1, 3, 1}), 1},   // output rows whose kernel rows are all padding
      {geometry(1, 6, 30, 4, 16, 3, 1, 1, {1, 1, 1, 1}), 1},   // 28 interior pixels: whole tiles, then a tail tile
      {geometry(2, 16, 16, 3, 8, 3, 1, 1, {1, 1, 1, 1}), 1},   // 8 output channels: AVX2's panels on AVX-512
      {geometry(2, 8, 8, 8, 12, 3, 2, 1, {1, 1, 1, 1}), 1},    // 3 interior pixels a row, the edges batched
      {geometry(1, 7, 40, 3, 24, 5, 1, 1, {2, 2, 2, 2}), 1},   // two edge pixels a side: 8 rows' edges a tile
      {rows_dilated(geometry(1, 9, 12, 3, 16, 3, 1, 1, {2, 1, 2, 1})), 1},  // kernel rows 2 input rows apart
      // Note [padded stem rows] (edge pixels an eighth of a row or more) with tall half tiles (<= 8 channels)
      {geometry(1, 10, 12, 3, 8, 3, 2, 1, {1, 1, 0, 0}), 1},   // stride 2: the last input column is never read
      {geometry(2, 14, 14, 3, 5, 3, 1, 1, {1, 2, 1, 0}), 1},   // 5 channels (through the tile buffer), one-sided pad
      {rows_dilated(geometry(1, 11, 9, 4, 7, 3, 1, 1, {2, 1, 2, 1})), 1},  // padded rows of a dilated window
      {geometry(1, 6, 23, 3, 6, 5, 1, 1, {2, 2, 2, 2}), 1},    // 23 pixels a row: 8 + 8 + 7
  };
  each_level([&] {
    for (const Case& t : cases) {
      const nhwc::Geometry& g = t.g;
      REQUIRE(g.valid());
      const int64_t cg = g.C / t.groups, og = g.O / t.groups, k = g.KH * g.KW * cg;
      const auto in = random_floats(static_cast<size_t>(g.N * g.H * g.W * g.C), 4);
      const auto w = random_floats(static_cast<size_t>(g.O * k), 5);
      const auto bias = random_floats(static_cast<size_t>(g.O), 6);
      std::vector<float> out(static_cast<size_t>(g.N * g.OH * g.OW * g.O), -7.f);
      gemm::Epilogue ep;
      ep.lo = 0.f;  // ReLU fused
      for (int64_t gi = 0; gi < t.groups; ++gi) {
        auto packed = gemm::pack_b(w.data() + gi * og * k, 1, k, k, og);
        REQUIRE(packed);
        gemm::Epilogue gep = ep;
        gep.bias = bias.data() + gi * og;
        nhwc::conv_group(g, in.data(), gi * cg, cg, *packed, gep, out.data(), gi * og);
      }
      const auto ref = conv_ref(g, t.groups, in, w, bias.data());
      double err = 0;
      for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::abs(out[i] - std::max(ref[i], 0.0)));
      INFO("N " << g.N << " H " << g.H << " C " << g.C << " O " << g.O << " K " << g.KH << " groups " << t.groups);
      CHECK(err < 1e-4);
    }
  });
}

TEST_CASE("nhwc depthwise convolution: multipliers, strides, padding, bias, clamp", "[packed][conv]") {
  each_level([] {
    // The 3x3 and 5x5 windows with one output per channel take the window body (Note [depthwise interior]) inside,
    // with registers' worth of channels and a tail (40 = 2 x 16 + 8), both strides, and a 9x9 input whose interior
    // is one pixel wide for 5x5 with this padding; border pixels of 48 channels end in one register at AVX-512.
    const std::array<int64_t, 7> cases[] = {{32, 1, 3, 1, 1, 13, 11}, {7, 1, 3, 2, 1, 13, 11}, {5, 3, 5, 1, 2, 13, 11},
                                            {48, 1, 3, 2, 1, 13, 11}, {40, 1, 5, 1, 1, 13, 11}, {40, 1, 5, 2, 1, 13, 11},
                                            {24, 1, 3, 1, 1, 20, 17}, {16, 1, 5, 1, 1, 5, 9},
                                            // multiplier 2: registers of outputs from half registers of inputs
                                            {16, 2, 3, 2, 1, 12, 12}, {9, 2, 3, 1, 1, 13, 11}};
    for (auto [c, mult, k, s, d, h, w] : cases) {
      const nhwc::Geometry g = geometry(2, h, w, c, c * mult, k, s, d, {1, 2, 2, 1});
      REQUIRE(g.valid());
      const auto in = random_floats(static_cast<size_t>(g.N * g.H * g.W * g.C), 7);
      const auto f = random_floats(static_cast<size_t>(g.KH * g.KW * g.O), 8);  // [1, KH, KW, O]
      const auto bias = random_floats(static_cast<size_t>(g.O), 9);
      std::vector<float> out(static_cast<size_t>(g.N * g.OH * g.OW * g.O));
      gemm::Epilogue ep;
      ep.bias = bias.data();
      ep.lo = -1.f;
      ep.hi = 1.f;
      REQUIRE(nhwc::depthwise(g, mult, in.data(), f.data(), ep, out.data()));
      // The same convolution as C groups of one input channel, filter OHWI [O, KH, KW, 1].
      std::vector<float> ohwi(f.size());
      for (int64_t o = 0; o < g.O; ++o)
        for (int64_t t = 0; t < g.KH * g.KW; ++t) ohwi[o * g.KH * g.KW + t] = f[t * g.O + o];
      const auto ref = conv_ref(g, c, in, ohwi, bias.data());
      double err = 0;
      for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::abs(out[i] - clamp_ref(ref[i], -1.f, 1.f)));
      INFO("C " << c << " multiplier " << mult << " kernel " << k << " stride " << s << " dilation " << d);
      CHECK(err < 1e-5);
    }
  });
}

TEST_CASE("nhwc depthwise: a window over the tap limit is refused, nothing written", "[packed][conv]") {
  const nhwc::Geometry g = geometry(1, 20, 20, 2, 2, 9, 1, 1, {4, 4, 4, 4});  // 81 taps
  REQUIRE(g.valid());
  std::vector<float> in(20 * 20 * 2, 1.f), f(81 * 2, 1.f), out(20 * 20 * 2, -5.f);
  CHECK_FALSE(nhwc::depthwise(g, 1, in.data(), f.data(), gemm::Epilogue{}, out.data()));
  CHECK(out[0] == -5.f);
}

namespace {
/// A block finish that doubles what it is given, so an element finished twice (or never) is off by 2x.
void double_block(const void*, float* c, int64_t rows, int64_t cols, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] *= 2.f;
}
}  // namespace

TEST_CASE("winograd: F(2x2) and F(4x4) match the direct convolution's double reference", "[packed][conv][winograd]") {
  struct Case {
    nhwc::Geometry g;
    bool bias, clamp;
  };
  const Case cases[] = {
      {geometry(1, 9, 9, 16, 16, 3, 1, 1, {1, 1, 1, 1}), true, true},     // tiles cut by the output's edge
      {geometry(2, 8, 11, 24, 40, 3, 1, 1, {0, 0, 0, 0}), true, false},   // no padding; 16 + 8 and 32 + 8 channels
      {geometry(1, 7, 6, 17, 19, 3, 1, 1, {2, 1, 0, 2}), false, true},    // asymmetric padding; scalar channel tails
      {geometry(1, 13, 12, 35, 37, 3, 1, 1, {1, 1, 1, 1}), true, true},   // 32 + 3 / 32 + 4 + 1 channels
      {geometry(1, 1, 5, 16, 20, 3, 1, 1, {1, 1, 1, 1}), true, false},    // one input row
      {geometry(3, 6, 6, 64, 64, 3, 1, 1, {1, 1, 1, 1}), true, true},     // batches, whole registers
  };
  each_level([&] {
    for (const Case& t : cases) {
      const nhwc::Geometry& g = t.g;
      REQUIRE(g.valid());
      REQUIRE(winograd::fits(g));
      const auto in = random_floats(static_cast<size_t>(g.N * g.H * g.W * g.C), 14);
      const auto w = random_floats(static_cast<size_t>(g.O * 9 * g.C), 15);
      const auto bias = random_floats(static_cast<size_t>(g.O), 16);
      gemm::Epilogue ep;
      if (t.bias) ep.bias = bias.data();
      if (t.clamp) ep.lo = -0.5f, ep.hi = 2.f;
      ep.finish = &double_block;
      const auto ref = conv_ref(g, 1, in, w, ep.bias);
      double scale = 0;
      for (double r : ref) scale = std::max(scale, std::abs(r));
      for (int m : {2, 4}) {
        const int64_t tiles = winograd::tiles(g, m);
        // Every tile in one pass, then passes of 8 tiles (the last one short where 8 does not divide them).
        for (int64_t chunk : {tiles, int64_t{8}}) {
          const winograd::Plan plan{m, chunk};
          auto f = winograd::prepare(plan, w.data(), g.C, g.O);
          REQUIRE(f);
          REQUIRE(f->u.size() == static_cast<size_t>((m + 2) * (m + 2)));
          // The scratch exactly as chunk_floats says, then guard values that must survive.
          const size_t need = winograd::chunk_floats(plan, g.C, g.O);
          std::vector<float> scratch(need + 64, 1234.5f);
          std::vector<float> out(static_cast<size_t>(g.N * g.OH * g.OW * g.O), -7.f);
          winograd::conv(g, in.data(), *f, ep, out.data(), scratch.data());
          double err = 0;
          for (size_t i = 0; i < ref.size(); ++i) {
            const double want = 2 * (t.clamp ? clamp_ref(ref[i], ep.lo, ep.hi) : ref[i]);
            err = std::max(err, std::abs(out[i] - want));
          }
          INFO("F(" << m << "x" << m << ") N " << g.N << " H " << g.H << " W " << g.W << " C " << g.C << " O "
                    << g.O << " chunk " << chunk << " max |ref| " << scale);
          // F(2x2)'s rounding is the direct product's; F(4x4) loses about a decimal digit (Note [winograd]).
          CHECK(err <= (m == 2 ? 4e-6 : 4e-5) * std::max(scale, 1.0));
          CHECK(std::all_of(scratch.begin() + static_cast<int64_t>(need), scratch.end(),
                            [](float v) { return v == 1234.5f; }));
        }
      }
    }
  });
}

TEST_CASE("winograd: a NaN in the input reaches the outputs whose window holds it", "[packed][conv][winograd]") {
  const nhwc::Geometry g = geometry(1, 16, 16, 16, 16, 3, 1, 1, {1, 1, 1, 1});
  auto in = random_floats(16 * 16 * 16, 17);
  const auto w = random_floats(16 * 9 * 16, 18);
  in[(3 * 16 + 3) * 16 + 5] = std::numeric_limits<float>::quiet_NaN();  // pixel (3, 3), channel 5
  const auto at = [](int64_t oh, int64_t ow) { return static_cast<size_t>((oh * 16 + ow) * 16); };
  for (int m : {2, 4}) {
    auto f = winograd::prepare(winograd::Plan{m, winograd::tiles(g, m)}, w.data(), 16, 16);
    REQUIRE(f);
    std::vector<float> scratch(winograd::chunk_floats(f->plan, 16, 16)), out(16 * 16 * 16);
    winograd::conv(g, in.data(), *f, gemm::Epilogue{}, out.data(), scratch.data());
    INFO("F(" << m << "x" << m << ")");
    // Outputs (2..4, 2..4) read pixel (3, 3): NaN in every channel. A transform mixes a tile's whole patch, so
    // other outputs of the same tiles may be NaN too; those of tiles whose patch misses it are not.
    for (int64_t oh = 2; oh <= 4; ++oh)
      for (int64_t ow = 2; ow <= 4; ++ow) CHECK(std::isnan(out[at(oh, ow)]));
    CHECK_FALSE(std::isnan(out[at(15, 15)]));
    CHECK_FALSE(std::isnan(out[at(0, 15)]));
    CHECK_FALSE(std::isnan(out[at(15, 0)]));
  }
}

TEST_CASE("winograd plan: where each transform is taken, its passes and scratch", "[packed][conv][winograd]") {
  const auto same = [](int64_t hw, int64_t c, int64_t o) { return geometry(1, hw, hw, c, o, 3, 1, 1, {1, 1, 1, 1}); };
  CHECK(winograd::plan(same(56, 64, 64)).m == 4);    // resnet18's first stage
  CHECK(winograd::plan(same(14, 256, 256)).m == 4);  // 16 tiles of F(4x4)
  CHECK(winograd::plan(same(7, 512, 512)).m == 2);   // 4 tiles of F(4x4) only: the filter matrices would dominate
  CHECK(winograd::plan(same(56, 16, 16)).m == 4);
  CHECK(winograd::plan(same(8, 64, 64)).m == 0);     // 2.4M multiply-adds: three parallel regions cost more
  CHECK(winograd::plan(same(56, 8, 64)).m == 0);     // too few input channels for the transforms to pay
  CHECK(winograd::plan(geometry(1, 56, 56, 64, 64, 3, 2, 1, {1, 1, 1, 1})).m == 0);  // stride 2
  CHECK(winograd::plan(geometry(1, 56, 56, 64, 64, 3, 1, 2, {2, 2, 2, 2})).m == 0);  // dilation 2
  CHECK(winograd::plan(geometry(1, 56, 56, 64, 64, 5, 1, 1, {2, 2, 2, 2})).m == 0);  // 5x5
  CHECK(winograd::plan(same(56, 64, 64), 2).m == 2);  // ETRT_WINOGRAD=2
  CHECK(winograd::plan(same(56, 64, 64), 0).m == 0);  // ETRT_WINOGRAD=0
  for (const auto& g : {same(56, 64, 64), same(28, 128, 128), same(7, 512, 512), same(112, 32, 32), same(20, 1024, 1024)}) {
    const winograd::Plan p = winograd::plan(g);
    INFO("H " << g.H << " C " << g.C << " F(" << p.m << ")");
    REQUIRE(p.active());
    const int64_t n = winograd::tiles(g, p.m), passes = (n + p.chunk - 1) / p.chunk;
    CHECK(n - (passes - 1) * p.chunk >= p.chunk - passes);  // passes of about equal size: no short rest
    CHECK(winograd::chunk_floats(p, g.C, g.O) * 4 <= static_cast<uint64_t>(winograd::kChunkBytes));
  }
}

TEST_CASE("nhwc geometry: an output size the window does not give is not valid", "[packed][conv]") {
  nhwc::Geometry g = geometry(1, 8, 8, 3, 4, 3, 1, 1, {1, 1, 1, 1});
  CHECK(g.valid());
  g.OH += 1;
  CHECK_FALSE(g.valid());
  g = geometry(1, 8, 8, 3, 4, 3, 1, 1, {0, 0, 0, 0});
  g.sh = 0;
  CHECK_FALSE(g.valid());
}

TEST_CASE("worker pool: every chunk runs once per region, over many regions, with the pool current", "[packed][pool]") {
  const int saved = thread_count().load();
  thread_count() = 3;
  {
    WorkerPool pool;
    PoolScope scope(pool);
    for (int region = 0; region < 2000; ++region) {
      std::vector<std::atomic<int>> hits(97);
      parallel_for(97, 10, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
      bool once = true;
      for (auto& h : hits) once = once && h.load() == 1;
      REQUIRE(once);
    }
    // Raising the thread count starts more workers; they join in from the next region on.
    thread_count() = 5;
    for (int region = 0; region < 200; ++region) {
      std::atomic<int64_t> total{0};
      parallel_for(500, 1, [&](int64_t b, int64_t e) { total += e - b; });
      REQUIRE(total.load() == 500);
    }
    thread_count() = 3;
    // A region inside a region finds the pool busy and runs on its caller.
    std::atomic<int> inner{0};
    parallel_for(4, 1, [&](int64_t b0, int64_t e0) {
      for (int64_t i = b0; i < e0; ++i) parallel_for(8, 1, [&](int64_t b, int64_t e) { inner += int(e - b); });
    });
    CHECK(inner.load() == 4 * 8);
    // An exception reaches the caller after every chunk ran, and the pool keeps working.
    std::atomic<int> ran{0};
    CHECK_THROWS_AS(parallel_for(3000, 1000,
                                 [&](int64_t b, int64_t) {
                                   ++ran;
                                   if (b == 1000) throw std::length_error("chunk 1");
                                 }),
                    std::length_error);
    CHECK(ran.load() == 3);
    std::atomic<int64_t> sum{0};
    parallel_for(1000, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    CHECK(sum.load() == 999 * 1000 / 2);
  }  // the workers join here
  thread_count() = saved;
}

TEST_CASE("parallel_chunks: chunks of exactly the grain, each index once, with and without a pool", "[packed][pool]") {
  const int saved = thread_count().load();
  thread_count() = 2;
  const auto check = [](int64_t n, int64_t grain, bool exact_chunks = true) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> short_chunks{0};
    parallel_chunks(n, grain, [&](int64_t b, int64_t e) {
      if (e - b != grain) ++short_chunks;
      for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
    });
    bool once = true;
    for (auto& h : hits) once = once && h.load() == 1;
    INFO(n << " items, grain " << grain);
    CHECK(once);
    if (exact_chunks) CHECK(short_chunks.load() <= (n % grain != 0 || n < grain ? 1 : 0));
  };
  {
    WorkerPool pool;
    PoolScope scope(pool);
    for (int region = 0; region < 200; ++region) check(2000, 124);
    check(3, 4);     // fewer items than one chunk: one call
    check(100, 1);   // many one-item chunks
  }
  check(1000, 60, false);  // no pool: parallel_for's chunks (one per thread), each index still once
  thread_count() = saved;
}

TEST_CASE("worker pool: a worker that wakes late never runs a chunk of a region it did not see", "[packed][pool]") {
  // Tiny back-to-back regions: the caller usually runs every chunk itself and returns before the workers wake, so
  // workers keep arriving during a later region (Note [chunks, not workers]). Each region checks that each of its
  // chunks ran once, with that region's bounds and body, and that no chunk of an earlier region ran after it ended.
  const int saved = thread_count().load();
  thread_count() = 4;
  {
    WorkerPool pool;
    PoolScope scope(pool);
    std::atomic<int> stray{0};
    for (int region = 0; region < 20000; ++region) {
      const int64_t n = 2 + region % 5;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<bool> open{true};
      parallel_for(n, 1, [&, n](int64_t b, int64_t e) {
        if (!open.load() || b < 0 || e > n || b >= e) ++stray;
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
        if (region % 7 == 0) std::this_thread::yield();  // uneven chunks: some finish while others are queued
      });
      open = false;
      bool once = true;
      for (auto& h : hits) once = once && h.load() == 1;
      REQUIRE(once);
    }
    CHECK(stray.load() == 0);
  }
  thread_count() = saved;
}

TEST_CASE("lane-wise exp matches libm within 2 ulp and keeps its special values", "[packed][vec]") {
  std::vector<float> xs;
  for (float x = -100.f; x <= 100.f; x += 0.0137f) xs.push_back(x);
  for (float x : {0.f, -0.f, 88.37f, 88.38f, -87.33f, -87.34f, 1e-30f, -1e-30f}) xs.push_back(x);
  xs.push_back(std::numeric_limits<float>::infinity());
  xs.push_back(-std::numeric_limits<float>::infinity());
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  while (xs.size() % 8) xs.push_back(0.5f);
  int worst = 0;
  for (size_t i = 0; i < xs.size(); i += 8) {
    vec::Vec<8> v, e;
    vec::load(v, xs.data() + i);
    vec::exp<8>(e, v);
    for (int k = 0; k < 8; ++k) {
      const float x = xs[i + k], got = e[k], want = std::exp(x);
      INFO("x = " << x << " got " << got << " want " << want);
      if (std::isnan(x)) {
        CHECK(std::isnan(got));
      } else if (x > 88.3762626647949f) {  // where libm's result nears FLT_MAX the approximation saturates
        CHECK(std::isinf(got));
      } else if (want == 0.f || std::isinf(want) || want < std::numeric_limits<float>::min()) {
        CHECK((got == want || std::abs(got) < 2 * std::numeric_limits<float>::min()));  // flushed below the normals
      } else {
        int32_t a, b;
        std::memcpy(&a, &got, 4);
        std::memcpy(&b, &want, 4);
        worst = std::max(worst, std::abs(a - b));
      }
    }
  }
  CHECK(worst <= 2);
}

/// What the x86 sigmoid may differ by from the exact value: 3.5 ulp where the result is a normal float (its own
/// table-driven exp at AVX2 and AVX-512: sigmoid.h), two of the smallest subnormal's steps below that.
bool logistic_close(float got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  const double err = std::abs(static_cast<double>(got) - want);
  if (std::abs(want) < std::numeric_limits<float>::min()) return err <= 2 * std::numeric_limits<float>::denorm_min();
  return err <= 3.5 * std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
}

TEST_CASE("sigmoid and SiLU blocks: 1 / (1 + vec::exp(-x)) and x times it bit for bit below AVX2, within 3.5 ulp "
          "from it on, ends included",
          "[packed][vec]") {
  // Below AVX2 (and on ARM) the blocks compute e^-x without vec::exp's handling of the range's ends and restore the
  // ends on the result (sigmoid.h): every value, the ends, infinities and NaN included, must be the one the full exp
  // gives.
  // AVX2 and AVX-512 have an e^-x of their own (tables of 2^(j / 8) and 2^(j / 16)): their values are checked
  // against the exact ones, and their ends must be the same as the generic loop's.
  std::vector<float> xs;
  for (float x = -100.f; x <= 100.f; x += 0.0173f) xs.push_back(x);
  for (float e : {87.3365447504f, 88.3762626647949f}) {
    for (float x : {std::nextafter(e, 0.f), e, std::nextafter(e, 200.f)}) xs.insert(xs.end(), {x, -x});
  }
  for (float x : {0.f, -0.f, 1e-30f, -1e-30f, 1e-40f, 3e38f, -3e38f}) xs.push_back(x);
  xs.push_back(std::numeric_limits<float>::infinity());
  xs.push_back(-std::numeric_limits<float>::infinity());
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  xs.push_back(-std::numeric_limits<float>::quiet_NaN());
  while (xs.size() % 16) xs.push_back(0.25f);
  each_level([&] {
    std::vector<float> sig(xs.size()), silu(xs.size());
    const auto as_is = [](const auto& v) ETRT_ISA_INLINE { return v; };
    REQUIRE(sigmoid_blocks(xs.data(), sig.data(), static_cast<int64_t>(xs.size()), as_is) ==
            static_cast<int64_t>(xs.size()));
    REQUIRE(silu_blocks(xs.data(), silu.data(), static_cast<int64_t>(xs.size()), as_is) ==
            static_cast<int64_t>(xs.size()));
#ifdef ETRT_ISA_X86
    const bool own_exp = kernels::isa::level() >= kernels::isa::kAvx2;
#else
    const bool own_exp = false;
#endif
    for (size_t i = 0; i < xs.size(); i += 16) {
      vec::Vec<16> v, e;
      vec::load(v, xs.data() + i);
      vec::exp<16>(e, -v);
      const vec::Vec<16> s = 1.0f / (1.0f + e), t = v * s;
      for (int k = 0; k < 16; ++k) {
        const float x = xs[i + k];
        INFO("x = " << x);
        if (std::isnan(x)) {
          CHECK(std::isnan(sig[i + k]));
          CHECK(std::isnan(silu[i + k]));
          continue;
        }
        if (!own_exp || std::isinf(x) || s[k] == 0.f || s[k] == 1.f) {
          CHECK(std::memcmp(&sig[i + k], &s[k], 4) == 0);
          CHECK(std::memcmp(&silu[i + k], &t[k], 4) == 0);
          continue;
        }
        const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
        CHECK(logistic_close(sig[i + k], want));
        CHECK(logistic_close(silu[i + k], static_cast<double>(x) * want));
      }
    }
  });
}
