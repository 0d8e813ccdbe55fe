// One core's float multiply-add peak, measured: twelve independent chains of vector FMAs (enough to cover the
// instruction's latency on current x86 cores), 512-bit ("zmm") or 256-bit ("ymm") by the argument; prints GFLOP/s.
// bench/run.py compiles and runs it to report the f32 GEMM as a fraction of what the core does, rather than of the
// clock /proc/cpuinfo reports (a virtual machine's base clock, below the boost clock the core runs at).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

constexpr long kIters = 50'000'000;

// Twelve chains with distinct starting values (equal ones would be merged into one by the compiler).
#define CHAINS(SET, FMA, ADD, STORE, VT, LANES)                                                        \
  VT a0 = SET(1.00f), a1 = SET(1.01f), a2 = SET(1.02f), a3 = SET(1.03f), a4 = SET(1.04f),             \
     a5 = SET(1.05f), a6 = SET(1.06f), a7 = SET(1.07f), a8 = SET(1.08f), a9 = SET(1.09f),             \
     a10 = SET(1.10f), a11 = SET(1.11f);                                                                \
  const VT b = SET(0.999999f), c = SET(1e-6f);                                                         \
  double best = 0;                                                                                     \
  for (int rep = 0; rep < 5; ++rep) {                                                                  \
    const auto t0 = std::chrono::steady_clock::now();                                                 \
    for (long i = 0; i < kIters; ++i) {                                                                \
      a0 = FMA(a0, b, c); a1 = FMA(a1, b, c); a2 = FMA(a2, b, c); a3 = FMA(a3, b, c);                  \
      a4 = FMA(a4, b, c); a5 = FMA(a5, b, c); a6 = FMA(a6, b, c); a7 = FMA(a7, b, c);                  \
      a8 = FMA(a8, b, c); a9 = FMA(a9, b, c); a10 = FMA(a10, b, c); a11 = FMA(a11, b, c);              \
    }                                                                                                  \
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();    \
    best = std::max(best, 2.0 * LANES * 12 * kIters / s / 1e9);                                        \
  }                                                                                                    \
  float sink[LANES];                                                                                   \
  STORE(sink, ADD(ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))),                  \
                  ADD(ADD(a8, a9), ADD(a10, a11))));                                                   \
  std::fprintf(stderr, "%g\n", static_cast<double>(sink[0])); /* keeps the chains live */             \
  return best;

__attribute__((target("avx512f"))) static double zmm() {
  CHAINS(_mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps, __m512, 16)
}
__attribute__((target("avx2,fma"))) static double ymm() {
  CHAINS(_mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps, __m256, 8)
}

int main(int argc, char** argv) {
  std::printf("%.2f\n", argc > 1 && std::strcmp(argv[1], "zmm") == 0 ? zmm() : ymm());
  return 0;
}
