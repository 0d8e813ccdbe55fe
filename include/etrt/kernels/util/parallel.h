// Intra-op parallelism for the large kernels (GEMM-based linear, matmul and convolution).
//
// No global pool: a parallel region either runs on the WorkerPool made current by a PoolScope (the XNNPACK delegate
// makes its calling thread's pool current for its execute()), or starts its helper threads and joins them before
// returning. A thread's pool is joined when that thread exits. Regions are only opened for
// work large enough that a wake-up (microseconds) or a thread start (tens of microseconds) does not matter.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>  // getpid: a pool's workers do not survive fork()

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

/// Threads kept between the parallel regions of one owner, so that a region costs a wake-up rather than a thread
/// start. Workers start with the first region that wants them (thread_count() - 1; more start when the count is
/// raised later, and surplus ones find no chunk) and are joined when the pool is destroyed. Between regions a worker
/// polls for the next one for kWorkerSpin (a network's layers follow each other within microseconds; an LLM decode
/// step runs a few hundred microseconds of small serial nodes between its large products; and a worker woken from
/// its sleep by the futex joins a region tens of microseconds late, when most of it is done), then sleeps on a
/// condition variable; the caller polls for the claimed chunks to finish for about kSpin iterations before it
/// sleeps. A region that finds the pool busy (a region inside a region) or finds itself in a forked child (whose
/// copy of the pool has no threads) runs on the caller instead.
///
/// Note [chunks, not workers]: the caller waits for the region's chunks, never for the workers. On a loaded machine
/// a worker may not be scheduled for milliseconds; the caller then runs every chunk itself and returns at once,
/// instead of waiting for a descheduled worker to wake up only to find nothing left. That needs a chunk to be
/// claimable only while its own region is the current one: the region's number, its chunk count and the next chunk
/// share one atomic word (`claim_`), so a worker that wakes late cannot claim a chunk of a region it did not see
/// published, and the region's other fields stay unchanged while any of its chunks is unfinished.
class WorkerPool {
 public:
  WorkerPool() = default;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) {
      if (owner_pid_ == getpid()) w.join();
      else w.detach();  // a forked child: the thread exists only in the parent
    }
  }

  /// Runs f(b, e) for each chunk [i * per, min(n, (i + 1) * per)) on the caller and the workers; false when the pool
  /// cannot take the region (then nothing ran). Exceptions are rethrown on the caller once every chunk is done.
  template <class F>
  bool run(int64_t n, int64_t per, int threads, F& f) {
    const int64_t chunks = (n + per - 1) / per;
    if (chunks > kMaxChunks) return false;
    if (busy_.exchange(true)) return false;
    struct Release {
      std::atomic<bool>& b;
      ~Release() { b.store(false); }
    } release{busy_};
    if (!workers_.empty() && owner_pid_ != getpid()) return false;
    if (static_cast<int>(workers_.size()) < threads - 1) start(threads - 1 - static_cast<int>(workers_.size()));
    if (workers_.empty()) return false;
    job_ = const_cast<void*>(static_cast<const void*>(&f));
    invoke_ = [](void* job, int64_t b, int64_t e) { (*static_cast<F*>(job))(b, e); };
    n_ = n;
    per_ = per;
    error_ = nullptr;
    finished_.store(0, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);  // a worker checks claim_ under the lock before it sleeps
      region_ = (region_ + 1) & kRegionMask;
      claim_.store(published(region_, chunks), std::memory_order_release);  // publishes the fields above
    }
    wake_.notify_all();
    work();
    for (int spin = 0; spin < kSpin && finished_.load(std::memory_order_acquire) != chunks; ++spin) pause();
    if (finished_.load(std::memory_order_acquire) != chunks) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) == chunks; });
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return true;
  }

 private:
  // claim_: bits 0-15 the next chunk, 16-31 the region's chunk count, 32-63 the region's number.
  static constexpr int64_t kMaxChunks = 0xffff;
  static constexpr uint64_t kRegionMask = 0xffffffffu;
  static constexpr uint64_t published(uint64_t region, int64_t chunks) {
    return region << 32 | static_cast<uint64_t>(chunks) << 16;
  }
  static constexpr uint64_t region_of(uint64_t c) { return c >> 32; }
  static constexpr int64_t chunks_of(uint64_t c) { return static_cast<int64_t>((c >> 16) & 0xffff); }
  static constexpr int64_t next_of(uint64_t c) { return static_cast<int64_t>(c & 0xffff); }
  static constexpr bool claimable(uint64_t c) { return next_of(c) < chunks_of(c); }

  void start(int count) {
    owner_pid_ = getpid();
    for (int i = 0; i < count; ++i) {
      try {
        workers_.emplace_back([this] { loop(); });
      } catch (...) {  // fewer workers: the caller takes their chunks
        break;
      }
    }
  }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  void loop() {
    uint64_t seen = region_of(claim_.load(std::memory_order_acquire));
    const auto ready = [&] {
      const uint64_t c = claim_.load(std::memory_order_acquire);
      return region_of(c) != seen || claimable(c);
    };
    for (;;) {
      const auto give_up = std::chrono::steady_clock::now() + kWorkerSpin;
      while (!ready() && std::chrono::steady_clock::now() < give_up)
        for (int spin = 0; spin < 64 && !ready(); ++spin) pause();
      if (!ready()) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || ready(); });
        if (stop_) return;
      }
      seen = region_of(claim_.load(std::memory_order_acquire));
      work();
    }
  }

  // Claims and runs chunks of the current region until none is left (Note [chunks, not workers]).
  void work() noexcept {
    uint64_t c = claim_.load(std::memory_order_acquire);
    for (;;) {
      if (!claimable(c)) return;
      if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      const int64_t chunks = chunks_of(c);
      const int64_t b = next_of(c) * per_;
      try {
        invoke_(job_, b, std::min(n_, b + per_));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
      // The last chunk's end lets the caller return and publish the next region: read nothing of this one after it.
      if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller checks finished_ under the lock before it sleeps
        done_.notify_one();
        return;
      }
      c = claim_.load(std::memory_order_acquire);
    }
  }

  std::mutex mu_, error_mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  pid_t owner_pid_ = 0;
  std::atomic<bool> busy_{false};
  static constexpr int kSpin = 20000;  // about 50-200 us of pause instructions
  static constexpr std::chrono::microseconds kWorkerSpin{1000};
  bool stop_ = false;
  uint64_t region_ = 0;  // written by the caller only
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> finished_{0};
  void* job_ = nullptr;
  void (*invoke_)(void*, int64_t, int64_t) = nullptr;
  int64_t n_ = 0, per_ = 1;
  std::exception_ptr error_;
};

namespace detail {
inline WorkerPool*& current_pool() {
  thread_local WorkerPool* pool = nullptr;
  return pool;
}
}  // namespace detail

/// The pool of the calling thread, made on its first use and joined when the thread exits: every graph a thread
/// executes shares its workers, so a program split into many delegated graphs still runs one worker per extra core
/// (a pool per graph would leave one polling worker per graph).
inline WorkerPool& thread_pool() {
  thread_local WorkerPool pool;
  return pool;
}

/// The least work (multiply-adds, or elements times taps) worth splitting across threads: with a pool current a
/// region costs about a microsecond, without one each region starts its threads (tens of microseconds).
inline int64_t min_parallel_work() { return detail::current_pool() ? int64_t{1} << 16 : int64_t{1} << 22; }

/// Makes `pool` the one parallel_for uses on this thread until the scope ends.
class PoolScope {
 public:
  explicit PoolScope(WorkerPool& pool) : previous_(std::exchange(detail::current_pool(), &pool)) {}
  ~PoolScope() { detail::current_pool() = previous_; }
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  WorkerPool* previous_;
};

/// Runs f(begin, end) over [0, n) split into at most thread_count() chunks whose sizes are multiples of `grain`, on
/// the current WorkerPool when there is one, else on threads started for the region. Started threads: the calling
/// thread runs the last chunk, and a chunk whose thread cannot be started runs on the caller.
///
/// An exception thrown by a chunk (an allocation inside a kernel, say) is caught on its thread; once every chunk is
/// done, the first one is rethrown on the caller, where the method's boundary turns it into an error value (a
/// joinable std::thread must never be destroyed by unwinding: that calls std::terminate).
template <class F>
inline void parallel_for(int64_t n, int64_t grain, F&& f) {
  const int64_t chunks_max = grain > 0 ? (n + grain - 1) / grain : 1;
  const int threads = static_cast<int>(std::min<int64_t>(thread_count().load(), chunks_max));
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t per = (chunks_max + threads - 1) / threads * grain;
  if (WorkerPool* pool = detail::current_pool(); pool && pool->run(n, per, threads, f)) return;
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

/// As parallel_for, but in chunks of `grain` that the threads claim one at a time: a thread that starts late (a
/// worker woken from its sleep after a long serial stretch) takes fewer chunks, instead of the caller finishing its
/// half and then waiting for the worker's. For loops of many chunks of similar cost (the column panels of one
/// matrix-vector product). Without a pool, or with more chunks than the pool takes, it is parallel_for.
template <class F>
inline void parallel_chunks(int64_t n, int64_t grain, F&& f) {
  const int threads = thread_count().load();
  if (threads <= 1 || n <= grain) {
    f(int64_t{0}, n);
    return;
  }
  if (WorkerPool* pool = detail::current_pool(); pool && pool->run(n, std::max<int64_t>(grain, 1), threads, f)) return;
  parallel_for(n, grain, f);
}

/// Runs f(begin, end) over the n elements of an elementwise loop, on the calling thread while the loop is short,
/// else split across threads in chunks of whole 64-element runs. `cost`: the work of one element in multiply-adds,
/// roughly, against min_parallel_work().
template <class F>
inline void parallel_elements(int64_t n, int64_t cost, F&& f) {
  if (n * cost < min_parallel_work() || thread_count().load() <= 1) {
    f(int64_t{0}, n);
    return;
  }
  parallel_for(n, 64, f);
}

}  // namespace etrt::kernels
