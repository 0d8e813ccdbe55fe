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
#include <exception>
#include <mutex>
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
///
/// An exception thrown by a chunk (an allocation inside a kernel, say) is caught on its thread; once every worker
/// has joined, the first one is rethrown on the caller, where the method's boundary turns it into an error value
/// (a joinable std::thread must never be destroyed by unwinding: that calls std::terminate).
template <class F>
inline void parallel_for(int64_t n, int64_t grain, F&& f) {
  const int64_t chunks_max = grain > 0 ? (n + grain - 1) / grain : 1;
  const int threads = static_cast<int>(std::min<int64_t>(thread_count().load(), chunks_max));
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t per = (chunks_max + threads - 1) / threads * grain;
  std::mutex error_mu;
  std::exception_ptr first_error;
  const auto guarded = [&](int64_t b, int64_t e) noexcept {
    try {
      f(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!first_error) first_error = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  std::vector<std::pair<int64_t, int64_t>> inline_ranges;
  int64_t begin = 0;
  try {
    workers.reserve(static_cast<size_t>(threads - 1));
    for (int t = 0; t < threads - 1 && begin < n; ++t) {
      const int64_t end = std::min(n, begin + per);
      try {
        workers.emplace_back([&guarded, begin, end] { guarded(begin, end); });
      } catch (const std::system_error&) {
        inline_ranges.emplace_back(begin, end);
      }
      begin = end;
    }
  } catch (...) {  // a thread or a list entry could not be allocated: the chunks not yet handed out run here
    guarded(begin, n);
    begin = n;
  }
  if (begin < n) guarded(begin, n);
  for (auto [b, e] : inline_ranges) guarded(b, e);
  for (auto& w : workers) w.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace etrt::kernels
