// The float packed GEMM (include/etrt/kernels/util/packed_gemm.h, what the XNNPACK delegate's 1x1 convolutions and
// fully-connected layers run) on each pointwise layer shape of torchvision's mobilenet_v2 at batch 1, with its
// ReLU6 clamp and bias, weights packed once, operands hot in cache: the speed the network's GEMMs can reach here,
// layer by layer, and the sum over the network (each shape times its count in the network). bench/run.py
// compiles it against include/ and runs it on one thread and on all cores:
//   gemm_shapes THREADS [LEVEL]      (LEVEL: isa::force_level, e.g. 1 for AVX2)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "etrt/kernels/util/packed_gemm.h"

using namespace etrt::kernels;

int main(int argc, char** argv) {
  thread_count() = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  if (argc > 2) isa::force_level = std::atoi(argv[2]);
  WorkerPool& pool = thread_pool();
  PoolScope scope(pool);
  // m (pixels) x k (input channels) x n (output channels), and how many layers of that shape mobilenet_v2 has.
  struct Shape {
    int64_t m, k, n, count;
  };
  const Shape shapes[] = {{12544, 32, 16, 1}, {12544, 16, 96, 1}, {3136, 96, 24, 1},  {3136, 24, 144, 2},
                          {3136, 144, 24, 1}, {784, 144, 32, 1},  {784, 32, 192, 3},  {784, 192, 32, 2},
                          {196, 192, 64, 1},  {196, 64, 384, 4},  {196, 384, 64, 3},  {196, 384, 96, 1},
                          {196, 96, 576, 3},  {196, 576, 96, 2},  {49, 576, 160, 1},  {49, 160, 960, 3},
                          {49, 960, 160, 2},  {49, 960, 320, 1},  {49, 320, 1280, 1}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  double network = 0, flop = 0;
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
        c(static_cast<size_t>(s.m * s.n)), bias(static_cast<size_t>(s.n));
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    for (float& x : bias) x = u(rng);
    auto packed = gemm::pack_b(b.data(), s.n, 1, s.k, s.n);
    if (!packed) return 1;
    gemm::Epilogue ep;
    ep.bias = bias.data();
    ep.lo = 0.f;
    ep.hi = 6.f;
    const gemm::MatrixRows rows{a.data(), s.k};
    const int64_t reps = std::max<int64_t>(1, int64_t{200'000'000} / (s.m * s.k * s.n));
    double best = 1e9;
    for (int t = 0; t < 7; ++t) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t r = 0; r < reps; ++r) gemm::packed_gemm(s.m, *packed, ep, c.data(), s.n, rows);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                                static_cast<double>(reps));
    }
    const double f = 2.0 * static_cast<double>(s.m * s.k * s.n);
    std::printf("  %5lld x %4lld x %4lld  x%lld  %8.1f us  %6.1f GFLOP/s\n", static_cast<long long>(s.m),
                static_cast<long long>(s.k), static_cast<long long>(s.n), static_cast<long long>(s.count),
                best * 1e6, f / best / 1e9);
    network += best * static_cast<double>(s.count);
    flop += f * static_cast<double>(s.count);
  }
  std::printf("  network's pointwise layers: %.3f GFLOP in %.1f us, %.1f GFLOP/s\n", flop / 1e9, network * 1e6,
              flop / network / 1e9);
  return 0;
}
