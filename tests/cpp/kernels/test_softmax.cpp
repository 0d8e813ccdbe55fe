// Tests for _softmax / _log_softmax / softmax.int (include/etrt/kernels/ops/softmax.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "etrt/kernels/ops/softmax.h"
#include "etrt/kernels/util/parallel.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
}  // namespace

namespace {
/// Reference softmax of a contiguous [A, B, C] tensor along `dim`, in double.
std::vector<double> ref_softmax(const std::vector<float>& x, const std::vector<int64_t>& s, int dim, bool log) {
  std::vector<double> out(x.size());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= s[i];
  for (size_t i = dim + 1; i < s.size(); ++i) inner *= s[i];
  const int64_t n = s[dim];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double m = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(x[(o * n + i) * inner + j]));
      for (int64_t i = 0; i < n; ++i) sum += std::exp(x[(o * n + i) * inner + j] - m);
      for (int64_t i = 0; i < n; ++i) {
        const double v = x[(o * n + i) * inner + j] - m;
        out[(o * n + i) * inner + j] = log ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  return out;
}
}  // namespace

TEST_CASE("softmax and log_softmax along every dim", "[kernels][softmax]") {
  KernelContext ctx;
  const std::vector<int64_t> s{3, 4, 5};
  std::vector<float> x(60);
  for (int i = 0; i < 60; ++i) x[i] = static_cast<float>(std::sin(i * 1.3) * 20.0);  // large values: needs max
  for (int dim = -3; dim < 3; ++dim) {
    const int d = (dim + 3) % 3;
    for (bool log : {false, true}) {
      std::vector<float> o(60);
      Tensor to = mk(o, s);
      if (log)
        REQUIRE(log_softmax_out<float_types>(ctx, mk(x, s), dim, false, to));
      else
        REQUIRE(softmax_out<float_types>(ctx, mk(x, s), dim, false, to));
      const auto ref = ref_softmax(x, s, d, log);
      for (int i = 0; i < 60; ++i) CHECK(o[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-6));
    }
  }
}

TEST_CASE("softmax on a channels-last layout, double, Half, rank 0, empty", "[kernels][softmax]") {
  KernelContext ctx;
  // logical [2, 3, 2] stored with dim order {0, 2, 1}; softmax along dim 1 (strided rows).
  std::vector<float> logical(12);
  for (int i = 0; i < 12; ++i) logical[i] = static_cast<float>(i % 5) - 1.5f;
  std::vector<float> stored(12);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) stored[(a * 2 + c) * 3 + b] = logical[(a * 3 + b) * 2 + c];
  std::vector<float> o(12);
  Tensor to = mk(o, {2, 3, 2});
  REQUIRE(softmax_out<float_types>(ctx, mk(stored, {2, 3, 2}, ScalarType::Float, {0, 2, 1}), 1, false, to));
  const auto ref = ref_softmax(logical, {2, 3, 2}, 1, false);
  for (int i = 0; i < 12; ++i) CHECK(o[i] == Approx(ref[i]).epsilon(1e-6));

  std::vector<double> xd{1000, 1001, 1002}, od(3);
  Tensor tod = mk(od, {3});
  REQUIRE(log_softmax_out<float_types>(ctx, mk(xd, {3}), 0, false, tod));
  const double lse = 1002 + std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  CHECK(od[0] == Approx(1000 - lse));
  CHECK(od[2] == Approx(1002 - lse));

  std::vector<uint16_t> h{Half(1.0f).bits, Half(2.0f).bits}, oh(2);
  Tensor toh = mk(oh, {2}, ScalarType::Half);
  REQUIRE(softmax_out<float_types>(ctx, mk(h, {2}, ScalarType::Half), 0, false, toh));
  CHECK(Half::to_float(oh[1]) == Approx(1 / (1 + std::exp(-1.0))).epsilon(1e-3));
  std::vector<float> of(2);
  Tensor tof = mk(of, {2});
  REQUIRE(softmax_out<float_types>(ctx, mk(h, {2}, ScalarType::Half), 0, true, tof));
  CHECK(of[1] == Approx(1 / (1 + std::exp(-1.0))).epsilon(1e-6));

  std::vector<float> z{3}, oz{0};
  Tensor toz = mk(oz, {});
  REQUIRE(softmax_out<float_types>(ctx, mk(z, {}), 0, false, toz));
  CHECK(oz[0] == 1);
  REQUIRE(log_softmax_out<float_types>(ctx, mk(z, {}), -1, false, toz));
  CHECK(oz[0] == 0);
  std::vector<float> e;
  Tensor te = mk(e, {0, 3});
  REQUIRE(softmax_out<float_types>(ctx, mk(e, {0, 3}), 1, false, te));

  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> mi{-inf, 0, -inf, -inf}, om(4);
  Tensor tom = mk(om, {2, 2});
  REQUIRE(softmax_out<float_types>(ctx, mk(mi, {2, 2}), 1, false, tom));
  CHECK(om[0] == 0);
  CHECK(om[1] == 1);
  CHECK(std::isnan(om[2]));
}

TEST_CASE("softmax.int_out and failures", "[kernels][softmax]") {
  KernelContext ctx;
  std::vector<float> x{0, 1};
  std::vector<double> od(2);
  Tensor tod = mk(od, {2});
  REQUIRE(softmax_int_out<float_types>(ctx, mk(x, {2}), 0, ScalarType::Double, tod));
  CHECK(od[1] == Approx(1 / (1 + std::exp(-1.0))));
  auto s = softmax_out<float_types>(ctx, mk(x, {2}), 0, false, tod);
  REQUIRE(!s);
  CHECK(s.error().what.find("must equal input dtype") != std::string::npos);
  std::vector<float> o(2);
  Tensor to = mk(o, {2});
  s = log_softmax_out<float_types>(ctx, mk(x, {2}), 1, false, to);
  REQUIRE(!s);
  CHECK(s.error().code == Error::InvalidArgument);
  CHECK(s.error().what.find("out of range") != std::string::npos);
  std::vector<int32_t> xi{1, 2};
  std::vector<int32_t> oi(2);
  Tensor toi = mk(oi, {2});
  s = softmax_out<float_types>(ctx, mk(xi, {2}), 0, false, toi);
  REQUIRE(!s);
  CHECK(s.error().what.find("unsupported dtype") != std::string::npos);
}

TEST_CASE("softmax wrappers have the schema's slot counts", "[kernels][softmax]") {
  CHECK(slots_of("aten::_softmax.out") == 5);
  CHECK(slots_of("aten::_log_softmax.out") == 5);
  CHECK(slots_of("aten::softmax.int_out") == 5);
}

TEST_CASE("softmax rows split across the pool give each row the bits it gets alone", "[kernels][softmax]") {
  // vit_b_32's attention: 12 x 50 rows of 50 logits split across a pool's threads; log_softmax splits too.
  const int saved = thread_count().load();
  thread_count() = 3;
  WorkerPool pool;
  const int64_t rows = 600, n = 50;
  std::vector<float> x(static_cast<size_t>(rows * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 6.f;
  for (bool log : {false, true}) {
    std::vector<float> y(x.size(), -1.f), one(static_cast<size_t>(n));
    KernelContext ctx;
    {
      PoolScope scope(pool);
      Tensor a = mk(x, {12, rows / 12, n}), o = mk(y, {12, rows / 12, n});
      REQUIRE((log ? log_softmax_out<float_types>(ctx, a, -1, false, o)
                   : softmax_out<float_types>(ctx, a, -1, false, o)));
    }
    int wrong = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> xr(x.begin() + r * n, x.begin() + (r + 1) * n);
      Tensor a = mk(xr, {1, n}), o = mk(one, {1, n});
      REQUIRE((log ? log_softmax_out<float_types>(ctx, a, 1, false, o)
                   : softmax_out<float_types>(ctx, a, 1, false, o)));
      wrong += std::memcmp(one.data(), y.data() + r * n, one.size() * sizeof(float)) != 0;
    }
    INFO((log ? "log_softmax" : "softmax"));
    CHECK(wrong == 0);
    const std::vector<double> want = ref_softmax(x, {rows, n}, 1, log);
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(want[i] - y[i]));
    CHECK(worst < 1e-5);
  }
  thread_count() = saved;
}
