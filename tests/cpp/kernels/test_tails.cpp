// Vector loops and their tails: the same input gives the same bits wherever it sits in a tensor. Built at -O1 in
// kernel_tests and again at -O3 in kernel_tests_o3, where GCC fuses multiply-adds in code compiled for an FMA target
// and a scalar tail compiled for the baseline ISA would round differently from the blocks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <ios>
#include <limits>
#include <string>
#include <vector>

#include "etrt/kernels/ops/activation.h"
#include "etrt/kernels/ops/unary.h"
#include "etrt/kernels/util/fast_math.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/sigmoid.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
}  // namespace

TEST_CASE("vector kernels give a value in a tail the bits they give it in a whole block", "[tails][vec]") {
  // 4096 values over [-12, 12) and past exp's ends, run once as 256 whole blocks and again 15 at a time, where
  // every element falls in a partial block.
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -12.f + 24.f * static_cast<float>(i) / static_cast<float>(x.size());
  x[100] = -95.f;  // past exp's low end: sigmoid 0, SiLU -0
  x[200] = 91.f;   // past its high end
  const float inf = std::numeric_limits<float>::infinity();
  // Each kernel over n elements of x from `at`, into y from `at`.
  const auto run = [&](const std::string& kernel, std::vector<float>& y, int64_t at, int64_t n) {
    std::vector<float> xs(x.begin() + at, x.begin() + at + n), ys(static_cast<size_t>(n));
    KernelContext ctx;
    Tensor a = mk(xs, {n}), o = mk(ys, {n});
    if (kernel == "sigmoid") sigmoid_all(xs.data(), ys.data(), n, [](const auto& v) ETRT_ISA_INLINE { return v; });
    if (kernel == "SiLU") silu_clamped(xs.data(), ys.data(), n, -inf, inf);
    if (kernel == "SiLU clamped") silu_clamped(xs.data(), ys.data(), n, -0.2f, 6.f);
    if (kernel == "sigmoid.out") REQUIRE(sigmoid_out<float_types>(ctx, a, o));
    if (kernel == "gelu.out") REQUIRE(gelu_out<float_types>(ctx, a, "none", o));
    if (kernel == "exp_shift_sum") exp_shift_sum(xs.data(), ys.data(), n, 0.5f);
    std::copy(ys.begin(), ys.end(), y.begin() + at);
  };
  for (const std::string kernel : {"sigmoid", "SiLU", "SiLU clamped", "sigmoid.out", "gelu.out", "exp_shift_sum"}) {
    INFO(kernel);
    each_level([&] {
      const auto n = static_cast<int64_t>(x.size());
      std::vector<float> whole(x.size()), tails(x.size());
      run(kernel, whole, 0, n);
      for (int64_t at = 0; at < n; at += 15) run(kernel, tails, at, std::min<int64_t>(15, n - at));
      int64_t differ = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (std::memcmp(&whole[i], &tails[i], 4) == 0) continue;
        if (++differ <= 3)
          UNSCOPED_INFO(std::hexfloat << "x = " << x[i] << ": " << whole[i] << " in a block, " << tails[i]
                                      << " in a tail");
      }
      CHECK(differ == 0);
    });
  }
}

TEST_CASE("dispatch_lanes gives a body one register's floats at each level", "[tails][vec]") {
  // Note [vector lanes per level]: a Vec wider than the level's registers compares and selects one lane at a time.
  each_level([] {
    const int lanes = isa::dispatch_lanes([]<int L>() ETRT_ISA_INLINE { return L; });
#ifdef ETRT_ISA_X86
    const int expected = isa::level() >= isa::kAvx512 ? 16 : isa::level() == isa::kAvx2 ? 8 : 4;
#else
    const int expected = 4;  // NEON's 128-bit registers
#endif
    CHECK(lanes == expected);
    // sigmoid_blocks takes whole blocks of that width: 16 values as 16 / L calls of L give sigmoid_all's bits.
    std::vector<float> x(16), y(16), z(16);
    for (size_t i = 0; i < x.size(); ++i) x[i] = -4.f + 0.5f * static_cast<float>(i);
    sigmoid_all(x.data(), y.data(), 16, [](const auto& v) ETRT_ISA_INLINE { return v; });
    const auto as_is = [](const auto& v) ETRT_ISA_INLINE { return v; };
    isa::dispatch_lanes([&]<int L>() ETRT_ISA_INLINE {
      for (int i = 0; i < 16; i += L) sigmoid_blocks(x.data() + i, z.data() + i, L, as_is);
    });
    CHECK(std::memcmp(y.data(), z.data(), sizeof(float) * 16) == 0);
  });
}
