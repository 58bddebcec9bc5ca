#include "fucina/core/thread_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

#include "fucina/core/error.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define FUCINA_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define FUCINA_CPU_RELAX() asm volatile("yield")
#else
#define FUCINA_CPU_RELAX() ((void)0)
#endif

namespace fucina {

namespace {
thread_local bool t_inside_task = false;
constexpr int kSpinBeforePark = 1 << 14;
}  // namespace

int ThreadPool::hardware_threads() noexcept {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = hardware_threads();
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  // Each worker starts from the generation seen here, not from whatever it reads once
  // scheduled: a dispatch (or the destructor) may bump it before the thread first runs.
  const std::uint32_t gen = generation_.load(std::memory_order_relaxed);
  for (int i = 1; i < n_threads; ++i) {
    try {
      workers_.emplace_back([this, gen] { worker_loop(gen); });
    } catch (const std::system_error& e) {
      // The OS refused a thread (process or memory limits): stop the ones that started,
      // or they would wait forever on a condition variable this object is about to destroy.
      stop_workers();
      fail(ErrorCode::Io, fmt::format("[thread_pool] cannot start worker thread {} of {}: {} (use fewer threads)", i,
                                      n_threads - 1, e.what()));
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() noexcept {
  stop_.store(true, std::memory_order_release);
  publish();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

// Bumps the generation under the park mutex so a worker between its predicate check
// and its wait cannot miss the wake-up. (std::atomic::wait in libstdc++ 12 was seen to
// miss notify_all here, hence a condition variable.)
void ThreadPool::publish() {
  {
    std::lock_guard lk(park_mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  park_cv_.notify_all();
}

void ThreadPool::drain() {
  const bool was_inside = t_inside_task;
  t_inside_task = true;
  for (;;) {
    std::int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= job_n_) break;
    if (failed_.load(std::memory_order_relaxed)) continue;
    try {
      job_fn_(job_ctx_, i);
    } catch (...) {
      std::lock_guard lk(error_mu_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }
  t_inside_task = was_inside;
}

void ThreadPool::worker_loop(std::uint32_t seen) {
  for (;;) {
    std::uint32_t g = seen;
    for (int spin = 0; spin < kSpinBeforePark; ++spin) {
      g = generation_.load(std::memory_order_acquire);
      if (g != seen) break;
      FUCINA_CPU_RELAX();
    }
    if (g == seen) {
      std::unique_lock lk(park_mu_);
      park_cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    if (!enter(g)) continue;  // woke too late: the job is closed (or already replaced)
    drain();
    exited_.fetch_add(1, std::memory_order_acq_rel);
  }
}

// Joins job `g` unless the dispatcher has closed it. Only a worker that entered may touch
// the job state, and the dispatcher waits for exactly those: a descheduled worker that
// wakes late costs the dispatcher nothing.
bool ThreadPool::enter(std::uint32_t g) {
  std::uint64_t v = entry_.load(std::memory_order_acquire);
  for (;;) {
    if ((v >> 32) != g || (v & kEntryClosed) != 0) return false;
    if (entry_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      return true;
  }
}

void ThreadPool::run(std::int64_t n_tasks, void* ctx, TaskFn fn) {
  // Serial when nested, when there are no workers, for a single task, or when another
  // thread holds the pool.
  std::unique_lock lk(dispatch_, std::defer_lock);
  if (t_inside_task || workers_.empty() || n_tasks == 1 || !lk.try_lock()) {
    const bool was_inside = t_inside_task;
    t_inside_task = true;
    try {
      for (std::int64_t i = 0; i < n_tasks; ++i) fn(ctx, i);
    } catch (...) {
      t_inside_task = was_inside;
      throw;
    }
    t_inside_task = was_inside;
    return;
  }
  job_ctx_ = ctx;
  job_fn_ = fn;
  job_n_ = n_tasks;
  error_ = nullptr;
  failed_.store(false, std::memory_order_relaxed);
  next_.store(0, std::memory_order_relaxed);
  exited_.store(0, std::memory_order_relaxed);
  // The job opens under the generation publish() is about to set (only run() and the
  // destructor bump it, both serialized with this).
  const std::uint32_t g = generation_.load(std::memory_order_relaxed) + 1;
  entry_.store(static_cast<std::uint64_t>(g) << 32, std::memory_order_relaxed);
  publish();
  drain();
  // Join: close the job to latecomers, then wait for the workers inside it to leave
  // before its state is reused.
  const std::uint64_t entered = entry_.fetch_or(kEntryClosed, std::memory_order_acq_rel) & (kEntryClosed - 1);
  for (int spin = 0; static_cast<std::uint64_t>(exited_.load(std::memory_order_acquire)) != entered; ++spin) {
    if (spin > (1 << 12)) std::this_thread::yield();
    else FUCINA_CPU_RELAX();
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace fucina
