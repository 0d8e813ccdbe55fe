// The byte kernels of Note [byte activations]: the byte depthwise convolution (Note [byte depthwise]) against an exact
// integer reference over windows, strides, padding, channel tails and batches on every ISA level, its VNNI kernel
// (Note [byte depthwise vnni]) against its float loop bit for bit; the int8 GEMM's
// byte store against its float store on the same output grid.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "etrt/backends/xnnpack/fast_elementwise.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/nhwc_byte_depthwise.h"
#include "etrt/kernels/util/nhwc_conv.h"
#include "etrt/kernels/util/nhwc_pool.h"
#include "etrt/kernels/util/qgemm.h"
#include "etrt/kernels/util/vec.h"

using namespace etrt;
using namespace etrt::kernels;

namespace {

struct LevelGuard {
  explicit LevelGuard(int level) { isa::force_level = level; }
  ~LevelGuard() { isa::force_level = -1; }
};

/// The byte the output grid stores for v, in double where the kernel works in float: only ties may differ.
int reference_byte(double v, const qgemm::GridStep& g, double zero) {
  const double steps = std::nearbyint(std::clamp(v / g.scale, double{g.qlo}, double{g.qhi}));
  return static_cast<int>(steps + zero);
}

}  // namespace

TEST_CASE("byte depthwise: exact integer sums onto the output grid, every geometry and ISA level",
          "[byte][depthwise]") {
  struct Case {
    int64_t N, H, W, C, KH, KW, sh, sw, pt, pl, pb, pr, dw;
  };
  const Case cases[] = {
      {1, 9, 11, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // a 16-channel block tail of 8
      {2, 8, 7, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1},    // stride 2, a batch
      {1, 10, 9, 48, 5, 5, 2, 2, 2, 2, 2, 2, 1},   // 5x5 stride 2
      {1, 6, 6, 3, 3, 3, 1, 1, 0, 0, 0, 0, 1},     // no padding, fewer channels than a block
      {1, 7, 12, 21, 3, 3, 1, 2, 0, 1, 2, 0, 1},   // asymmetric padding, strides differ
      {1, 5, 9, 17, 1, 7, 1, 1, 0, 3, 0, 3, 1},    // a 1x7 window (the generic loop)
      {1, 6, 10, 32, 3, 3, 1, 1, 1, 2, 1, 2, 2},   // dilation along W
      {1, 1, 4, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // one input row
      // Rows wider than one band (a 32 KB ring): the bands' overlapping columns, padding in the first and last
      {1, 5, 70, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // bands of 16 pixels, a last one of 6
      {2, 7, 61, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1},   // stride 2: bands of 8
      {1, 6, 50, 80, 5, 5, 1, 1, 2, 2, 2, 2, 1},   // 5x5, two padding columns a side
  };
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> byte(0, 255), weight(-127, 127);
  std::uniform_real_distribution<float> sc(0.5f, 2.f), bi(-40.f, 40.f);
  for (const Case& c : cases) {
    nhwc::Geometry g;
    g.N = c.N, g.H = c.H, g.W = c.W, g.C = c.C, g.O = c.C, g.KH = c.KH, g.KW = c.KW, g.sh = c.sh, g.sw = c.sw;
    g.pt = c.pt, g.pl = c.pl, g.pb = c.pb, g.pr = c.pr, g.dw = c.dw;
    g.OH = nhwc::Geometry::out_size(g.H, g.pt, g.pb, g.KH, g.sh, 1);
    g.OW = nhwc::Geometry::out_size(g.W, g.pl, g.pr, g.KW, g.sw, g.dw);
    REQUIRE(g.valid());
    REQUIRE(nhwc::byte_depthwise_fits(g));
    const int64_t taps = g.KH * g.KW, Cp = nhwc::byte_depthwise_channels(g.C);
    const int64_t in_n = g.N * g.H * g.W * g.C, out_n = g.N * g.OH * g.OW * g.C;
    std::vector<uint8_t> in(static_cast<size_t>(in_n + 64));
    for (auto& v : in) v = static_cast<uint8_t>(byte(gen));
    std::vector<int> w(static_cast<size_t>(taps * g.C));
    for (auto& v : w) v = weight(gen);
    std::vector<float> weights(static_cast<size_t>(taps * Cp), 0.f), scale(static_cast<size_t>(Cp), 0.f),
        bias(static_cast<size_t>(Cp), 0.f);
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t ch = 0; ch < g.C; ++ch) weights[t * Cp + ch] = static_cast<float>(w[t * g.C + ch]);
    for (int64_t ch = 0; ch < g.C; ++ch) scale[ch] = sc(gen) * 1e-3f, bias[ch] = bi(gen) * 1e-3f;
    const float in_zero = 131.f;
    nhwc::ByteDepthwise k{weights.data(), scale.data(), bias.data(), in_zero, -0.04f, 0.05f, {}};
    const qgemm::GridStep grid{1.f / 4e-4f, -128.f - 3.f, 127.f - 3.f, 4e-4f};  // qint8, zero point 3
    k.out.round = true;
    k.out.grid = grid;
    k.out.byte_zero = 128.f + 3.f;
    // The reference: exact integer sums over the taps inside the input, in int64.
    std::vector<int> want(static_cast<size_t>(out_n));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t ch = 0; ch < g.C; ++ch) {
            int64_t acc = 0;
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t ih = oh * g.sh - g.pt + kh, iw = ow * g.sw - g.pl + kw * g.dw;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                acc += (int64_t{in[((n * g.H + ih) * g.W + iw) * g.C + ch]} - 131) * w[(kh * g.KW + kw) * g.C + ch];
              }
            const double v = std::clamp(static_cast<double>(acc) * scale[ch] + bias[ch], -0.04, 0.05);
            want[((n * g.OH + oh) * g.OW + ow) * g.C + ch] = reference_byte(v, grid, 131.0);
          }
    for (int level : {-1, int{isa::kAvx2}, int{isa::kBaseline}}) {
      const LevelGuard guard(level);
      INFO("geometry " << c.H << "x" << c.W << "x" << c.C << " window " << c.KH << "x" << c.KW << " stride " << c.sh
                       << "," << c.sw << " level " << isa::level_name(isa::level()));
      std::vector<uint8_t> out(static_cast<size_t>(out_n + 16), 0xEE);
      REQUIRE(nhwc::depthwise_bytes(g, in.data(), k, out.data()));
      int64_t off = 0, ties = 0;
      for (int64_t i = 0; i < out_n; ++i) {
        const int d = std::abs(int{out[i]} - want[i]);
        off += d > 1;
        ties += d == 1;
      }
      CHECK(off == 0);
      CHECK(ties <= std::max<int64_t>(1, out_n / 200));  // a float multiply and add against double: only values at a midpoint move
      for (int64_t i = out_n; i < out_n + 16; ++i) CHECK(out[i] == 0xEE);  // nothing written past the output
    }
  }
}

TEST_CASE("byte depthwise: the VNNI kernel's bytes are the float loop's, bit for bit", "[byte][depthwise]") {
  // Note [byte depthwise vnni]: the same exact sums, the same finish. Where the CPU has VNNI and VBMI, level -1 runs
  // the VNNI kernel on 3 x 3 windows and AVX-512 the float loop; elsewhere both run the float loop.
  struct Case {
    int64_t N, H, W, C, sh, sw, pt, pl, pb, pr;
  };
  const Case cases[] = {
      {1, 9, 11, 40, 1, 1, 1, 1, 1, 1},    // stride 1: four row pairs and a last single row, a block tail of 8
      {2, 8, 7, 16, 2, 2, 0, 0, 1, 1},     // stride 2, TF-style padding, a batch
      {2, 7, 9, 24, 1, 1, 1, 1, 1, 1},     // pairs that would straddle two images
      {1, 6, 100, 112, 1, 1, 1, 1, 1, 1},  // rows wider than one band of quads (40 KB)
      {1, 9, 120, 96, 2, 2, 1, 1, 1, 1},   // stride 2 in bands
      {1, 1, 5, 3, 1, 1, 1, 1, 1, 1},      // one input row, fewer channels than a block
      {1, 5, 6, 33, 1, 2, 0, 2, 2, 0},     // asymmetric padding, strides differ
      {1, 40, 40, 64, 1, 1, 1, 1, 1, 1},   // enough work to split rows across threads
  };
  std::mt19937 gen(9);
  for (const Case& c : cases) {
    nhwc::Geometry g;
    g.N = c.N, g.H = c.H, g.W = c.W, g.C = c.C, g.O = c.C, g.KH = 3, g.KW = 3, g.sh = c.sh, g.sw = c.sw;
    g.pt = c.pt, g.pl = c.pl, g.pb = c.pb, g.pr = c.pr;
    g.OH = nhwc::Geometry::out_size(g.H, g.pt, g.pb, 3, g.sh, 1);
    g.OW = nhwc::Geometry::out_size(g.W, g.pl, g.pr, 3, g.sw, 1);
    REQUIRE(g.valid());
    const int64_t Cp = nhwc::byte_depthwise_channels(g.C);
    const int64_t in_n = g.N * g.H * g.W * g.C, out_n = g.N * g.OH * g.OW * g.C;
    std::vector<uint8_t> in(static_cast<size_t>(in_n + 64));
    for (auto& v : in) v = static_cast<uint8_t>(gen() % 256);
    in[0] = 0, in[1] = 255;
    std::vector<float> weights(static_cast<size_t>(9 * Cp), 0.f), scale(static_cast<size_t>(Cp), 0.f),
        start(static_cast<size_t>(Cp), 0.f), bias(static_cast<size_t>(Cp), 0.f);
    for (int64_t t = 0; t < 9; ++t)
      for (int64_t ch = 0; ch < g.C; ++ch)
        weights[t * Cp + ch] = static_cast<float>(static_cast<int>(gen() % 256) - 128);  // -128 included
    for (int64_t ch = 0; ch < g.C; ++ch) {
      scale[ch] = 1e-3f * static_cast<float>(1 + ch % 7) / 7.f;
      start[ch] = static_cast<float>(static_cast<int>(gen() % 20001) - 10000);  // an int32 bias
      bias[ch] = static_cast<float>(static_cast<int>(gen() % 101) - 50) * 1e-3f;
    }
    // The exact requantization's form (the int32 bias as the sums' start, a grid of step 1), a float bias on
    // another grid, and a second grid (a folded Convert).
    for (int form = 0; form < 3; ++form) {
      nhwc::ByteDepthwise k{weights.data(), scale.data(), form == 0 ? nullptr : bias.data(), 117.f, -1e9f, 1e9f, {}};
      if (form == 0) k.acc_init = start.data();
      k.out.round = true;
      k.out.grid = form == 0 ? qgemm::GridStep{1.f, -128.f - 5.f, 127.f - 5.f, 1.f}
                             : qgemm::GridStep{1.f / 3e-3f, -128.f - 5.f, 127.f - 5.f, 3e-3f};
      k.out.byte_zero = 128.f + 5.f;
      if (form == 2) {
        k.lo = -0.2f, k.hi = 0.25f;
        k.out.next = true, k.out.lo = -0.1f, k.out.hi = 0.2f;
        k.out.next_grid = qgemm::GridStep{1.f / 2e-3f, -128.f, 127.f, 2e-3f};
        k.out.byte_zero = 128.f;
      }
      std::vector<uint8_t> by_level[2];
      const int levels[2] = {-1, int{isa::kAvx512}};
      for (int l = 0; l < 2; ++l) {
        const LevelGuard guard(levels[l]);
        by_level[l].assign(static_cast<size_t>(out_n + 16), 0xEE);
        REQUIRE(nhwc::depthwise_bytes(g, in.data(), k, by_level[l].data()));
      }
      INFO("geometry " << c.N << "x" << c.H << "x" << c.W << "x" << c.C << " stride " << c.sh << "," << c.sw
                       << " form " << form);
      int64_t differ = 0, spread = 0;
      for (int64_t i = 0; i < out_n; ++i) {
        differ += by_level[0][i] != by_level[1][i];
        spread += by_level[0][i] != by_level[0][0];
      }
      CHECK(differ == 0);
      CHECK(spread > 0);  // not one value everywhere
      for (int64_t i = out_n; i < out_n + 16; ++i) CHECK(by_level[0][i] == 0xEE);  // nothing written past the output
    }
  }
}

TEST_CASE("byte depthwise: a Clamp folded into the block finish, then a second grid", "[byte][depthwise]") {
  // BlockFinish's next (a Convert onto another grid that alone reads the output): rounded onto the first grid, then
  // clamped and stored as the second grid's byte, the float path's fake_quantize then fake_requantize.
  nhwc::Geometry g;
  g.N = 1, g.H = 6, g.W = 6, g.C = 24, g.O = 24, g.KH = 3, g.KW = 3, g.pt = g.pl = g.pb = g.pr = 1;
  g.OH = 6, g.OW = 6;
  REQUIRE(g.valid());
  const int64_t Cp = nhwc::byte_depthwise_channels(g.C), n = g.N * g.H * g.W * g.C;
  std::vector<uint8_t> in(static_cast<size_t>(n + 64));
  std::mt19937 gen(3);
  for (auto& v : in) v = static_cast<uint8_t>(gen() % 256);
  std::vector<float> weights(static_cast<size_t>(9 * Cp), 0.f), scale(static_cast<size_t>(Cp), 0.f),
      bias(static_cast<size_t>(Cp), 0.f);
  for (int64_t t = 0; t < 9; ++t)
    for (int64_t c = 0; c < g.C; ++c) weights[t * Cp + c] = static_cast<float>(static_cast<int>(gen() % 255) - 127);
  for (int64_t c = 0; c < g.C; ++c) scale[c] = 2e-5f * static_cast<float>(1 + c % 5);
  nhwc::ByteDepthwise k{weights.data(), scale.data(), bias.data(), 120.f, -1e9f, 1e9f, {}};
  const qgemm::GridStep g1{1.f / 0.01f, -128.f, 127.f, 0.01f}, g2{1.f / 0.004f, -128.f - 7.f, 127.f - 7.f, 0.004f};
  k.out.round = true;
  k.out.grid = g1;
  k.out.next = true;
  k.out.lo = 0.f;
  k.out.hi = 0.3f;
  k.out.next_grid = g2;
  k.out.byte_zero = 128.f + 7.f;
  std::vector<uint8_t> out(static_cast<size_t>(n));
  REQUIRE(nhwc::depthwise_bytes(g, in.data(), k, out.data()));
  // The same sums through the unfused definition: byte_of's two steps, spelled out.
  std::vector<uint8_t> plain(static_cast<size_t>(n));
  nhwc::ByteDepthwise one = k;
  one.out.next = false;
  one.out.byte_zero = 128.f;
  REQUIRE(nhwc::depthwise_bytes(g, in.data(), one, plain.data()));
  int changed = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float on1 = (static_cast<float>(plain[i]) - 128.f) * g1.scale;
    const float want = vec::round_small(vec::clamped(vec::clamped(on1, 0.f, 0.3f) * g2.inv, g2.qlo, g2.qhi)) + 135.f;
    REQUIRE(int{out[i]} == static_cast<int>(want));
    changed += out[i] != plain[i];
  }
  CHECK(changed > n / 2);
}

TEST_CASE("int8 gemm: the byte store holds the float store's grid point as its byte", "[byte][int8][gemm]") {
  // Note [byte activations]: OutputGrid::bytes stores round(v / scale) + byte_zero where the float store writes that
  // step times the scale, on every kernel, with and without a second grid (a folded Convert).
  const int64_t m = 45, k = 70, n = 40;
  std::mt19937 gen(11);
  std::vector<uint8_t> a(static_cast<size_t>(m * k + 64));
  for (auto& v : a) v = static_cast<uint8_t>(gen() % 256);
  std::vector<int8_t> b(static_cast<size_t>(k * n));
  for (auto& v : b) v = static_cast<int8_t>(static_cast<int>(gen() % 255) - 127);
  auto B = qgemm::pack_qb(b.data(), n, 1, k, n);
  REQUIRE(B);
  std::vector<int32_t> zs;
  std::vector<float> scale, bias;
  for (int64_t j = 0; j < n; ++j) {
    zs.push_back(117 * B->col_sums[j]);
    scale.push_back(1e-5f * static_cast<float>(1 + j % 7));
    bias.push_back(0.01f * static_cast<float>(j % 5) - 0.02f);
  }
  gemm::Epilogue ep;
  ep.bias = bias.data();
  ep.lo = -0.3f;
  ep.hi = 0.6f;
  const qgemm::GridStep g1{1.f / 0.004f, -128.f + 5.f, 127.f + 5.f, 0.004f}, g2{1.f / 0.003f, -128.f, 127.f, 0.003f};
  std::vector<qgemm::detail::Kernel> kernels{qgemm::detail::Kernel::Scalar};
  if (qgemm::has_vnni()) kernels.push_back(qgemm::detail::Kernel::Vnni);
  if (qgemm::has_amx()) kernels.push_back(qgemm::detail::Kernel::Amx);
  // A grid of step 1 as well: the sums arrive in steps (Note [xnnpack requantization]), its multiply skipped.
  const qgemm::GridStep unit{1.f, g1.qlo, g1.qhi, 1.f};
  std::vector<float> step_scale(scale);
  for (float& s : step_scale) s *= 250.f;
  for (int pass = 0; pass < 3; ++pass) {
    const bool next = pass == 1, steps = pass == 2;
    for (auto kernel : kernels) {
      INFO("next " << next << " steps " << steps << " kernel " << int(kernel));
      qgemm::Requant rq{zs.data(), steps ? step_scale.data() : scale.data()};
      rq.out.round = true;
      rq.out.grid = steps ? unit : g1;
      rq.out.next = next;
      rq.out.lo = 0.f;
      rq.out.hi = 0.5f;
      rq.out.next_grid = g2;
      std::vector<float> floats(static_cast<size_t>(m * n), -7.f), next_floats(floats);
      rq.out.out = floats.data();
      rq.out.next_out = next_floats.data();
      qgemm::qgemm(m, *B, rq, ep, floats.data(), n, nhwc::ByteRows{a.data(), k}, kernel);
      const std::vector<float>& stored = next ? next_floats : floats;
      std::vector<uint8_t> bytes(static_cast<size_t>(m * n), 0xEE);
      const float zero = next ? 128.f : 128.f - 5.f;
      rq.out.bytes = bytes.data();
      rq.out.byte_zero = zero;
      std::vector<float> untouched(static_cast<size_t>(m * n), -7.f);
      rq.out.out = untouched.data();
      rq.out.next_out = untouched.data();
      qgemm::qgemm(m, *B, rq, ep, untouched.data(), n, nhwc::ByteRows{a.data(), k}, kernel);
      const float step = next ? g2.scale : steps ? 1.f : g1.scale;
      for (int64_t i = 0; i < m * n; ++i) {
        REQUIRE(static_cast<float>(bytes[i]) == std::nearbyint(stored[i] / step) + zero);
        REQUIRE(untouched[i] == -7.f);  // no float written
      }
    }
  }
}

TEST_CASE("int8 gemm: the packed byte store writes the scalar definition's bytes", "[byte][int8][gemm]") {
  // Note [int8 gemm packed bytes]: the VNNI kernel's byte rows narrowed by saturating packs and clamped as bytes,
  // against the scalar kernel, byte for byte: row pairs and a last single row, panels of 32 and fewer columns, clamps
  // inside, across and outside the grid (bounds between steps, lo above hi), a grid of step 1 and a bias; and a
  // layer whose steps could pass 2^30, which must keep the column store and still agree.
  if (!qgemm::has_vnni()) {
    WARN("no AVX-512 VNNI on this CPU (or ETRT_ISA caps it): the packed byte store does not run here");
    return;
  }
  struct Clamp {
    float lo, hi;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Clamp clamps[] = {{-inf, inf}, {0.f, 0.6f}, {-0.2537f, 0.3149f}, {0.4f, 0.1f}, {-9.f, -5.f}, {5.f, 9.f}};
  const int64_t shapes[][3] = {{1, 16, 32}, {9, 16, 96}, {45, 27, 56}, {8, 70, 81}, {17, 4, 17}, {96 + 7, 24, 144}};
  std::mt19937 gen(23);
  for (const auto& sh : shapes) {
    const int64_t m = sh[0], k = sh[1], n = sh[2];
    std::vector<uint8_t> a(static_cast<size_t>(m * k + 64));
    for (auto& v : a) v = static_cast<uint8_t>(gen() % 256);
    std::vector<int8_t> b(static_cast<size_t>(k * n));
    for (auto& v : b) v = static_cast<int8_t>(static_cast<int>(gen() % 256) - 128);
    auto B = qgemm::pack_qb(b.data(), n, 1, k, n);
    REQUIRE(B);
    std::vector<int32_t> zs;
    std::vector<float> scale, bias;
    for (int64_t j = 0; j < n; ++j) {
      zs.push_back(121 * B->col_sums[j]);
      scale.push_back(2e-5f * static_cast<float>(1 + j % 5));
      bias.push_back(0.02f * static_cast<float>(j % 7) - 0.06f);
    }
    for (const Clamp& cl : clamps)
      for (const int form : {0, 1, 2, 3}) {  // 0: grid step 0.004; 1: with a bias; 2: step 1; 3: steps past 2^30
        const bool with_bias = form == 1, unit = form == 2, huge = form == 3;
        std::vector<float> sc(scale);
        for (float& s : sc) s *= unit ? 250.f : huge ? 1e7f : 1.f;
        gemm::Epilogue ep;
        ep.bias = with_bias ? bias.data() : nullptr;
        ep.lo = unit ? cl.lo * 250.f : cl.lo;
        ep.hi = unit ? cl.hi * 250.f : cl.hi;
        qgemm::Requant rq{zs.data(), sc.data()};
        rq.out.round = true;
        rq.out.grid = unit ? qgemm::GridStep{1.f, -128.f + 3.f, 127.f + 3.f, 1.f}
                           : qgemm::GridStep{1.f / 0.004f, -128.f + 3.f, 127.f + 3.f, 0.004f};
        rq.out.byte_zero = 128.f - 3.f;
        std::vector<float> unused(static_cast<size_t>(m * n));
        rq.out.out = unused.data();
        std::vector<uint8_t> want(static_cast<size_t>(m * n + 64), 0xEE), got(want);
        rq.out.bytes = want.data();
        CHECK(qgemm::detail::packed_bytes_fit(*B, rq, ep) == !huge);
        qgemm::qgemm(m, *B, rq, ep, unused.data(), n, nhwc::ByteRows{a.data(), k}, qgemm::detail::Kernel::Scalar);
        rq.out.bytes = got.data();
        qgemm::qgemm(m, *B, rq, ep, unused.data(), n, nhwc::ByteRows{a.data(), k}, qgemm::detail::Kernel::Vnni);
        INFO("m " << m << " k " << k << " n " << n << " clamp " << cl.lo << ".." << cl.hi << " form " << form);
        REQUIRE(got == want);  // the 64 bytes past the output included: nothing written there
        if (cl.lo == -inf && !huge) {  // the bytes are not all one value: the comparison means something
          CHECK(*std::min_element(got.begin(), got.end() - 64) < 60);
          CHECK(*std::max_element(got.begin(), got.end() - 64) > 190);
        }
      }
  }
}

TEST_CASE("byte binary: mixed byte and float operands give the float path's grid points", "[byte][binary]") {
  // fast::binary_mixed (Note [byte activations]): equal shapes and a row repeated over the output, each operand bytes
  // or floats, the output bytes or floats on its grid; against fast::binary on the reals the bytes stand for.
  using xnnpack::ValueShape;
  std::mt19937 gen(5);
  const xnnpack::fast::OutGrid grid{-0.5f, 0.7f, 1.f / 0.006f, -128.f - 4.f, 127.f - 4.f, 0.006f};
  const float o_zero = 128.f + 4.f;
  for (const bool row : {false, true}) {
    const ValueShape os = ValueShape::of(std::vector<int64_t>{1, 7, 9, 40});
    const ValueShape as = row ? ValueShape::of(std::vector<int64_t>{1, 1, 1, 40}) : os;
    const int64_t n = os.numel(), na = as.numel();
    std::vector<uint8_t> ab(static_cast<size_t>(na + 16)), bb(static_cast<size_t>(n + 16));
    for (auto& v : ab) v = static_cast<uint8_t>(gen() % 256);
    for (auto& v : bb) v = static_cast<uint8_t>(gen() % 256);
    const float za = 120.f, sa = 0.004f, zb = 131.f, sb = 0.003f;
    std::vector<float> ar(static_cast<size_t>(na)), br(static_cast<size_t>(n));
    for (int64_t i = 0; i < na; ++i) ar[i] = (static_cast<float>(ab[i]) - za) * sa;
    for (int64_t i = 0; i < n; ++i) br[i] = (static_cast<float>(bb[i]) - zb) * sb;
    for (const bool mul : {false, true}) {
      std::vector<float> want(static_cast<size_t>(n));
      const bool fast_ok = mul ? xnnpack::fast::binary(as, ar.data(), os, br.data(), os, want.data(),
                                                       xnnpack::fast::Mul{}, &grid)
                               : xnnpack::fast::binary(as, ar.data(), os, br.data(), os, want.data(),
                                                       xnnpack::fast::Add{}, &grid);
      REQUIRE(fast_ok);
      const auto layout = xnnpack::fast::mixed_layout(as, os, os);
      REQUIRE(layout);
      CHECK(layout->a_row == row);
      for (const bool a_bytes : {false, true})
        for (const bool out_bytes : {false, true}) {
          INFO("row " << row << " mul " << mul << " a bytes " << a_bytes << " out bytes " << out_bytes);
          const xnnpack::fast::MixedOperand a = a_bytes ? xnnpack::fast::MixedOperand{nullptr, ab.data(), za, sa, row}
                                                        : xnnpack::fast::MixedOperand{ar.data(), nullptr, 0.f, 1.f, row};
          const xnnpack::fast::MixedOperand b{nullptr, bb.data(), zb, sb, false};
          std::vector<float> of(static_cast<size_t>(n), -9.f);
          std::vector<uint8_t> ob(static_cast<size_t>(n), 0xEE);
          if (mul)
            xnnpack::fast::binary_mixed(a, b, layout->rows, layout->inner, xnnpack::fast::Mul{}, grid,
                                        out_bytes ? nullptr : of.data(), out_bytes ? ob.data() : nullptr, o_zero);
          else
            xnnpack::fast::binary_mixed(a, b, layout->rows, layout->inner, xnnpack::fast::Add{}, grid,
                                        out_bytes ? nullptr : of.data(), out_bytes ? ob.data() : nullptr, o_zero);
          for (int64_t i = 0; i < n; ++i) {
            if (out_bytes) REQUIRE(static_cast<float>(ob[i]) == std::nearbyint(want[i] / grid.scale) + o_zero);
            else REQUIRE(of[i] == want[i]);
          }
        }
    }
  }
}

TEST_CASE("byte global average pool: the mean of the reals the bytes stand for", "[byte][pool]") {
  std::mt19937 gen(9);
  for (const int64_t C : {16, 40, 7}) {
    const int64_t N = 2, P = 3136;
    std::vector<uint8_t> x(static_cast<size_t>(N * P * C));
    for (auto& v : x) v = static_cast<uint8_t>(gen() % 256);
    const float zero = 117.f, scale = 0.02f;
    std::vector<float> out(static_cast<size_t>(N * C), -9.f);
    nhwc::global_avg_pool_bytes(x.data(), N, P, C, zero, scale, out.data());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        int64_t sum = 0;
        for (int64_t p = 0; p < P; ++p) sum += x[(n * P + p) * C + c];
        const double want = (static_cast<double>(sum) / P - zero) * scale;
        REQUIRE(std::abs(out[n * C + c] - want) <= 1e-6 * std::max(1.0, std::abs(want)));
      }
  }
}
