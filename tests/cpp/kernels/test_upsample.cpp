#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "etrt/kernels/ops/rearrange.h"
#include "etrt/kernels/ops/shape.h"
#include "etrt/kernels/ops/upsample.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
const std::vector<uint8_t> kNHWC = {0, 2, 3, 1};

using UpTypes = types<uint8_t, float, double, Half, BFloat16>;
using AaTypes = types<uint8_t, float, double>;
using OptSizes = std::optional<std::span<const int64_t>>;
using OptScales = std::optional<std::span<const double>>;

/// Element (n, c, h, w) of a 4-D tensor through its strides.
template <class T>
T& el(const Tensor& t, int64_t n, int64_t c, int64_t h, int64_t w) {
  return t.data_as<T>()[n * t.stride(0) + c * t.stride(1) + h * t.stride(2) + w * t.stride(3)];
}

/// The deterministic float input the torch spot values were computed from: logical NCHW index i.
float fval(int64_t i) { return static_cast<float>(static_cast<double>((i * 37 + 11) % 101) / 7.0 - 5.0); }
uint8_t uval(int64_t i) { return static_cast<uint8_t>((i * 37 + 11) % 256); }

/// A 4-D tensor over `buf` in dim order `order`, filled with f(logical index).
template <class T, class F>
Tensor filled(std::vector<T>& buf, std::vector<int64_t> sizes, std::vector<uint8_t> order, F f) {
  buf.assign(static_cast<size_t>(sizes[0] * sizes[1] * sizes[2] * sizes[3]), T{});
  Tensor t = mk(buf, sizes, dtype_of<T>, order);
  int64_t i = 0;
  for (int64_t n = 0; n < sizes[0]; ++n)
    for (int64_t c = 0; c < sizes[1]; ++c)
      for (int64_t h = 0; h < sizes[2]; ++h)
        for (int64_t w = 0; w < sizes[3]; ++w) el<T>(t, n, c, h, w) = f(i++);
  return t;
}

/// Logical NCHW contents of a 4-D tensor as doubles.
template <class T>
std::vector<double> logical(const Tensor& t) {
  std::vector<double> v;
  for (int64_t n = 0; n < t.size(0); ++n)
    for (int64_t c = 0; c < t.size(1); ++c)
      for (int64_t h = 0; h < t.size(2); ++h)
        for (int64_t w = 0; w < t.size(3); ++w) v.push_back(convert<double>(el<T>(t, n, c, h, w)));
  return v;
}

/// Counts elements differing by more than atol + rtol * |ref|; NaN must match NaN.
int mismatches(const std::vector<double>& got, const std::vector<double>& ref, double atol, double rtol) {
  REQUIRE(got.size() == ref.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(ref[i]) || std::isnan(got[i])) {
      bad += std::isnan(ref[i]) != std::isnan(got[i]);
      continue;
    }
    if (std::isinf(ref[i]) || std::isinf(got[i])) {
      bad += got[i] != ref[i];
      continue;
    }
    if (std::fabs(got[i] - ref[i]) > atol + rtol * std::fabs(ref[i])) ++bad;
  }
  return bad;
}

std::vector<double> as_double(std::initializer_list<float> v) { return std::vector<double>(v.begin(), v.end()); }

// ---- naive references ----------------------------------------------------------------------------------------

/// torch's `nearest` source index: float scale, copies at equal size, halving at double size.
int64_t ref_nearest(int64_t d, int64_t in, int64_t out, std::optional<double> s) {
  if (out == in) return d;
  if (out == 2 * in) return d / 2;
  const float scale = s ? static_cast<float>(1.0 / *s) : static_cast<float>(in) / static_cast<float>(out);
  return std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(d) * scale)), in - 1);
}

/// The source coordinate of bilinear resampling, in double.
double ref_src(int64_t d, int64_t in, int64_t out, bool align, std::optional<double> s) {
  if (align) return out > 1 ? static_cast<double>(d) * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  const double scale = s ? 1.0 / *s : static_cast<double>(in) / static_cast<double>(out);
  return std::max(0.0, (static_cast<double>(d) + 0.5) * scale - 0.5);
}

/// Bilinear weights of every input index for output d (dense row), equal sizes copying.
std::vector<double> ref_linear_row(int64_t d, int64_t in, int64_t out, bool align, std::optional<double> s) {
  std::vector<double> w(static_cast<size_t>(in), 0.0);
  if (in == out) {
    w[d] = 1;
    return w;
  }
  const double x = ref_src(d, in, out, align, s);
  const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(x), in - 1);
  const double f = std::min(std::max(x - static_cast<double>(i0), 0.0), 1.0);
  w[i0] += 1 - f;
  w[std::min(i0 + 1, in - 1)] += f;
  return w;
}

/// Antialiased triangle weights of every input index for output d, normalized (dense row): pixel centers j + 0.5
/// weighted by the triangle of half-width max(scale, 1) around the output center.
std::vector<double> ref_aa_row(int64_t d, int64_t in, int64_t out, bool align, std::optional<double> s) {
  const double scale = align ? (out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0)
                             : (s ? 1.0 / *s : static_cast<double>(in) / static_cast<double>(out));
  const double support = std::max(scale, 1.0);
  const double center = scale * (static_cast<double>(d) + 0.5);
  std::vector<double> w(static_cast<size_t>(in), 0.0);
  double total = 0;
  for (int64_t j = 0; j < in; ++j) {
    w[j] = std::max(0.0, 1.0 - std::fabs(static_cast<double>(j) + 0.5 - center) / support);
    total += w[j];
  }
  if (total > 0)
    for (double& v : w) v /= total;
  return w;
}

/// Separable resampling with dense weight rows (reference for bilinear and antialiased bilinear).
template <class RowH, class RowW>
std::vector<double> ref_separable(const std::vector<double>& x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH,
                                  int64_t OW, RowH row_h, RowW row_w) {
  std::vector<double> o;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh) {
        const auto wh = row_h(oh);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const auto ww = row_w(ow);
          double acc = 0;
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w)
              if (wh[h] != 0 && ww[w] != 0) acc += wh[h] * ww[w] * x[((n * C + c) * H + h) * W + w];
          o.push_back(acc);
        }
      }
  return o;
}

/// grid_sample in double for finite grids: reflection by folding into one period.
double ref_fold(double v, double lo, double hi) {
  if (hi <= lo) return 0;
  const double span = hi - lo;
  double t = std::fmod(std::fabs(v - lo), 2 * span);
  if (t > span) t = 2 * span - t;
  return lo + t;
}

double ref_pad(double v, int64_t size, int pad, bool align) {
  const double n = static_cast<double>(size);
  if (pad == 2) v = align ? ref_fold(v, 0, n - 1) : ref_fold(v, -0.5, n - 0.5);
  if (pad >= 1) v = std::min(std::max(v, 0.0), static_cast<double>(size - 1));
  return v;
}

double ref_cubic(double t) {  // Keys kernel, A = -0.75, at distance t
  const double A = -0.75, a = std::fabs(t);
  if (a <= 1) return (A + 2) * a * a * a - (A + 3) * a * a + 1;
  if (a < 2) return A * a * a * a - 5 * A * a * a + 8 * A * a - 4 * A;
  return 0;
}

std::vector<double> ref_grid(const std::vector<double>& x, int64_t N, int64_t C, int64_t H, int64_t W,
                             const std::vector<double>& g, int64_t GH, int64_t GW, int mode, int pad, bool align) {
  std::vector<double> o;
  auto px = [&](int64_t n, int64_t c, double yy, double xx) -> double {
    if (pad != 0) {
      yy = ref_pad(yy, H, pad, align);
      xx = ref_pad(xx, W, pad, align);
    }
    if (yy < 0 || yy >= static_cast<double>(H) || xx < 0 || xx >= static_cast<double>(W)) return 0.0;
    return x[((n * C + c) * H + static_cast<int64_t>(yy)) * W + static_cast<int64_t>(xx)];
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < GH; ++i)
        for (int64_t j = 0; j < GW; ++j) {
          const double gx = g[((n * GH + i) * GW + j) * 2], gy = g[((n * GH + i) * GW + j) * 2 + 1];
          auto unnorm = [&](double v, int64_t size) {
            return align ? (v + 1) / 2 * static_cast<double>(size - 1) : ((v + 1) * static_cast<double>(size) - 1) / 2;
          };
          double xs = unnorm(gx, W), ys = unnorm(gy, H);
          if (mode == 2) {
            const double fx = std::floor(xs), fy = std::floor(ys);
            double acc = 0;
            for (int a = -1; a <= 2; ++a)
              for (int b = -1; b <= 2; ++b)
                acc += ref_cubic(ys - (fy + a)) * ref_cubic(xs - (fx + b)) * px(n, c, fy + a, fx + b);
            o.push_back(acc);
            continue;
          }
          xs = ref_pad(xs, W, pad, align);
          ys = ref_pad(ys, H, pad, align);
          if (mode == 1) {
            o.push_back(px(n, c, std::nearbyint(ys), std::nearbyint(xs)));
            continue;
          }
          const double fx = std::floor(xs), fy = std::floor(ys), tx = xs - fx, ty = ys - fy;
          o.push_back((1 - ty) * ((1 - tx) * px(n, c, fy, fx) + tx * px(n, c, fy, fx + 1)) +
                      ty * ((1 - tx) * px(n, c, fy + 1, fx) + tx * px(n, c, fy + 1, fx + 1)));
        }
  return o;
}

}  // namespace

TEST_CASE("upsample: registration and slot counts", "[upsample]") {
  CHECK(slots_of("aten::upsample_nearest2d.vec_out") == 5);
  CHECK(slots_of("aten::upsample_bilinear2d.vec_out") == 6);
  CHECK(slots_of("aten::_upsample_bilinear2d_aa.out") == 7);
  CHECK(slots_of("aten::grid_sampler_2d.out") == 7);
  CHECK(slots_of("aten::pixel_unshuffle.out") == 4);
}

TEST_CASE("upsample_nearest2d: torch index rule with non-integer factors and output sizes", "[upsample]") {
  KernelContext ctx;
  struct Case {
    int64_t W;
    std::optional<int64_t> os;
    std::optional<double> sf;
    std::vector<double> expect;  // source column of each output column
  };
  // aten.upsample_nearest2d.vec(arange(W).view(1,1,1,W), [1, os] or None, [1.0, sf] or None)
  const std::vector<Case> cases = {
      {10, std::nullopt, 2.09, {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9}},  // doubled size: d >> 1
      {10, std::nullopt, 1.05, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},                             // equal size: copy
      {5, std::nullopt, 1.7, {0, 0, 1, 1, 2, 2, 3, 4}},                                     // 1/1.7, not 5/8
      {5, 8, std::nullopt, {0, 0, 1, 1, 2, 3, 3, 4}},
      {3, 7, std::nullopt, {0, 0, 0, 1, 1, 2, 2}},
      {7, std::nullopt, 0.55, {0, 1, 3}},
      {4, std::nullopt, 2.6, {0, 0, 0, 1, 1, 1, 2, 2, 3, 3}},
  };
  for (const auto& cs : cases) {
    std::vector<float> x;
    Tensor in = filled(x, {1, 1, 1, cs.W}, {}, [](int64_t i) { return static_cast<float>(i); });
    std::vector<float> o(cs.expect.size());
    Tensor out = mk(o, {1, 1, 1, static_cast<int64_t>(cs.expect.size())});
    const int64_t sizes[2] = {1, cs.os.value_or(0)};
    const double scales[2] = {1.0, cs.sf.value_or(0)};
    const OptSizes osz = cs.os ? OptSizes(std::span<const int64_t>(sizes, 2)) : std::nullopt;
    const OptScales sf = cs.sf ? OptScales(std::span<const double>(scales, 2)) : std::nullopt;
    REQUIRE(upsample_nearest2d_vec_out<UpTypes>(ctx, in, osz, sf, out));
    CHECK(std::vector<double>(o.begin(), o.end()) == cs.expect);
  }
}

TEST_CASE("upsample_nearest2d: random shapes, NCHW/NHWC, uint8/Half, batch 0", "[upsample]") {
  KernelContext ctx;
  std::mt19937 gen(11);
  std::uniform_int_distribution<int64_t> dim(1, 9);
  std::uniform_real_distribution<double> fac(0.4, 3.2);
  int checked = 0;
  for (int it = 0; it < 40; ++it) {
    const int64_t N = 1 + it % 2, C = dim(gen) % 4 + 1, H = dim(gen), W = dim(gen);
    const bool by_scale = it % 2 == 0;
    const double sh = fac(gen), sw = fac(gen);
    const int64_t OH = by_scale ? static_cast<int64_t>(static_cast<double>(H) * sh) : dim(gen);
    const int64_t OW = by_scale ? static_cast<int64_t>(static_cast<double>(W) * sw) : dim(gen);
    if (OH < 1 || OW < 1) continue;
    const std::vector<uint8_t> in_order = it % 3 == 0 ? kNHWC : std::vector<uint8_t>{};
    const std::vector<uint8_t> out_order = it % 4 == 1 ? kNHWC : std::vector<uint8_t>{};
    std::vector<float> x, o(static_cast<size_t>(N * C * OH * OW));
    Tensor in = filled(x, {N, C, H, W}, in_order, [](int64_t i) { return fval(i); });
    Tensor out = mk(o, {N, C, OH, OW}, ScalarType::Float, out_order);
    const int64_t sizes[2] = {OH, OW};
    const double scales[2] = {sh, sw};
    const OptSizes osz = by_scale ? std::nullopt : OptSizes(std::span<const int64_t>(sizes, 2));
    const OptScales sf = by_scale ? OptScales(std::span<const double>(scales, 2)) : std::nullopt;
    REQUIRE(upsample_nearest2d_vec_out<UpTypes>(ctx, in, osz, sf, out));
    std::optional<double> rsh, rsw;
    if (by_scale) rsh = sh, rsw = sw;
    int bad = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t h = 0; h < OH; ++h)
          for (int64_t w = 0; w < OW; ++w)
            bad += el<float>(out, n, c, h, w) !=
                   el<float>(in, n, c, ref_nearest(h, H, OH, rsh), ref_nearest(w, W, OW, rsw));
    CHECK(bad == 0);
    ++checked;
  }
  CHECK(checked > 30);

  // uint8 and Half move values unchanged: [1,2,3,2] -> x2 both ways, NHWC input.
  std::vector<uint8_t> xu, ou(2 * 6 * 4);
  Tensor inu = filled(xu, {1, 2, 3, 2}, kNHWC, [](int64_t i) { return uval(i); });
  Tensor outu = mk(ou, {1, 2, 6, 4});
  const double two[2] = {2.0, 2.0};
  REQUIRE(upsample_nearest2d_vec_out<UpTypes>(ctx, inu, std::nullopt, OptScales(std::span<const double>(two, 2)), outu));
  std::vector<Half> xh, oh(2 * 6 * 4);
  Tensor inh = filled(xh, {1, 2, 3, 2}, {}, [](int64_t i) { return Half(fval(i)); });
  Tensor outh = mk(oh, {1, 2, 6, 4});
  REQUIRE(upsample_nearest2d_vec_out<UpTypes>(ctx, inh, std::nullopt, OptScales(std::span<const double>(two, 2)), outh));
  int bad = 0;
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t h = 0; h < 6; ++h)
      for (int64_t w = 0; w < 4; ++w) {
        bad += el<uint8_t>(outu, 0, c, h, w) != uval((c * 3 + h / 2) * 2 + w / 2);
        const float want = static_cast<float>(Half(fval((c * 3 + h / 2) * 2 + w / 2)));
        bad += static_cast<float>(el<Half>(outh, 0, c, h, w)) != want;
      }
  CHECK(bad == 0);

  // An empty batch is allowed and resizes the output.
  std::vector<float> x0(1), o0(1);
  Tensor in0 = mk(ScalarType::Float, {0, 2, 3, 3}, x0.data());
  Tensor out0 = mk(ScalarType::Float, {0, 2, 6, 6}, o0.data());
  REQUIRE(upsample_nearest2d_vec_out<UpTypes>(ctx, in0, std::nullopt, OptScales(std::span<const double>(two, 2)), out0));
}

TEST_CASE("upsample_nearest2d: argument errors", "[upsample]") {
  KernelContext ctx;
  std::vector<float> x(2 * 4 * 4), o(2 * 8 * 8);
  Tensor in = mk(x, {1, 2, 4, 4});
  Tensor out = mk(o, {1, 2, 8, 8});
  const int64_t sz[3] = {8, 8, 8};
  const double sf[2] = {2.0, 2.0};
  const OptSizes s2(std::span<const int64_t>(sz, 2));
  const OptScales f2(std::span<const double>(sf, 2));
  auto expect_fail = [&](Status s, std::string_view text) {
    REQUIRE_FALSE(s);
    INFO(s.error().what);
    CHECK(s.error().what.find(text) != std::string::npos);
  };
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in, s2, f2, out), "exactly one of output_size and scale_factors");
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in, std::nullopt, std::nullopt, out), "exactly one");
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in, OptSizes(std::span<const int64_t>(sz, 3)), std::nullopt, out),
              "output_size must have 2 values");
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in, std::nullopt, OptScales(std::span<const double>(sf, 1)), out),
              "scale_factors must have 2 values");
  const double tiny[2] = {0.1, 2.0}, nan[2] = {std::nan(""), 2.0}, neg[2] = {-2.0, 2.0};
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in, std::nullopt, OptScales(std::span<const double>(tiny, 2)), out),
              "output (H: 0, W: 8)");
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in, std::nullopt, OptScales(std::span<const double>(neg, 2)), out),
              "greater than 0");
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in, std::nullopt, OptScales(std::span<const double>(nan, 2)), out),
              "not representable");
  std::vector<float> x3(2 * 4 * 4), xc(1);
  Tensor in3 = mk(x3, {2, 4, 4});
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in3, s2, std::nullopt, out), "expected a 4-D input");
  Tensor empty_c = mk(ScalarType::Float, {1, 0, 4, 4}, xc.data());
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, empty_c, s2, std::nullopt, out), "non-empty 4-D input");
  std::vector<double> od(2 * 8 * 8);
  Tensor outd = mk(od, {1, 2, 8, 8});
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in, s2, std::nullopt, outd),
              "input dtype Float != output dtype Double");
  std::vector<int32_t> xi(2 * 4 * 4), oi(2 * 8 * 8);
  Tensor ini = mk(xi, {1, 2, 4, 4}), outi = mk(oi, {1, 2, 8, 8});
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, ini, s2, std::nullopt, outi), "unsupported dtype Int");
  std::vector<float> o7(2 * 7 * 8);
  Tensor out7 = mk(o7, {1, 2, 7, 8});  // static out of the wrong shape
  expect_fail(upsample_nearest2d_vec_out<UpTypes>(ctx, in, s2, std::nullopt, out7), "upsample_nearest2d.vec_out: output");
}

TEST_CASE("upsample_bilinear2d: torch spot values (align_corners, scale_factors, equal-size copy)", "[upsample]") {
  KernelContext ctx;
  std::vector<float> x;
  Tensor in = filled(x, {1, 1, 3, 4}, {}, [](int64_t i) { return fval(i); });
  struct Case {
    std::vector<int64_t> os;  // empty: use sf
    std::vector<double> sf;
    bool align;
    int64_t OH, OW;
    std::vector<double> expect;
  };
  // aten.upsample_bilinear2d.vec(x, output_size, align_corners, scale_factors), x = fval(12).view(1,1,3,4)
  const std::vector<Case> cases = {
      {{5, 7}, {}, false, 5, 7,
       as_double({-3.42857146f, -1.54081607f, 1.47959197f, 4.50000048f, 6.48979378f, 1.26530457f, -2.f, -0.74285686f,
                  1.1448983f, 4.16530657f, 4.29999971f, 3.81632543f, 1.88979554f, 0.685714602f, 3.28571439f,
                  5.17346954f, 8.19387722f, 3.99999881f, -0.19387649f, 2.82653165f, 4.71428585f, -1.34285808f,
                  0.544897377f, 3.56530523f, 3.69999981f, 3.21632671f, 1.28979516f, 0.0857132673f, -4.42857122f,
                  -2.54081607f, 0.479591995f, 3.50000072f, 5.48979378f, 0.265304506f, -3.f})},
      {{5, 7}, {}, true, 5, 7,
       as_double({-3.42857146f, -0.785714328f, 1.85714281f, 4.5f, 7.14285707f, 2.57142854f, -2.f, -0.0714285374f,
                  2.57142854f, 5.21428537f, 4.25f, 3.28571415f, 2.32142854f, 1.35714293f, 3.28571439f, 5.92857122f,
                  8.5714283f, 3.99999976f, -0.571428597f, 2.07142854f, 4.71428585f, -0.571428418f, 2.07142854f,
                  4.71428537f, 3.75f, 2.78571415f, 1.82142854f, 0.857142925f, -4.42857122f, -1.78571415f,
                  0.857142866f, 3.5f, 6.14285707f, 1.57142854f, -3.f})},
      // scale_factors [1.7, 0.6]: output 5x2, interpolation uses 1/1.7 and 1/0.6, not 3/5 and 4/2
      {{}, {1.7, 0.6}, false, 5, 2,
       as_double({-1.66666675f, 7.14285707f, 0.900560379f, 4.19327736f, 4.85014057f, -0.34453854f, 0.736694396f,
                  3.18067265f, -2.66666675f, 6.14285707f})},
      {{}, {1.7, 0.6}, true, 5, 2,
       as_double({-3.42857146f, -2.f, -0.0714285374f, 1.35714293f, 3.28571439f, 4.71428585f, -0.571428418f,
                  0.857142925f, -4.42857122f, -3.f})},
      // [1.3, 1.3]: H stays 3 (copied), W 4 -> 5 with 1/1.3
      {{}, {1.3, 1.3}, false, 3, 5,
       as_double({-3.42857146f, 0.0274723824f, 4.09340668f, 5.38461494f, -1.6483525f, 3.28571439f, 6.74175787f,
                  4.70329618f, 0.445055038f, 4.51098967f, -4.42857122f, -0.972527444f, 3.09340692f, 4.38461494f,
                  -2.64835238f})},
      {{2, 1}, {}, false, 2, 1, as_double({4.37499952f, 3.625f})},
  };
  for (const auto& cs : cases) {
    for (bool nhwc_out : {false, true}) {
      std::vector<float> o(static_cast<size_t>(cs.OH * cs.OW));
      Tensor out = mk(o, {1, 1, cs.OH, cs.OW}, ScalarType::Float, nhwc_out ? kNHWC : std::vector<uint8_t>{});
      const OptSizes osz = cs.os.empty() ? std::nullopt : OptSizes(std::span<const int64_t>(cs.os));
      const OptScales sf = cs.sf.empty() ? std::nullopt : OptScales(std::span<const double>(cs.sf));
      REQUIRE(upsample_bilinear2d_vec_out<UpTypes>(ctx, in, osz, cs.align, sf, out));
      CHECK(mismatches(logical<float>(out), cs.expect, 1e-6, 1e-6) == 0);
    }
  }
  // Equal sizes copy with a zero weight on the same pixel: inf there turns into NaN, its neighbours stay finite.
  // aten.upsample_bilinear2d.vec(arange(12.).view(1,1,3,4) with [1,1] = inf, [3, 4], False, None)
  std::vector<float> y;
  Tensor yin = filled(y, {1, 1, 3, 4}, {}, [](int64_t i) { return i == 5 ? kInf : static_cast<float>(i); });
  std::vector<float> yo(12);
  Tensor yout = mk(yo, {1, 1, 3, 4});
  const int64_t same[2] = {3, 4};
  REQUIRE(upsample_bilinear2d_vec_out<UpTypes>(ctx, yin, OptSizes(std::span<const int64_t>(same, 2)), false, std::nullopt,
                                               yout));
  CHECK(mismatches(logical<float>(yout), as_double({0, 1, 2, 3, 4, kNaN, 6, 7, 8, 9, 10, 11}), 0, 0) == 0);
}

TEST_CASE("upsample_bilinear2d: random vs reference, NHWC, double, Half", "[upsample]") {
  KernelContext ctx;
  std::mt19937 gen(5);
  std::uniform_int_distribution<int64_t> dim(1, 9);
  std::uniform_real_distribution<double> fac(0.4, 3.2);
  int total_bad = 0, runs = 0;
  for (int it = 0; it < 48; ++it) {
    const int64_t N = 1 + it % 2, C = it % 3 + 1, H = dim(gen), W = dim(gen);
    const bool align = it % 2 == 1, by_scale = it % 4 >= 2;
    const double sh = fac(gen), sw = fac(gen);
    const int64_t OH = by_scale ? static_cast<int64_t>(static_cast<double>(H) * sh) : dim(gen);
    const int64_t OW = by_scale ? static_cast<int64_t>(static_cast<double>(W) * sw) : dim(gen);
    if (OH < 1 || OW < 1) continue;
    std::optional<double> rsh, rsw;
    if (by_scale) rsh = sh, rsw = sw;
    const int64_t sizes[2] = {OH, OW};
    const double scales[2] = {sh, sw};
    const OptSizes osz = by_scale ? std::nullopt : OptSizes(std::span<const int64_t>(sizes, 2));
    const OptScales sf = by_scale ? OptScales(std::span<const double>(scales, 2)) : std::nullopt;
    std::vector<double> xr(static_cast<size_t>(N * C * H * W));
    for (size_t i = 0; i < xr.size(); ++i) xr[i] = fval(static_cast<int64_t>(i) * 3 + it);
    const auto ref = ref_separable(
        xr, N, C, H, W, OH, OW, [&](int64_t d) { return ref_linear_row(d, H, OH, align, align ? std::nullopt : rsh); },
        [&](int64_t d) { return ref_linear_row(d, W, OW, align, align ? std::nullopt : rsw); });
    const std::vector<uint8_t> order = it % 3 == 0 ? kNHWC : std::vector<uint8_t>{};
    if (it % 5 == 4) {  // double
      std::vector<double> x, o(static_cast<size_t>(N * C * OH * OW));
      Tensor in = filled(x, {N, C, H, W}, order, [&](int64_t i) { return xr[i]; });
      Tensor out = mk(o, {N, C, OH, OW}, ScalarType::Double, order);
      REQUIRE(upsample_bilinear2d_vec_out<UpTypes>(ctx, in, osz, align, sf, out));
      total_bad += mismatches(logical<double>(out), ref, 1e-12, 1e-12);
    } else if (it % 5 == 3) {  // Half computes in float, rounds once
      std::vector<Half> x, o(static_cast<size_t>(N * C * OH * OW));
      Tensor in = filled(x, {N, C, H, W}, order, [&](int64_t i) { return Half(static_cast<float>(xr[i])); });
      std::vector<double> xh(xr.size());
      for (size_t i = 0; i < xr.size(); ++i) xh[i] = static_cast<float>(Half(static_cast<float>(xr[i])));
      const auto refh = ref_separable(
          xh, N, C, H, W, OH, OW, [&](int64_t d) { return ref_linear_row(d, H, OH, align, align ? std::nullopt : rsh); },
          [&](int64_t d) { return ref_linear_row(d, W, OW, align, align ? std::nullopt : rsw); });
      Tensor out = mk(o, {N, C, OH, OW}, ScalarType::Half, order);
      REQUIRE(upsample_bilinear2d_vec_out<UpTypes>(ctx, in, osz, align, sf, out));
      total_bad += mismatches(logical<Half>(out), refh, 4e-3, 1e-3);
    } else {
      std::vector<float> x, o(static_cast<size_t>(N * C * OH * OW));
      Tensor in = filled(x, {N, C, H, W}, order, [&](int64_t i) { return static_cast<float>(xr[i]); });
      Tensor out = mk(o, {N, C, OH, OW}, ScalarType::Float, it % 2 == 0 ? kNHWC : std::vector<uint8_t>{});
      REQUIRE(upsample_bilinear2d_vec_out<UpTypes>(ctx, in, osz, align, sf, out));
      total_bad += mismatches(logical<float>(out), ref, 2e-5, 2e-5);
    }
    ++runs;
  }
  CHECK(runs > 35);
  CHECK(total_bad == 0);
}

TEST_CASE("upsample_bilinear2d: uint8 fixed-point results match torch exactly", "[upsample]") {
  KernelContext ctx;
  struct Case {
    std::vector<int64_t> os;
    std::vector<double> sf;
    bool align;
    int64_t OH, OW;
    std::vector<int> expect;
  };
  // aten.upsample_bilinear2d.vec(xu, output_size, align_corners, scale_factors), xu = uval(60).view(1,2,5,6)
  const std::vector<Case> cases = {
      {{7, 4}, {}, false, 7, 4, {20,  76,  131, 187, 110, 57,  112, 168, 187, 51,  87,  143, 208, 72,
                                 63,  119, 184, 185, 39,  95,  159, 215, 97,  70,  140, 196, 187, 51,
                                 106, 162, 217, 81,  87,  143, 198, 171, 62,  118, 173, 229, 38,  94,
                                 149, 205, 151, 70,  125, 181, 209, 73,  100, 156, 226, 90,  81,  137}},
      {{3, 9}, {}, true, 3, 9, {11,  34,  57,  80,  104, 127, 150, 173, 196, 199, 222, 181, 44,  36,
                                59,  82,  105, 128, 131, 154, 177, 200, 224, 215, 78,  37,  60,  97,
                                120, 143, 166, 190, 213, 236, 163, 26,  29,  52,  75,  98,  122, 145,
                                168, 191, 214, 217, 240, 199, 62,  54,  77,  100, 123, 146}},
      {{}, {1.5, 0.7}, false, 7, 4, {19,  72,  125, 178, 103, 55,  108, 161, 190, 48,  85,  138, 203, 85,
                                     63,  116, 190, 161, 40,  93,  167, 220, 57,  70,  145, 198, 192, 48,
                                     105, 158, 211, 136, 88,  141, 194, 183, 65,  118, 171, 224, 43,  96,
                                     149, 202, 121, 73,  126, 179, 208, 66,  103, 156, 221, 103, 81,  134}},
  };
  for (const auto& cs : cases) {
    for (bool nhwc : {false, true}) {
      std::vector<uint8_t> x, o(static_cast<size_t>(2 * cs.OH * cs.OW));
      Tensor in = filled(x, {1, 2, 5, 6}, nhwc ? kNHWC : std::vector<uint8_t>{}, [](int64_t i) { return uval(i); });
      Tensor out = mk(o, {1, 2, cs.OH, cs.OW}, ScalarType::Byte, nhwc ? kNHWC : std::vector<uint8_t>{});
      const OptSizes osz = cs.os.empty() ? std::nullopt : OptSizes(std::span<const int64_t>(cs.os));
      const OptScales sf = cs.sf.empty() ? std::nullopt : OptScales(std::span<const double>(cs.sf));
      REQUIRE(upsample_bilinear2d_vec_out<UpTypes>(ctx, in, osz, cs.align, sf, out));
      const auto got = logical<uint8_t>(out);
      CHECK(got == std::vector<double>(cs.expect.begin(), cs.expect.end()));
    }
  }
  // Random uint8: within one step of the exact (double) bilinear value, rounded.
  std::mt19937 gen(9);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int64_t> dim(1, 12);
  int off_by_more = 0;
  for (int it = 0; it < 20; ++it) {
    const int64_t C = 3, H = dim(gen), W = dim(gen), OH = dim(gen), OW = dim(gen);
    const bool align = it % 2 == 1;
    std::vector<uint8_t> x, o(static_cast<size_t>(C * OH * OW));
    Tensor in = filled(x, {1, C, H, W}, {}, [&](int64_t) { return static_cast<uint8_t>(byte(gen)); });
    Tensor out = mk(o, {1, C, OH, OW});
    const int64_t sizes[2] = {OH, OW};
    REQUIRE(upsample_bilinear2d_vec_out<UpTypes>(ctx, in, OptSizes(std::span<const int64_t>(sizes, 2)), align,
                                                 std::nullopt, out));
    const auto ref = ref_separable(logical<uint8_t>(in), 1, C, H, W, OH, OW,
                                   [&](int64_t d) { return ref_linear_row(d, H, OH, align, std::nullopt); },
                                   [&](int64_t d) { return ref_linear_row(d, W, OW, align, std::nullopt); });
    off_by_more += mismatches(logical<uint8_t>(out), ref, 1.05, 0);
  }
  CHECK(off_by_more == 0);
}

TEST_CASE("upsample_bilinear2d: argument errors", "[upsample]") {
  KernelContext ctx;
  std::vector<float> x(2 * 4 * 4), o(2 * 8 * 8);
  Tensor in = mk(x, {1, 2, 4, 4}), out = mk(o, {1, 2, 8, 8});
  const int64_t sz[2] = {8, 8};
  const double sf[2] = {2.0, 2.0};
  Status s = upsample_bilinear2d_vec_out<UpTypes>(ctx, in, OptSizes(std::span<const int64_t>(sz, 2)), false,
                                                  OptScales(std::span<const double>(sf, 2)), out);
  REQUIRE_FALSE(s);
  CHECK(s.error().what.find("upsample_bilinear2d.vec_out: must specify exactly one") != std::string::npos);
  std::vector<float> x3(16);
  Tensor in3 = mk(x3, {1, 4, 4});
  s = upsample_bilinear2d_vec_out<UpTypes>(ctx, in3, OptSizes(std::span<const int64_t>(sz, 2)), false, std::nullopt, out);
  REQUIRE_FALSE(s);
  CHECK(s.error().what.find("expected a 4-D input") != std::string::npos);
  const int64_t zero[2] = {0, 8};
  s = upsample_bilinear2d_vec_out<UpTypes>(ctx, in, OptSizes(std::span<const int64_t>(zero, 2)), false, std::nullopt, out);
  REQUIRE_FALSE(s);
  CHECK(s.error().what.find("greater than 0") != std::string::npos);
  std::vector<int64_t> xl(2 * 4 * 4), ol(2 * 8 * 8);
  Tensor inl = mk(xl, {1, 2, 4, 4}), outl = mk(ol, {1, 2, 8, 8});
  s = upsample_bilinear2d_vec_out<UpTypes>(ctx, inl, OptSizes(std::span<const int64_t>(sz, 2)), false, std::nullopt, outl);
  REQUIRE_FALSE(s);
  CHECK(s.error().what.find("unsupported dtype Long") != std::string::npos);
}

TEST_CASE("_upsample_bilinear2d_aa: torch spot values, down/up, align_corners, scales", "[upsample]") {
  KernelContext ctx;
  struct Case {
    int64_t OH, OW;
    bool align;
    std::optional<double> sh, sw;
    std::vector<double> expect;
  };
  // aten._upsample_bilinear2d_aa(x, [OH, OW], align_corners, scales_h, scales_w), x = fval(72).view(1,1,8,9)
  const std::vector<Case> cases = {
      {3, 4, false, std::nullopt, std::nullopt,
       as_double({1.26165414f, 2.08371544f, 3.2372086f, 2.81750846f, 1.10038877f, 1.22490466f, 2.00663686f,
                  2.96258521f, 3.1176157f, 3.2916739f, 0.898220897f, 1.87454343f})},
      {3, 4, true, std::nullopt, std::nullopt,
       as_double({1.09363532f, 2.21926928f, 3.11202931f, 2.31187701f, 2.34711766f, 1.77317178f, 1.84918344f,
                  2.58630991f, 2.92330813f, 2.57981849f, 0.852491677f, 1.53928506f})},
      {12, 5, false, std::nullopt, std::nullopt,
       as_double({-0.408163846f, 3.29464364f,  3.28571439f,  3.27678609f,  -0.234691963f, 1.21938753f, 1.83035755f,
                  3.73109293f,   3.1651783f,   1.90816534f,  2.53061223f,  0.629464269f,  3.61764741f, 3.31696343f,
                  3.73469567f,   1.265306f,    1.68303537f,  1.38235235f,  4.37053537f,   2.46938777f, -0.515306294f,
                  1.83482146f,   1.26890743f,  3.16964316f,  3.78061104f,  -1.4370749f,   1.23511946f, 1.86274529f,
                  1.66815519f,   4.92006588f,  0.732993841f, -0.717262387f, 2.45658302f,  1.51934445f, 2.96768761f,
                  3.41836739f,   0.937499881f, 0.928571463f, 2.27232099f,  1.53061306f,   5.24489737f, 3.34375024f,
                  -0.0336122401f, 2.574404f,   1.12415028f,  3.97959185f,  4.39732122f,   2.82352996f, 0.62202388f,
                  3.29421616f,   2.19897962f,  4.54910707f,  2.28571415f,  0.0223211646f, 2.37244868f, 0.734693348f,
                  4.43750048f,   1.03361344f,  -0.0892868191f, 0.908165097f})},
      {2, 4, false, 0.3, 0.45,
       as_double({1.01893032f, 1.86141443f, 3.01202655f, 3.03674817f, 2.12480998f, 1.9551537f, 1.51543701f,
                  2.41742015f})},
      // H unchanged (8 -> 8): no H pass even though scales_h says 0.5
      {8, 4, false, 0.5, std::nullopt,
       as_double({0.95102036f,  2.15330982f, 4.418118f,   0.261224657f, 2.35102057f, 2.21602798f, 2.72125411f,
                  4.5469389f,   0.453061193f, 2.27874565f, 2.78397179f, 2.64897966f, -0.620408118f, 0.581881642f,
                  2.8466897f,   4.04897976f, 0.779591799f, 0.644599319f, 1.14982581f, 2.97551012f, 5.06530619f,
                  1.76306617f,  1.21254337f, 1.07755101f, 3.16734695f, 4.99303055f, 1.62717748f, 2.47755098f,
                  2.09387755f,  2.94425035f, -0.421602666f, 1.40408158f})},
      // torch's NCHW path is wrong for an output width of 1 (it repeats the first row); this is its (correct)
      // channels-last result, channel 0 of aten._upsample_bilinear2d_aa(torch.cat([x, x], 1).to(
      // memory_format=torch.channels_last), [3, 1], False, None, None) (one channel would not be channels-last)
      {3, 1, false, std::nullopt, std::nullopt, as_double({2.37686419f, 1.76212800f, 2.23758173f})},
  };
  for (const auto& cs : cases) {
    for (bool nhwc : {false, true}) {
      std::vector<float> x, o(static_cast<size_t>(cs.OH * cs.OW));
      Tensor in = filled(x, {1, 1, 8, 9}, nhwc ? kNHWC : std::vector<uint8_t>{}, [](int64_t i) { return fval(i); });
      Tensor out = mk(o, {1, 1, cs.OH, cs.OW}, ScalarType::Float, nhwc ? std::vector<uint8_t>{} : kNHWC);
      const int64_t sizes[2] = {cs.OH, cs.OW};
      REQUIRE(upsample_bilinear2d_aa_out<AaTypes>(ctx, in, sizes, cs.align, cs.sh, cs.sw, out));
      CHECK(mismatches(logical<float>(out), cs.expect, 1e-6, 1e-6) == 0);
    }
  }
  // uint8: aten._upsample_bilinear2d_aa(xu, [OH, OW], align_corners, None, None), xu = uval(180).view(1,2,9,10)
  const std::vector<int> down = {115, 131, 119, 136, 135, 134, 127, 138, 130, 124, 113, 128,
                                 117, 133, 121, 138, 135, 136, 129, 113, 127, 126, 115, 130};
  const std::vector<int> up_align = {
      32,  90,  159, 180, 53,  80,  89,  147, 118, 133, 102, 137, 144, 180, 86,  105, 146, 170, 134, 86,  122, 181,
      126, 76,  125, 119, 158, 129, 122, 109, 134, 160, 171, 77,  137, 152, 198, 98,  117, 153, 191, 95,  152, 115,
      160, 141, 150, 110, 106, 132, 193, 116, 109, 124, 170, 70,  99,  138, 163, 67,  124, 87,  132, 113, 122, 82,
      81,  126, 165, 88,  86,  129, 157, 148, 71,  110, 162, 205, 34,  92,  161, 182, 55,  82,  91,  149, 120, 135,
      104, 139, 146, 182, 88,  107, 148, 172, 136, 88,  124, 183, 128, 78,  127, 121, 160, 131, 124, 111, 136, 162,
      173, 79,  139, 154, 200, 100, 119, 155, 193, 97,  154, 117, 132, 103, 152, 112, 108, 134, 145, 51,  111, 126,
      172, 72,  91,  127, 165, 69,  126, 89,  134, 115, 124, 84,  83,  128, 167, 90,  88,  131, 159, 150, 73,  112,
      164, 207};
  for (bool nhwc : {false, true}) {
    for (const auto& [OH, OW, align, expect] :
         {std::tuple{int64_t{4}, int64_t{3}, false, down}, std::tuple{int64_t{13}, int64_t{6}, true, up_align}}) {
      std::vector<uint8_t> x, o(static_cast<size_t>(2 * OH * OW));
      Tensor in = filled(x, {1, 2, 9, 10}, nhwc ? kNHWC : std::vector<uint8_t>{}, [](int64_t i) { return uval(i); });
      Tensor out = mk(o, {1, 2, OH, OW}, ScalarType::Byte, nhwc ? kNHWC : std::vector<uint8_t>{});
      const int64_t sizes[2] = {OH, OW};
      REQUIRE(upsample_bilinear2d_aa_out<AaTypes>(ctx, in, sizes, align, std::nullopt, std::nullopt, out));
      CHECK(logical<uint8_t>(out) == std::vector<double>(expect.begin(), expect.end()));
    }
  }
}

TEST_CASE("_upsample_bilinear2d_aa: random vs reference (float, double), errors", "[upsample]") {
  KernelContext ctx;
  std::mt19937 gen(21);
  std::uniform_int_distribution<int64_t> dim(1, 14);
  int total_bad = 0, runs = 0;
  for (int it = 0; it < 40; ++it) {
    const int64_t N = 1 + it % 2, C = 2, H = dim(gen), W = dim(gen), OH = dim(gen), OW = dim(gen);
    const bool align = it % 3 == 2;
    std::vector<double> xr(static_cast<size_t>(N * C * H * W));
    for (size_t i = 0; i < xr.size(); ++i) xr[i] = fval(static_cast<int64_t>(i) * 5 + it);
    // sizes that do not change skip their pass entirely
    auto row = [&](int64_t d, int64_t in, int64_t out) {
      return in == out ? ref_linear_row(d, in, out, false, std::nullopt) : ref_aa_row(d, in, out, align, std::nullopt);
    };
    const auto ref = ref_separable(xr, N, C, H, W, OH, OW, [&](int64_t d) { return row(d, H, OH); },
                                   [&](int64_t d) { return row(d, W, OW); });
    const int64_t sizes[2] = {OH, OW};
    const std::vector<uint8_t> order = it % 2 == 0 ? kNHWC : std::vector<uint8_t>{};
    if (it % 4 == 3) {
      std::vector<double> x, o(static_cast<size_t>(N * C * OH * OW));
      Tensor in = filled(x, {N, C, H, W}, order, [&](int64_t i) { return xr[i]; });
      Tensor out = mk(o, {N, C, OH, OW}, ScalarType::Double);
      REQUIRE(upsample_bilinear2d_aa_out<AaTypes>(ctx, in, sizes, align, std::nullopt, std::nullopt, out));
      total_bad += mismatches(logical<double>(out), ref, 1e-12, 1e-12);
    } else {
      std::vector<float> x, o(static_cast<size_t>(N * C * OH * OW));
      Tensor in = filled(x, {N, C, H, W}, order, [&](int64_t i) { return static_cast<float>(xr[i]); });
      Tensor out = mk(o, {N, C, OH, OW}, ScalarType::Float, it % 3 == 0 ? kNHWC : std::vector<uint8_t>{});
      REQUIRE(upsample_bilinear2d_aa_out<AaTypes>(ctx, in, sizes, align, std::nullopt, std::nullopt, out));
      total_bad += mismatches(logical<float>(out), ref, 3e-5, 3e-5);
    }
    ++runs;
  }
  CHECK(runs == 40);
  CHECK(total_bad == 0);

  std::vector<float> x(2 * 4 * 4), o(2 * 2 * 2);
  Tensor in = mk(x, {1, 2, 4, 4}), out = mk(o, {1, 2, 2, 2});
  const int64_t three[3] = {2, 2, 2}, zero[2] = {0, 2};
  Status s = upsample_bilinear2d_aa_out<AaTypes>(ctx, in, std::span<const int64_t>(three, 3), false, std::nullopt,
                                                 std::nullopt, out);
  REQUIRE_FALSE(s);
  CHECK(s.error().what.find("output_size must have 2 values") != std::string::npos);
  s = upsample_bilinear2d_aa_out<AaTypes>(ctx, in, std::span<const int64_t>(zero, 2), false, std::nullopt,
                                          std::nullopt, out);
  REQUIRE_FALSE(s);
  CHECK(s.error().what.find("output (H: 0, W: 2)") != std::string::npos);
  std::vector<Half> xh(2 * 4 * 4), oh(2 * 2 * 2);
  Tensor inh = mk(xh, {1, 2, 4, 4}), outh = mk(oh, {1, 2, 2, 2});
  s = upsample_bilinear2d_aa_out<AaTypes>(ctx, inh, std::span<const int64_t>(three, 2), false, std::nullopt, std::nullopt,
                                          outh);
  REQUIRE_FALSE(s);
  CHECK(s.error().what.find("unsupported dtype Half") != std::string::npos);
}

TEST_CASE("grid_sampler_2d: torch spot values for every mode, padding and align_corners, NaN/inf grids", "[upsample]") {
  KernelContext ctx;
  // aten.grid_sampler_2d(x, g, mode, pad, align_corners), x = fval(24).view(1,2,3,4),
  // g = [[-1.3,0.25],[0.4,-0.8],[nan,0.1],[inf,0.3],[1e20,-0.2],[0.9,2.7]].view(1,1,6,2)
  const std::vector<std::vector<float>> expect = {
      {0, 3.52f, kNaN, kNaN, 0, 0, 0, 0.011428365f, kNaN, kNaN, 0, 0},  // mode 0 pad 0 align 0
      {0.74642879f, 4.9742861f, kNaN, kNaN, 0, 0, 3.8892863f, 0.011428237f, kNaN, kNaN, 0, 0},
      {0.39285725f, 4.4000006f, 2.1285708f, 1.2428578f, 2.7000005f, -3, 6.1071429f, 0.014285482f, 7.8428564f,
       -0.97857195f, -1.6857147f, 2.7142856f},
      {1.357143f, 4.9742861f, 2.5142856f, 2.4000006f, 3.3714287f, -1.6285706f, 7.0714288f, 0.011428237f, 8.2285709f,
       -1.9857147f, -2.4571428f, 1.921428f},
      {0.92142814f, 4.4000006f, 2.1285708f, -0.18571365f, 1.2714289f, -2, 5.7339287f, 0.014285482f, 7.8428564f,
       5.5285721f, 6.9857144f, 3.7142856f},
      {3.7357137f, 4.9742861f, 2.5142856f, 0.97142905f, 1.9428573f, 0.7364288f, 4.5803576f, 0.011428237f, 8.2285709f,
       6.6857142f, 7.6571431f, 1.2564285f},
      {0, 7.1428571f, 0, 0, 0, 0, 0, -1.5714285f, 0, 0, 0, 0},  // mode 1 pad 0 align 0
      {3.2857144f, 7.1428571f, 0, 0, 0, 0, 9, -1.5714285f, 0, 0, 0, 0},
      {3.2857144f, 7.1428571f, 3.2857144f, 4.7142859f, 4.7142859f, -3, 9, -1.5714285f, 9, -4, -4, 2.7142856f},
      {3.2857144f, 7.1428571f, 3.2857144f, 4.7142859f, 4.7142859f, -3, 9, -1.5714285f, 9, -4, -4, 2.7142856f},
      {3.2857144f, 7.1428571f, 3.2857144f, 3.2857144f, 3.2857144f, -2, 9, -1.5714285f, 9, 9, 9, 3.7142856f},
      {3.2857144f, 7.1428571f, 3.2857144f, 3.2857144f, 3.2857144f, -2, 9, -1.5714285f, 9, 9, 9, 3.7142856f},
      {-0.057808906f, 4.6624994f, kNaN, kNaN, 0, 0, -0.42783329f, -1.1415079f, kNaN, kNaN, 0, 0},  // mode 2 pad 0
      {0.60404426f, 5.8957152f, kNaN, kNaN, 0, 0.094528273f, 5.1886821f, -0.53323579f, kNaN, kNaN, 0, -0.10058799f},
      {1.2435131f, 5.6815815f, kNaN, kNaN, 3.6914999f, -4.007998f, 6.9577985f, -1.515542f, kNaN, kNaN, -2.5879645f,
       3.297035f},
      {1.706455f, 5.2567172f, kNaN, kNaN, 4.2731423f, -1.756753f, 8.7154312f, -0.38789308f, kNaN, kNaN, -3.2868559f,
       1.9082242f},
      {1.7142596f, 5.8082871f, kNaN, kNaN, 2.2629282f, -3.7601542f, 6.4931655f, -1.6182479f, kNaN, kNaN, 7.9772153f,
       4.9025664f},
      {4.3565102f, 5.9162679f, kNaN, kNaN, 2.6834295f, -0.19169213f, 5.0820789f, -0.97747976f, kNaN, kNaN, 8.3977175f,
       1.9081496f},
  };
  const std::vector<float> gv = {-1.3f, 0.25f, 0.4f, -0.8f, kNaN, 0.1f, kInf, 0.3f, 1e20f, -0.2f, 0.9f, 2.7f};
  int k = 0;
  for (int mode = 0; mode < 3; ++mode)
    for (int pad = 0; pad < 3; ++pad)
      for (int align = 0; align < 2; ++align, ++k) {
        for (bool nhwc : {false, true}) {
          std::vector<float> x, g = gv, o(12);
          Tensor in = filled(x, {1, 2, 3, 4}, nhwc ? kNHWC : std::vector<uint8_t>{}, [](int64_t i) { return fval(i); });
          Tensor grid = mk(g, {1, 1, 6, 2});
          Tensor out = mk(o, {1, 2, 1, 6}, ScalarType::Float, nhwc ? kNHWC : std::vector<uint8_t>{});
          REQUIRE(grid_sampler_2d_out<float_types>(ctx, in, grid, mode, pad, align == 1, out));
          INFO("mode " << mode << " pad " << pad << " align " << align << " nhwc " << nhwc);
          CHECK(mismatches(logical<float>(out), std::vector<double>(expect[k].begin(), expect[k].end()), 2e-6, 2e-6) == 0);
        }
      }
  // Nearest rounds half to even: aten.grid_sampler_2d(arange(12.).view(1,1,3,4), g, 1, pad, False) with
  // g = [[0.5,0],[-0.5,0],[0.5,-1/3],[1,1]] -> zeros [6, 4, 2, 0], border [6, 4, 2, 11]
  for (int pad : {0, 1}) {
    std::vector<float> x, g = {0.5f, 0.f, -0.5f, 0.f, 0.5f, -1.f / 3.f, 1.f, 1.f}, o(4);
    Tensor in = filled(x, {1, 1, 3, 4}, {}, [](int64_t i) { return static_cast<float>(i); });
    Tensor grid = mk(g, {1, 1, 4, 2});
    Tensor out = mk(o, {1, 1, 1, 4});
    REQUIRE(grid_sampler_2d_out<float_types>(ctx, in, grid, 1, pad, false, out));
    CHECK(o == std::vector<float>{6, 4, 2, pad == 0 ? 0.f : 11.f});
  }
}

TEST_CASE("grid_sampler_2d: random vs reference, strided grid, double, BFloat16", "[upsample]") {
  KernelContext ctx;
  std::mt19937 gen(17);
  std::uniform_int_distribution<int64_t> dim(1, 6);
  std::uniform_real_distribution<double> coord(-1.6, 1.6);
  int total_bad = 0, runs = 0;
  for (int it = 0; it < 36; ++it) {
    const int mode = it % 3, pad = (it / 3) % 3;
    const bool align = (it / 9) % 2 == 1;
    const int64_t N = 1 + it % 2, C = 1 + it % 3, H = dim(gen), W = dim(gen), GH = dim(gen), GW = dim(gen);
    std::vector<double> xr(static_cast<size_t>(N * C * H * W)), gr(static_cast<size_t>(N * GH * GW * 2));
    for (size_t i = 0; i < xr.size(); ++i) xr[i] = fval(static_cast<int64_t>(i) * 7 + it);
    for (auto& v : gr) v = static_cast<float>(coord(gen));
    const auto ref = ref_grid(xr, N, C, H, W, gr, GH, GW, mode, pad, align);
    // the grid's coordinate dim outermost in memory: a non-contiguous dim order
    const std::vector<uint8_t> gorder = {3, 0, 1, 2};
    if (it % 4 == 3) {
      std::vector<double> x, g, o(static_cast<size_t>(N * C * GH * GW));
      Tensor in = filled(x, {N, C, H, W}, kNHWC, [&](int64_t i) { return xr[i]; });
      Tensor grid = filled(g, {N, GH, GW, 2}, gorder, [&](int64_t i) { return gr[i]; });
      Tensor out = mk(o, {N, C, GH, GW}, ScalarType::Double);
      REQUIRE(grid_sampler_2d_out<float_types>(ctx, in, grid, mode, pad, align, out));
      total_bad += mismatches(logical<double>(out), ref, 1e-9, 1e-9);
    } else if (it % 4 == 2) {
      std::vector<BFloat16> x, g, o(static_cast<size_t>(N * C * GH * GW));
      std::vector<double> xb(xr.size()), gb(gr.size());
      for (size_t i = 0; i < xr.size(); ++i) xb[i] = static_cast<float>(BFloat16(static_cast<float>(xr[i])));
      for (size_t i = 0; i < gr.size(); ++i) gb[i] = static_cast<float>(BFloat16(static_cast<float>(gr[i])));
      Tensor in = filled(x, {N, C, H, W}, {}, [&](int64_t i) { return BFloat16(static_cast<float>(xr[i])); });
      Tensor grid = filled(g, {N, GH, GW, 2}, {}, [&](int64_t i) { return BFloat16(static_cast<float>(gr[i])); });
      Tensor out = mk(o, {N, C, GH, GW}, ScalarType::BFloat16);
      REQUIRE(grid_sampler_2d_out<float_types>(ctx, in, grid, mode, pad, align, out));
      const auto refb = ref_grid(xb, N, C, H, W, gb, GH, GW, mode, pad, align);
      total_bad += mismatches(logical<BFloat16>(out), refb, 0.05, 0.01);
    } else {
      std::vector<float> x, g, o(static_cast<size_t>(N * C * GH * GW));
      Tensor in = filled(x, {N, C, H, W}, it % 2 == 0 ? kNHWC : std::vector<uint8_t>{},
                         [&](int64_t i) { return static_cast<float>(xr[i]); });
      Tensor grid = filled(g, {N, GH, GW, 2}, it % 2 == 1 ? gorder : std::vector<uint8_t>{},
                           [&](int64_t i) { return static_cast<float>(gr[i]); });
      Tensor out = mk(o, {N, C, GH, GW}, ScalarType::Float, it % 3 == 0 ? kNHWC : std::vector<uint8_t>{});
      REQUIRE(grid_sampler_2d_out<float_types>(ctx, in, grid, mode, pad, align, out));
      total_bad += mismatches(logical<float>(out), ref, 1e-4, 1e-4);
    }
    ++runs;
  }
  CHECK(runs == 36);
  CHECK(total_bad == 0);
}

TEST_CASE("grid_sampler_2d: argument errors", "[upsample]") {
  KernelContext ctx;
  std::vector<float> x(2 * 3 * 4), g(2 * 2 * 2), o(2 * 2 * 2), g3(12);
  Tensor in = mk(x, {1, 2, 3, 4}), grid = mk(g, {1, 2, 2, 2}), out = mk(o, {1, 2, 2, 2});
  auto expect_fail = [&](Status s, std::string_view text) {
    REQUIRE_FALSE(s);
    INFO(s.error().what);
    CHECK(s.error().what.find(text) != std::string::npos);
  };
  REQUIRE(grid_sampler_2d_out<float_types>(ctx, in, grid, 0, 0, false, out));
  expect_fail(grid_sampler_2d_out<float_types>(ctx, in, grid, 3, 0, false, out), "interpolation_mode must be 0");
  expect_fail(grid_sampler_2d_out<float_types>(ctx, in, grid, 0, -1, false, out), "padding_mode must be 0");
  Tensor grid3 = mk(g3, {1, 2, 2, 3});
  expect_fail(grid_sampler_2d_out<float_types>(ctx, in, grid3, 0, 0, false, out), "size 2 in the last dimension");
  Tensor grid_b2 = mk(g3, {2, 1, 3, 2});
  expect_fail(grid_sampler_2d_out<float_types>(ctx, in, grid_b2, 0, 0, false, out), "same batch size");
  std::vector<double> gd(8);
  Tensor gridd = mk(gd, {1, 2, 2, 2});
  expect_fail(grid_sampler_2d_out<float_types>(ctx, in, gridd, 0, 0, false, out), "grid dtype Double != input dtype Float");
  Tensor in3 = mk(x, {2, 3, 4});
  expect_fail(grid_sampler_2d_out<float_types>(ctx, in3, grid, 0, 0, false, out), "4-D input and a 4-D grid");
  Tensor in_empty = mk(ScalarType::Float, {1, 2, 0, 4}, x.data());
  expect_fail(grid_sampler_2d_out<float_types>(ctx, in_empty, grid, 0, 0, false, out), "non-empty spatial");
  std::vector<uint8_t> xu(24), gu(8), ou(8);
  Tensor inu = mk(xu, {1, 2, 3, 4}), gridu = mk(gu, {1, 2, 2, 2}), outu = mk(ou, {1, 2, 2, 2});
  expect_fail(grid_sampler_2d_out<float_types>(ctx, inu, gridu, 0, 0, false, outu), "unsupported dtype Byte");
}

TEST_CASE("pixel_unshuffle: torch values, round trip with pixel_shuffle, NHWC, 5-D, errors", "[upsample]") {
  KernelContext ctx;
  // aten.pixel_unshuffle(arange(48).view(1,2,4,6), 2) -> [1, 8, 2, 3]
  const std::vector<double> expect = {0,  2,  4,  12, 14, 16, 1,  3,  5,  13, 15, 17, 6,  8,  10, 18,
                                      20, 22, 7,  9,  11, 19, 21, 23, 24, 26, 28, 36, 38, 40, 25, 27,
                                      29, 37, 39, 41, 30, 32, 34, 42, 44, 46, 31, 33, 35, 43, 45, 47};
  for (bool nhwc : {false, true}) {
    std::vector<float> x, o(48), back(48);
    Tensor in = filled(x, {1, 2, 4, 6}, nhwc ? kNHWC : std::vector<uint8_t>{},
                       [](int64_t i) { return static_cast<float>(i); });
    Tensor out = mk(o, {1, 8, 2, 3}, ScalarType::Float, nhwc ? std::vector<uint8_t>{} : kNHWC);
    REQUIRE(pixel_unshuffle_out<real_bool_types>(ctx, in, 2, out));
    CHECK(logical<float>(out) == expect);
    Tensor round = mk(back, {1, 2, 4, 6});
    REQUIRE(pixel_shuffle_out<real_bool_types>(ctx, out, 2, round));
    CHECK(logical<float>(round) == logical<float>(in));
  }
  // 5-D int16 against a naive index map: out[b, c*r*r + i*r + j, h, w] = in[b, c, h*r + i, w*r + j]
  const int64_t B0 = 2, B1 = 3, C = 2, H = 6, W = 9, r = 3;
  std::vector<int16_t> x(static_cast<size_t>(B0 * B1 * C * H * W)), o(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int16_t>(i * 7 % 1000);
  Tensor in = mk(x, {B0, B1, C, H, W});
  Tensor out = mk(o, {B0, B1, C * r * r, H / r, W / r});
  REQUIRE(pixel_unshuffle_out<real_bool_types>(ctx, in, r, out));
  int bad = 0;
  for (int64_t b = 0; b < B0 * B1; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const int64_t oc = c * r * r + (h % r) * r + (w % r);
          bad += o[((b * C * r * r + oc) * (H / r) + h / r) * (W / r) + w / r] != x[((b * C + c) * H + h) * W + w];
        }
  CHECK(bad == 0);

  auto expect_fail = [&](Status s, std::string_view text) {
    REQUIRE_FALSE(s);
    INFO(s.error().what);
    CHECK(s.error().what.find(text) != std::string::npos);
  };
  std::vector<float> xf(2 * 4 * 6), of(48);
  Tensor inp = mk(xf, {1, 2, 4, 6}), outf = mk(of, {1, 8, 2, 3});
  expect_fail(pixel_unshuffle_out<real_bool_types>(ctx, inp, 0, outf), "downscale_factor must be positive, got 0");
  expect_fail(pixel_unshuffle_out<real_bool_types>(ctx, inp, 4, outf), "width 6 is not divisible by downscale_factor 4");
  expect_fail(pixel_unshuffle_out<real_bool_types>(ctx, inp, 3, outf), "height 4 is not divisible by downscale_factor 3");
  Tensor in2 = mk(xf, {8, 6});
  expect_fail(pixel_unshuffle_out<real_bool_types>(ctx, in2, 2, outf), "rank >= 3");
  std::vector<double> od(48);
  Tensor outd = mk(od, {1, 8, 2, 3});
  expect_fail(pixel_unshuffle_out<real_bool_types>(ctx, inp, 2, outd), "!= output dtype Double");
  std::vector<float> ow(48);
  Tensor out_wrong = mk(ow, {1, 4, 4, 3});
  expect_fail(pixel_unshuffle_out<real_bool_types>(ctx, inp, 2, out_wrong), "pixel_unshuffle.out: output");
}
