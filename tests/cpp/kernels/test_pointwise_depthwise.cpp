// Note [pointwise then depthwise]: the banded pair gives the bytes of the two layers run one after the other.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "etrt/kernels/util/nhwc_pointwise_depthwise.h"
#include "etrt/kernels/util/sigmoid.h"
#include "kernel_test_util.h"

using namespace etrt::kernels;
using etrt::ktest::each_level;
using etrt::ktest::random_floats;

namespace {

/// The depthwise layer over [N, H, W, C]: a k x k window at stride s, padding {top, left, bottom, right}.
nhwc::Geometry depthwise_geometry(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int64_t s,
                                  std::array<int64_t, 4> pad) {
  nhwc::Geometry g;
  g.N = n, g.H = h, g.W = w, g.C = c, g.O = c, g.KH = k, g.KW = k, g.sh = s, g.sw = s;
  g.pt = pad[0], g.pl = pad[1], g.pb = pad[2], g.pr = pad[3];
  g.OH = nhwc::Geometry::out_size(h, g.pt, g.pb, k, s, 1);
  g.OW = nhwc::Geometry::out_size(w, g.pl, g.pr, k, s, 1);
  return g;
}

void silu_in_place(const void*, float* c, int64_t rows, int64_t cols, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) silu_clamped(c + r * ldc, c + r * ldc, cols, -INFINITY, INFINITY);
}

struct Case {
  int64_t n, h, w, cin, c, k, s;
  std::array<int64_t, 4> pad;
  bool silu;
};

}  // namespace

TEST_CASE("pointwise then depthwise in bands: the two layers' outputs, bit for bit", "[packed][conv]") {
  // Rows of 160 x 112 x 4 bytes (70 KB): a band of three or four rows, so most steps move the rows windows share
  // (stride 1 keeps two, stride 2 one) and two threads each start their range afresh. Channels off the vector
  // widths (112 = 7 x 16, 40 = 2 x 16 + 8), a batch of two (a step never crosses an image), a 5x5 window, padding
  // on one side only, and a window that reaches past the last row.
  const Case cases[] = {
      {1, 37, 160, 16, 112, 3, 1, {1, 1, 1, 1}, false}, {1, 37, 160, 16, 112, 3, 2, {1, 1, 1, 1}, false},
      {2, 30, 160, 24, 112, 3, 2, {0, 0, 1, 1}, true},  {1, 29, 96, 8, 40, 5, 1, {2, 2, 2, 2}, false},
      {1, 33, 96, 8, 40, 5, 2, {2, 2, 2, 2}, true},     {2, 9, 5, 3, 40, 3, 1, {1, 1, 1, 1}, false},
  };
  const int saved = thread_count().load();
  for (int threads : {1, 2, 3}) {
    thread_count() = threads;
    WorkerPool pool;
    PoolScope scope(pool);
    each_level([&] {
      for (const Case& t : cases) {
        const nhwc::Geometry dw = depthwise_geometry(t.n, t.h, t.w, t.c, t.k, t.s, t.pad);
        nhwc::Geometry pw;
        pw.N = t.n, pw.H = pw.OH = t.h, pw.W = pw.OW = t.w, pw.C = t.cin, pw.O = t.c;
        REQUIRE(nhwc::pointwise_depthwise_fits(pw, dw));
        const auto in = random_floats(static_cast<size_t>(t.n * t.h * t.w * t.cin), 1);
        const auto w = random_floats(static_cast<size_t>(t.c * t.cin), 2);  // [C, Cin]
        const auto b1 = random_floats(static_cast<size_t>(t.c), 3), b2 = random_floats(static_cast<size_t>(t.c), 4);
        const auto f = random_floats(static_cast<size_t>(t.k * t.k * t.c), 5);  // [KH, KW, C]
        auto packed = gemm::pack_b(w.data(), 1, t.cin, t.cin, t.c);
        REQUIRE(packed);
        gemm::Epilogue ep1, ep2;
        ep1.bias = b1.data();
        ep1.lo = t.silu ? -INFINITY : 0.f;  // ReLU6, as MobileNetV2's expansions
        ep1.hi = t.silu ? INFINITY : 6.f;
        if (t.silu) ep1.finish = &silu_in_place;  // EfficientNet's, in place on the band
        ep2.bias = b2.data();
        ep2.lo = -1.f;
        ep2.hi = 1.f;
        // Apart: the whole wide tensor, then the depthwise layer over it.
        std::vector<float> mid(static_cast<size_t>(t.n * t.h * t.w * t.c));
        gemm::packed_gemm(pw.N * pw.H * pw.W, *packed, ep1, mid.data(), t.c, gemm::MatrixRows{in.data(), t.cin});
        std::vector<float> apart(static_cast<size_t>(dw.N * dw.OH * dw.OW * dw.O), 7.f);
        REQUIRE(nhwc::depthwise(dw, 1, mid.data(), f.data(), ep2, apart.data()));
        std::vector<float> banded(apart.size(), 7.f);
        REQUIRE(nhwc::pointwise_depthwise(pw, in.data(), *packed, ep1, dw, f.data(), ep2, banded.data()));
        INFO("threads " << threads << " N " << t.n << " H " << t.h << " W " << t.w << " C " << t.c << " k " << t.k
                        << " stride " << t.s << " silu " << t.silu);
        CHECK(std::memcmp(apart.data(), banded.data(), apart.size() * sizeof(float)) == 0);
      }
    });
  }
  thread_count() = saved;
}

TEST_CASE("pointwise then depthwise: layers that do not chain are refused, nothing written", "[packed][conv]") {
  const nhwc::Geometry dw = depthwise_geometry(1, 8, 8, 16, 3, 1, {1, 1, 1, 1});
  nhwc::Geometry pw;
  pw.N = 1, pw.H = pw.OH = 8, pw.W = pw.OW = 8, pw.C = 4, pw.O = 16;
  CHECK(nhwc::pointwise_depthwise_fits(pw, dw));
  nhwc::Geometry other = pw;
  other.O = 8;  // its output is not the depthwise layer's input
  CHECK_FALSE(nhwc::pointwise_depthwise_fits(other, dw));
  other = pw;
  other.KH = 3, other.pt = other.pb = 1;  // not pointwise
  CHECK_FALSE(nhwc::pointwise_depthwise_fits(other, dw));
  nhwc::Geometry dilated = dw;
  dilated.dh = 2, dilated.OH = nhwc::Geometry::out_size(8, 1, 1, 3, 1, 2);
  CHECK_FALSE(nhwc::pointwise_depthwise_fits(pw, dilated));
  std::vector<float> in(8 * 8 * 4, 1.f), w(16 * 4, 1.f), f(9 * 16, 1.f), out(8 * 8 * 16, -5.f);
  auto packed = gemm::pack_b(w.data(), 1, 4, 4, 8);  // 8 columns: not the layer's 16
  REQUIRE(packed);
  CHECK_FALSE(nhwc::pointwise_depthwise(pw, in.data(), *packed, gemm::Epilogue{}, dw, f.data(), gemm::Epilogue{},
                                        out.data()));
  CHECK(std::ranges::all_of(out, [](float v) { return v == -5.f; }));
}
