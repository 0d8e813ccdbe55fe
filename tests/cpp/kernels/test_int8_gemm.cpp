// The int8 GEMM of statically quantized layers (kernels/util/qgemm.h, Note [int8 gemm]): the AVX-512 VNNI
// micro-kernels against the scalar definition and both against exact integer references, over row remainders,
// K off the group of four, N off the panel width, bias, clamp and the finish step; the byte quantization of grid
// values; and the int8 convolution against the float one on values that lie on their grids.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "etrt/kernels/util/nhwc_conv.h"
#include "etrt/kernels/util/qgemm.h"

using namespace etrt;
using namespace etrt::kernels;

namespace {

struct Problem {
  int64_t m, k, n;
  std::vector<uint8_t> a;   // m x k
  std::vector<int8_t> b;    // k x n, row-major
  std::vector<float> scale, bias;
  int32_t zero;
};

Problem problem(int64_t m, int64_t k, int64_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> byte(0, 255), weight(-128, 127);
  std::uniform_real_distribution<float> sc(1e-6f, 1e-5f), bi(-1.f, 1.f);  // outputs around +-1
  Problem p{m, k, n, {}, {}, {}, {}, static_cast<int32_t>(byte(g))};
  p.a.resize(static_cast<size_t>(m * k));
  for (auto& v : p.a) v = static_cast<uint8_t>(byte(g));
  p.b.resize(static_cast<size_t>(k * n));
  for (auto& v : p.b) v = static_cast<int8_t>(weight(g));
  for (int64_t j = 0; j < n; ++j) p.scale.push_back(sc(g)), p.bias.push_back(bi(g));
  return p;
}

using qgemm::detail::Kernel;

/// The kernels this CPU (and process) can run.
std::vector<Kernel> kernels_here() {
  std::vector<Kernel> k{Kernel::Scalar};
  if (qgemm::has_vnni()) k.push_back(Kernel::Vnni);
  if (qgemm::has_amx()) k.push_back(Kernel::Amx);
  return k;
}
const char* kernel_name(Kernel k) { return k == Kernel::Amx ? "amx" : k == Kernel::Vnni ? "vnni" : "scalar"; }

/// Runs the GEMM on `p` through a packer that copies rows of p.a and leaves the bytes past k as garbage.
std::vector<float> run(const Problem& p, Kernel kernel, const gemm::Epilogue& ep) {
  auto B = qgemm::pack_qb(p.b.data(), p.n, 1, p.k, p.n);
  REQUIRE(B);
  std::vector<int32_t> zs(static_cast<size_t>(p.n));
  for (int64_t j = 0; j < p.n; ++j) zs[j] = p.zero * B->col_sums[j];
  std::vector<float> c(static_cast<size_t>(p.m * p.n), -99.f);
  struct Pack {
    const Problem& p;
    const uint8_t* direct(int64_t, int64_t&) const { return nullptr; }
    void operator()(int64_t i, int64_t rows, uint8_t* dst, int64_t lda) const {
      for (int64_t r = 0; r < rows; ++r) {
        std::memset(dst + r * lda, 0xA5, static_cast<size_t>(lda));
        std::memcpy(dst + r * lda, p.a.data() + (i + r) * p.k, static_cast<size_t>(p.k));
      }
    }
  };
  qgemm::qgemm(p.m, *B, qgemm::Requant{zs.data(), p.scale.data()}, ep, c.data(), p.n, Pack{p}, kernel);
  return c;
}

}  // namespace

TEST_CASE("int8 gemm: exact integer sums, scaled per column, on the scalar, VNNI and tile kernels", "[int8][gemm]") {
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 3, 15}, {8, 4, 16}, {9, 27, 17}, {33, 64, 40}, {200, 300, 24},
                               {3, 1000, 70}, {97, 65, 33}};
  for (const auto& s : shapes) {
    const Problem p = problem(s[0], s[1], s[2], static_cast<unsigned>(s[0] * 7 + s[1]));
    gemm::Epilogue ep;
    ep.bias = p.bias.data();
    ep.lo = -0.5f;
    ep.hi = 2.f;
    int finished = 0;
    ep.finish = [](const void* st, float*, int64_t rows, int64_t cols, int64_t) {
      *static_cast<int*>(const_cast<void*>(st)) += static_cast<int>(rows * cols);
    };
    ep.finish_state = &finished;
    for (Kernel kernel : kernels_here()) {
      INFO("m " << p.m << " k " << p.k << " n " << p.n << " " << kernel_name(kernel));
      finished = 0;
      const std::vector<float> c = run(p, kernel, ep);
      CHECK(finished == p.m * p.n);  // every element finished once
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) {
          int64_t acc = 0;
          for (int64_t q = 0; q < p.k; ++q) acc += (int64_t{p.a[i * p.k + q]} - p.zero) * p.b[q * p.n + j];
          // One rounding of the exact sum to float, one multiply, one add: within a few ulp of the double value.
          const double want = std::min<double>(std::max<double>(double(acc) * p.scale[j] + p.bias[j], ep.lo), ep.hi);
          REQUIRE(std::abs(c[i * p.n + j] - want) <= 1e-6 * std::max(1.0, std::abs(want)));
        }
    }
  }
}

TEST_CASE("int8 gemm: the VNNI and tile kernels give the scalar definition's floats bit for bit", "[int8][gemm]") {
  const Problem p = problem(37, 131, 45, 11);
  gemm::Epilogue ep;
  ep.bias = p.bias.data();
  const std::vector<float> want = run(p, Kernel::Scalar, ep);
  for (Kernel kernel : kernels_here()) {
    INFO(kernel_name(kernel));
    CHECK(run(p, kernel, ep) == want);
  }
}

TEST_CASE("int8 gemm: A read in place, its last rows short of a tile, on every kernel", "[int8][gemm]") {
  // A pointwise convolution's input is read in place (nhwc::ByteRows): rows of k bytes back to back, 64 bytes of
  // slack after the last. 45 rows: the tile kernel's last group of 32 is short and must not read past the slack.
  const Problem p = problem(45, 70, 40, 13);
  std::vector<uint8_t> a(p.a.size() + 64, 0);
  std::memcpy(a.data(), p.a.data(), p.a.size());
  auto B = qgemm::pack_qb(p.b.data(), p.n, 1, p.k, p.n);
  REQUIRE(B);
  std::vector<int32_t> zs;
  for (int64_t j = 0; j < p.n; ++j) zs.push_back(p.zero * B->col_sums[j]);
  gemm::Epilogue ep;
  std::vector<float> want;
  for (Kernel kernel : kernels_here()) {
    INFO(kernel_name(kernel));
    std::vector<float> c(static_cast<size_t>(p.m * p.n));
    qgemm::qgemm(p.m, *B, qgemm::Requant{zs.data(), p.scale.data()}, ep, c.data(), p.n, nhwc::ByteRows{a.data(), p.k},
                 kernel);
    if (want.empty()) want = c;
    CHECK(c == want);
  }
}

TEST_CASE("int8 gemm: grid values back to bytes, half to even, saturated, NaN to 0", "[int8][quantize]") {
  // scale 0.5, zero point -3, offset 128: byte = round(x / 0.5) + 125.
  std::vector<float> x = {0.f, 0.25f, 0.75f, -0.25f, 1e9f, -1e9f, std::nanf(""), 1.f, -62.5f, 65.f};
  for (int i = 0; i < 30; ++i) x.push_back(0.5f * static_cast<float>(i - 15));  // the 16-lane body runs too
  const std::vector<float> xs = x;
  std::vector<uint8_t> got(x.size());
  qgemm::quantize_row(x.data(), static_cast<int64_t>(x.size()), 2.f, 125, got.data());
  CHECK(std::memcmp(x.data(), xs.data(), x.size() * sizeof(float)) == 0);  // the input is not touched
  CHECK(got[0] == 125);
  CHECK(got[1] == 125);  // 0.5 -> 0 (even)
  CHECK(got[2] == 127);  // 1.5 -> 2
  CHECK(got[3] == 125);  // -0.5 -> -0
  CHECK(got[4] == 255);
  CHECK(got[5] == 0);
  CHECK(got[6] == 0);
  CHECK(got[7] == 127);
  CHECK(got[8] == 0);    // -125 + 125
  CHECK(got[9] == 255);  // 130 + 125 saturates
  for (size_t i = 10; i < x.size(); ++i) CHECK(int(got[i]) == int(i) - 25 + 125);
  // The special values again, now where the 16-lane body reads them.
  std::rotate(x.begin(), x.begin() + 10, x.end());
  std::vector<uint8_t> again(x.size());
  qgemm::quantize_row(x.data(), static_cast<int64_t>(x.size()), 2.f, 125, again.data());
  std::rotate(again.begin(), again.end() - 10, again.end());
  CHECK(again == got);
}

TEST_CASE("int8 convolution: windows, padding taps and groups match the float convolution on grid values",
          "[int8][conv]") {
  struct Case {
    nhwc::Geometry g;
    int64_t groups;
  };
  const auto geo = [](int64_t n, int64_t h, int64_t w, int64_t c, int64_t o, int64_t k, int64_t s, int64_t pad) {
    nhwc::Geometry g;
    g.N = n, g.H = h, g.W = w, g.C = c, g.O = o, g.KH = k, g.KW = k, g.sh = s, g.sw = s;
    g.pt = g.pl = g.pb = g.pr = pad;
    g.OH = nhwc::Geometry::out_size(h, pad, pad, k, s, 1);
    g.OW = nhwc::Geometry::out_size(w, pad, pad, k, s, 1);
    return g;
  };
  const Case cases[] = {{geo(1, 9, 7, 3, 8, 3, 2, 1), 1},      // mobilenet's stem: K = 27
                        {geo(2, 6, 6, 20, 33, 1, 1, 0), 1},    // pointwise
                        {geo(1, 8, 8, 12, 18, 3, 1, 1), 3},    // grouped
                        {geo(2, 3, 4, 5, 7, 3, 1, 2), 1},      // windows wholly or partly in the padding
                        // Kernel rows of at most 16 bytes, copied 16 at a time (nhwc::gather_short_windows): a
                        // stem over several packing blocks of rows, and rows of exactly 16 bytes.
                        {geo(2, 41, 38, 3, 8, 3, 2, 1), 1},
                        {geo(1, 11, 13, 4, 6, 4, 1, 1), 1},
                        // Kernel rows of 17 to 32 bytes, copied 32 at a time: resnet's 7 x 7 stem (21 bytes) over
                        // several packing blocks, 18 bytes, and exactly 32.
                        {geo(2, 40, 37, 3, 16, 7, 2, 3), 1},
                        {geo(1, 10, 12, 6, 5, 3, 1, 1), 1},
                        {geo(1, 9, 11, 8, 7, 4, 2, 2), 1}};
  const float sx = 0.05f;
  const int32_t zx = -7;
  for (const Case& t : cases) {
    const nhwc::Geometry& g = t.g;
    REQUIRE(g.valid());
    const int64_t cg = g.C / t.groups, og = g.O / t.groups, k = g.KH * g.KW * cg;
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> q(-128, 127);
    std::vector<float> in(static_cast<size_t>(g.N * g.H * g.W * g.C));
    for (auto& v : in) v = static_cast<float>(q(rng) - zx) * sx;  // on the input's grid
    std::vector<int8_t> w(static_cast<size_t>(g.O * k));
    for (auto& v : w) v = static_cast<int8_t>(q(rng));
    std::vector<float> sw(static_cast<size_t>(g.O)), wf(w.size());
    for (int64_t o = 0; o < g.O; ++o) sw[o] = 0.001f * static_cast<float>(o + 1);
    for (size_t i = 0; i < w.size(); ++i) wf[i] = static_cast<float>(w[i]) * sw[i / static_cast<size_t>(k)];
    std::vector<float> qout(static_cast<size_t>(g.N * g.OH * g.OW * g.O)), fout(qout.size());
    const nhwc::ToBytes tb{1.f / sx, zx + 128};
    std::vector<uint8_t> bytes(static_cast<size_t>(nhwc::conv_input_bytes(g)), 0);
    qgemm::quantize(in.data(), static_cast<int64_t>(in.size()), tb.inv_scale, tb.zero, bytes.data());
    for (int64_t gi = 0; gi < t.groups; ++gi) {
      auto qb = qgemm::pack_qb(w.data() + gi * og * k, 1, k, k, og);
      auto fb = gemm::pack_b(wf.data() + gi * og * k, 1, k, k, og);
      REQUIRE(qb);
      REQUIRE(fb);
      std::vector<int32_t> zs;
      std::vector<float> scale;
      for (int64_t j = 0; j < og; ++j) zs.push_back(tb.zero * qb->col_sums[j]), scale.push_back(sx * sw[gi * og + j]);
      gemm::Epilogue ep;
      nhwc::qconv_group(g, bytes.data(), static_cast<uint8_t>(tb.zero), gi * cg, cg, *qb,
                        qgemm::Requant{zs.data(), scale.data()}, ep, qout.data(), gi * og);
      nhwc::conv_group(g, in.data(), gi * cg, cg, *fb, ep, fout.data(), gi * og);
    }
    INFO("C " << g.C << " O " << g.O << " K " << g.KH << " groups " << t.groups);
    double err = 0, mag = 0;
    for (size_t i = 0; i < qout.size(); ++i) {
      err = std::max(err, double(std::abs(qout[i] - fout[i])));
      mag = std::max(mag, double(std::abs(fout[i])));
    }
    CHECK(mag > 0.1);
    CHECK(err <= 1e-5 * mag);
  }
}

TEST_CASE("int8 gemm: the output grid and the reading node's grid applied on the registers, on every kernel",
          "[int8][gemm]") {
  // Note [int8 gemm output grid]: the same floats as rounding the finished output onto its grid, then clamping and
  // rounding onto the next node's grid, stored in the next node's buffer; the GEMM's own output is not written.
  const Problem p = problem(45, 70, 40, 17);
  auto B = qgemm::pack_qb(p.b.data(), p.n, 1, p.k, p.n);
  REQUIRE(B);
  std::vector<int32_t> zs;
  for (int64_t j = 0; j < p.n; ++j) zs.push_back(p.zero * B->col_sums[j]);
  std::vector<uint8_t> a(p.a.size() + 64, 0);
  std::memcpy(a.data(), p.a.data(), p.a.size());
  gemm::Epilogue ep;
  ep.bias = p.bias.data();
  const qgemm::GridStep g1{1.f / 0.02f, -128.f - 3.f, 127.f - 3.f, 0.02f}, g2{1.f / 0.05f, -128.f, 127.f, 0.05f};
  for (Kernel kernel : kernels_here()) {
    INFO(kernel_name(kernel));
    std::vector<float> plain(static_cast<size_t>(p.m * p.n));
    qgemm::qgemm(p.m, *B, qgemm::Requant{zs.data(), p.scale.data()}, ep, plain.data(), p.n,
                 nhwc::ByteRows{a.data(), p.k}, kernel);
    std::vector<float> own(plain.size(), -7.f), next(plain.size(), -7.f);
    qgemm::Requant rq{zs.data(), p.scale.data()};
    rq.out.round = true;
    rq.out.grid = g1;
    rq.out.next = true;
    rq.out.lo = 0.f;
    rq.out.hi = 1.f;  // a ReLU6-like clamp, tighter
    rq.out.next_grid = g2;
    rq.out.out = own.data();
    rq.out.next_out = next.data();
    qgemm::qgemm(p.m, *B, rq, ep, own.data(), p.n, nhwc::ByteRows{a.data(), p.k}, kernel);
    int rounded = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      const float on1 = vec::grid_point(plain[i], g1.inv, g1.qlo, g1.qhi, g1.scale);
      const float want = vec::grid_point(vec::clamped(on1, 0.f, 1.f), g2.inv, g2.qlo, g2.qhi, g2.scale);
      REQUIRE(next[i] == want);
      REQUIRE(own[i] == -7.f);
      rounded += next[i] != plain[i];
    }
    CHECK(rounded > static_cast<int>(plain.size()) / 2);
  }
}
