// Intra-op parallelism for the large kernels (GEMM-based linear, matmul and convolution).
//
// No pool lives between calls: a parallel region starts its helper threads and joins them before returning, so
// there is no global object with a lifetime to manage and nothing runs after the call. Regions are only opened for
// work large enough (milliseconds) that starting a thread (tens of microseconds) does not matter.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <vector>

namespace etrt::kernels {

namespace detail {
inline int default_thread_count() {
  if (const char* v = std::getenv("ETRT_NUM_THREADS")) {
    const int n = std::atoi(v);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw, 1u, 16u));
}
}  // namespace detail

/// Threads a parallel region may use (ETRT_NUM_THREADS, else the hardware's, at most 16).
inline std::atomic<int>& thread_count() {
  static std::atomic<int> n{detail::default_thread_count()};
  return n;
}

/// Runs f(begin, end) over [0, n) split into at most thread_count() chunks whose sizes are multiples of `grain`.
/// The calling thread runs the last chunk. If a thread cannot be started, its chunk runs on the caller.
template <class F>
inline void parallel_for(int64_t n, int64_t grain, F&& f) {
  const int64_t chunks_max = grain > 0 ? (n + grain - 1) / grain : 1;
  const int threads = static_cast<int>(std::min<int64_t>(thread_count().load(), chunks_max));
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t per = (chunks_max + threads - 1) / threads * grain;
  std::vector<std::thread> workers;
  std::vector<std::pair<int64_t, int64_t>> inline_ranges;
  workers.reserve(static_cast<size_t>(threads - 1));
  int64_t begin = 0;
  for (int t = 0; t < threads - 1 && begin < n; ++t) {
    const int64_t end = std::min(n, begin + per);
    try {
      workers.emplace_back([&f, begin, end] { f(begin, end); });
    } catch (const std::system_error&) {
      inline_ranges.emplace_back(begin, end);
    }
    begin = end;
  }
  if (begin < n) f(begin, n);
  for (auto [b, e] : inline_ranges) f(b, e);
  for (auto& w : workers) w.join();
}

}  // namespace etrt::kernels
