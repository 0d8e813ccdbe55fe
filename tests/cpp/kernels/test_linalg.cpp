#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "etrt/kernels/ops/linalg.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

namespace {
template <class T>
std::vector<T> rnd(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(g));
  return v;
}
/// C[i,j] = sum_k A(i,k) B(k,j) in double, with element accessors.
template <class FA, class FB>
std::vector<double> ref_mm(int64_t m, int64_t n, int64_t k, FA a, FB b) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a(i, p) * b(p, j);
      c[i * n + j] = s;
    }
  return c;
}
}  // namespace

TEST_CASE("gemm: aarch64 runs the NEON float tile at every level", "[linalg][gemm][neon]") {
#ifdef ETRT_ISA_ARM64
  for (int level : {int{isa::kNeonDot}, int{isa::kNeon}}) {
    const gemm::detail::Micro<float> mk = gemm::detail::micro_kernels<float>(level);
    CHECK(mk.full == &gemm::detail::micro_f32_neon<6, 16>);
    CHECK(mk.half_row == &gemm::detail::micro_f32_neon<1, 8, 16>);
    CHECK(gemm::detail::micro_epilogue_kernels(level).full == mk.full);
  }
  CHECK((isa::level_name(isa::kNeonDot) == "neondot" && isa::level_name(isa::kNeon) == "neon"));
#else
  SUCCEED("not an aarch64 build: the x86 tiles are checked by the tests below, at every level");
#endif
}

TEST_CASE("gemm: all micro-kernels, transposes and odd sizes match a double reference", "[linalg][gemm]") {
  for (int level : {2, 1, 0}) {
    isa::force_level = level;
    for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 1}, {7, 33, 5}, {67, 45, 300}, {130, 70, 400}, {9, 200, 17},
                              // K past one K block (Note [gemm k block]): two passes adding into C
                              {37, 50, 1100},
                              // few rows of A: the unpacked product (gemv_few_rows), one and several rows
                              {1, 300, 77}, {3, 129, 64}, {4, 70, 100}}) {
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (float alpha : {0.5f, 1.f}) {  // 1: whole tiles add into C from registers, else through the tile buffer
            // A's rows a few floats longer than its K: row-major A is read in place (Note [gemm direct a])
            const int64_t lda = ta ? m + 3 : k + 5, ldb = tb ? k : n;
            auto a = rnd<float>(static_cast<size_t>((ta ? k : m) * lda), 1);
            auto b = rnd<float>(static_cast<size_t>(k * n), 2);
            auto c = rnd<float>(static_cast<size_t>(m * n), 3);
            const auto c0 = c;
            gemm::gemm<float>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, 2.0f, c.data(), n);
            auto r = ref_mm(m, n, k, [&](int64_t i, int64_t p) { return double(ta ? a[p * lda + i] : a[i * lda + p]); },
                            [&](int64_t p, int64_t j) { return double(tb ? b[j * ldb + p] : b[p * ldb + j]); });
            double err = 0;
            for (int64_t i = 0; i < m * n; ++i) err = std::max(err, std::abs(c[i] - (alpha * r[i] + 2.0 * c0[i])));
            CHECK(err < 1e-3);
          }
      auto a = rnd<double>(static_cast<size_t>(m * k), 4), b = rnd<double>(static_cast<size_t>(k * n), 5);
      std::vector<double> c(static_cast<size_t>(m * n), std::nan(""));
      gemm::gemm<double>(false, false, m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c.data(), n);  // beta 0 ignores NaN
      auto r = ref_mm(m, n, k, [&](int64_t i, int64_t p) { return a[i * k + p]; },
                      [&](int64_t p, int64_t j) { return b[p * n + j]; });
      double err = 0;
      for (int64_t i = 0; i < m * n; ++i) err = std::max(err, std::abs(c[i] - r[i]));
      CHECK(err < 1e-10);
    }
  }
  isa::force_level = -1;
}

TEST_CASE("mm / bmm / addmm over strides and dtypes", "[linalg]") {
  KernelContext ctx;
  auto a = rnd<float>(12, 7), b = rnd<float>(20, 8);
  Tensor ta = mk(ScalarType::Float, {3, 4}, a.data());
  // b stored transposed: logical [4, 5] with dim order (1, 0)
  Tensor tb = mk(ScalarType::Float, {4, 5}, b.data(), {1, 0});
  std::vector<float> o(15);
  Tensor out = mk(ScalarType::Float, {3, 5}, o.data());
  REQUIRE(mm_out<real_types>(ctx, ta, tb, out));
  auto r = ref_mm(3, 5, 4, [&](int64_t i, int64_t p) { return double(a[i * 4 + p]); },
                  [&](int64_t p, int64_t j) { return double(b[j * 4 + p]); });
  for (int i = 0; i < 15; ++i) CHECK(o[i] == Approx(r[i]).margin(1e-5));
  // int32 mm
  std::vector<int32_t> ia = {1, 2, 3, 4}, ib = {5, 6, 7, 8}, io(4);
  Tensor tia = mk(ScalarType::Int, {2, 2}, ia.data()), tib = mk(ScalarType::Int, {2, 2}, ib.data()),
         tio = mk(ScalarType::Int, {2, 2}, io.data());
  REQUIRE(mm_out<real_types>(ctx, tia, tib, tio));
  CHECK(io == std::vector<int32_t>{19, 22, 43, 50});
  // bmm double
  auto ba = rnd<double>(2 * 3 * 4, 9), bb = rnd<double>(2 * 4 * 2, 10);
  std::vector<double> bo(12);
  Tensor tba = mk(ScalarType::Double, {2, 3, 4}, ba.data()), tbb = mk(ScalarType::Double, {2, 4, 2}, bb.data()),
         tbo = mk(ScalarType::Double, {2, 3, 2}, bo.data());
  REQUIRE(bmm_out<real_types>(ctx, tba, tbb, tbo));
  for (int bi = 0; bi < 2; ++bi) {
    auto rr = ref_mm(3, 2, 4, [&](int64_t i, int64_t p) { return ba[bi * 12 + i * 4 + p]; },
                     [&](int64_t p, int64_t j) { return bb[bi * 8 + p * 2 + j]; });
    for (int i = 0; i < 6; ++i) CHECK(bo[bi * 6 + i] == Approx(rr[i]).margin(1e-12));
  }
  // addmm with a broadcast bias row and beta/alpha
  std::vector<float> bias = {1, 2, 3, 4, 5};
  Tensor tbias = mk(ScalarType::Float, {5}, bias.data());
  REQUIRE(addmm_out<real_types>(ctx, tbias, ta, tb, Scalar{0.5}, Scalar{2.0}, out));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) CHECK(o[i * 5 + j] == Approx(0.5 * bias[j] + 2 * r[i * 5 + j]).margin(1e-5));
  // Half mm
  std::vector<Half> ha = {Half(1.f), Half(2.f)}, hb = {Half(3.f), Half(4.f)}, ho(1);
  Tensor tha = mk(ScalarType::Half, {1, 2}, ha.data()), thb = mk(ScalarType::Half, {2, 1}, hb.data()),
         tho = mk(ScalarType::Half, {1, 1}, ho.data());
  REQUIRE(mm_out<real_types>(ctx, tha, thb, tho));
  CHECK(static_cast<float>(ho[0]) == 11.f);
  // empty k
  std::vector<float> eo(4, 7.f);
  Tensor e1 = mk(ScalarType::Float, {2, 0}, nullptr), e2 = mk(ScalarType::Float, {0, 2}, nullptr),
         teo = mk(ScalarType::Float, {2, 2}, eo.data());
  REQUIRE(mm_out<real_types>(ctx, e1, e2, teo));
  CHECK(eo == std::vector<float>(4, 0.f));
  auto st = mm_out<real_types>(ctx, ta, ta, out);
  REQUIRE(!st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("cannot multiply"));
  CHECK(slots_of("aten::addmm.out") == 7);
}

TEST_CASE("linear over batched input with and without bias", "[linalg]") {
  KernelContext ctx;
  auto x = rnd<float>(2 * 3 * 4, 11), w = rnd<float>(5 * 4, 12), b = rnd<float>(5, 13);
  Tensor tx = mk(ScalarType::Float, {2, 3, 4}, x.data()), tw = mk(ScalarType::Float, {5, 4}, w.data()),
         tb = mk(ScalarType::Float, {5}, b.data());
  std::vector<float> o(30);
  Tensor out = mk(ScalarType::Float, {2, 3, 5}, o.data());
  REQUIRE(linear_out<real_types>(ctx, tx, tw, &tb, out));
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 5; ++j) {
      double s = b[j];
      for (int p = 0; p < 4; ++p) s += double(x[r * 4 + p]) * w[j * 4 + p];
      CHECK(o[r * 5 + j] == Approx(s).margin(1e-5));
    }
  REQUIRE(linear_out<real_types>(ctx, tx, tw, nullptr, out));
  double s = 0;
  for (int p = 0; p < 4; ++p) s += double(x[p]) * w[p];
  CHECK(o[0] == Approx(s).margin(1e-5));
  // input whose leading dims do not collapse: [2,3,4] with dim order (1, 0, 2)
  Tensor txp = mk(ScalarType::Float, {2, 3, 4}, x.data(), {1, 0, 2});
  REQUIRE(linear_out<real_types>(ctx, txp, tw, nullptr, out));
  // logical (a, c, :) lives at memory ((c * 2 + a) * 4)
  double s2 = 0;
  for (int p = 0; p < 4; ++p) s2 += double(x[(2 * 2 + 1) * 4 + p]) * w[3 * 4 + p];
  CHECK(o[(1 * 3 + 2) * 5 + 3] == Approx(s2).margin(1e-5));
  Tensor bad_w = mk(ScalarType::Float, {5, 3}, w.data());
  auto st = linear_out<real_types>(ctx, tx, bad_w, nullptr, out);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("do not match"));
  CHECK(slots_of("aten::linear.out") == 5);
}

TEST_CASE("bmm: heads too small for the GEMM to split run on the pool by batch, each as one thread computes it",
          "[linalg][gemm]") {
  // vit_b_32's attention products: 12 heads of 50 x 64 x 50, and of 50 x 50 x 64 (transposed second operand).
  // Split by batch on a worker pool, every head must equal, bit for bit, the product computed alone.
  const int saved = thread_count().load();
  thread_count() = 3;
  WorkerPool pool;
  for (bool transposed : {false, true}) {
    const int64_t batch = 12, m = 50, k = transposed ? 50 : 64, n = transposed ? 64 : 50;
    auto a = rnd<float>(static_cast<size_t>(batch * m * k), 5), b = rnd<float>(static_cast<size_t>(batch * k * n), 6);
    std::vector<float> out(static_cast<size_t>(batch * m * n), -1.f), one(static_cast<size_t>(m * n));
    KernelContext ctx;
    Tensor ta = mk(a, {batch, m, k}), to = mk(out, {batch, m, n});
    // The second operand as a transposed view when asked: [batch, n, k] data read as [batch, k, n].
    Tensor tb = transposed ? mk(b, {batch, k, n}, ScalarType::Float, {0, 2, 1}) : mk(b, {batch, k, n});
    {
      PoolScope scope(pool);
      REQUIRE(bmm_out<real_types>(ctx, ta, tb, to));
    }
    for (int64_t h = 0; h < batch; ++h) {
      std::fill(one.begin(), one.end(), 0.f);
      gemm::gemm<float>(m, n, k, 1.f, {a.data() + h * m * k, k, 1},
                        transposed ? gemm::MatRef<float>{b.data() + h * k * n, 1, k}
                                   : gemm::MatRef<float>{b.data() + h * k * n, n, 1},
                        0.f, one.data(), n, 1);
      INFO("head " << h << (transposed ? " (transposed)" : ""));
      CHECK(std::memcmp(one.data(), out.data() + h * m * n, one.size() * sizeof(float)) == 0);
      const auto want = ref_mm(m, n, k, [&](int64_t i, int64_t p) { return double(a[h * m * k + i * k + p]); },
                               [&](int64_t p, int64_t j) {
                                 return double(transposed ? b[h * k * n + j * k + p] : b[h * k * n + p * n + j]);
                               });
      double worst = 0;
      for (int64_t i = 0; i < m * n; ++i) worst = std::max(worst, std::abs(want[i] - out[h * m * n + i]));
      CHECK(worst < 1e-4);
    }
  }
  thread_count() = saved;
}
