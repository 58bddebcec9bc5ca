#pragma once
// A persistent worker pool with one operation, parallel_for. The calling thread is
// participant 0; workers spin briefly on a generation counter, then park on a
// condition variable. Tasks are claimed with fetch_add, so which thread runs a task is
// unspecified: kernels must make results independent of that (one writer per output).
// A parallel_for issued from inside a task, or while another thread is dispatching,
// runs serially on the caller: nesting never deadlocks.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace fucina {

class ThreadPool {
 public:
  // n_threads: total participants including the caller (>= 1). 0 means all cores.
  // Throws fucina::Error (Io) when the OS refuses a thread; the started ones are joined first.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) for every i in [0, n_tasks). Rethrows the first exception a task threw.
  template <class F>
  void parallel_for(std::int64_t n_tasks, F&& fn) {
    if (n_tasks <= 0) return;
    using Fn = std::remove_reference_t<F>;
    auto call = [](void* p, std::int64_t i) { (*static_cast<Fn*>(p))(i); };
    run(n_tasks, const_cast<void*>(static_cast<const void*>(&fn)), call);
  }

  // Splits [0, n) into chunks of at least `grain` items, one task per chunk:
  // fn(begin, end). Chunk boundaries depend only on n, grain and size().
  template <class F>
  void parallel_range(std::int64_t n, std::int64_t grain, F&& fn) {
    if (n <= 0) return;
    std::int64_t chunks = std::max<std::int64_t>(1, std::min<std::int64_t>(n / std::max<std::int64_t>(grain, 1), size() * 4));
    std::int64_t step = (n + chunks - 1) / chunks;
    chunks = (n + step - 1) / step;
    parallel_for(chunks, [&](std::int64_t c) { fn(c * step, std::min(n, (c + 1) * step)); });
  }

  // Guided split of [0, n): chunks shrink from n / (2·size()) down to `min_chunk` items,
  // claimed largest first, so the threads finish together (the last chunk, the one a thread
  // may wait on alone, is small) without paying a claim per small chunk throughout.
  // fn(begin, end); boundaries depend only on n, min_chunk and size().
  template <class F>
  void parallel_guided(std::int64_t n, std::int64_t min_chunk, F&& fn) {
    if (n <= 0) return;
    min_chunk = std::max<std::int64_t>(min_chunk, 1);
    std::int64_t bounds[kMaxGuidedChunks + 1];
    int chunks = 0;
    bounds[0] = 0;
    const std::int64_t div = 2 * static_cast<std::int64_t>(size());
    for (std::int64_t b = 0; b < n; ++chunks) {
      const std::int64_t left = n - b;
      std::int64_t len = std::max(min_chunk, (left + div - 1) / div);
      if (chunks == kMaxGuidedChunks - 1) len = left;  // bounded: the rest in one chunk
      b += std::min(len, left);
      bounds[chunks + 1] = b;
    }
    parallel_for(chunks, [&](std::int64_t c) { fn(bounds[c], bounds[c + 1]); });
  }

  static int hardware_threads() noexcept;

 private:
  static constexpr int kMaxGuidedChunks = 128;
  using TaskFn = void (*)(void*, std::int64_t);
  void run(std::int64_t n_tasks, void* ctx, TaskFn fn);
  void worker_loop(std::uint32_t seen);  // seen: generation at construction
  void publish();  // starts a new generation and wakes parked workers
  void stop_workers() noexcept;  // wakes every worker to exit and joins it
  bool enter(std::uint32_t g);  // joins job g unless it is closed
  void drain();  // claims and runs tasks of the current job until none are left

  std::vector<std::thread> workers_;
  std::mutex dispatch_;
  std::atomic<std::uint32_t> generation_{0};
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  // Job membership: (generation << 32) | closed bit | number of workers that entered.
  static constexpr std::uint64_t kEntryClosed = std::uint64_t{1} << 31;
  std::atomic<std::uint64_t> entry_{0};
  std::atomic<int> exited_{0};  // entered workers that have left the current job
  std::atomic<bool> stop_{false};
  // Current job (published by the generation bump).
  void* job_ctx_ = nullptr;
  TaskFn job_fn_ = nullptr;
  std::int64_t job_n_ = 0;
  std::atomic<std::int64_t> next_{0};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::mutex error_mu_;
};

}  // namespace fucina
