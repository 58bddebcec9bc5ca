// ThreadPool: every task runs exactly once, exceptions propagate, nesting and back-to-back
// dispatches work, a thread the OS refuses is a clear error rather than a hang.
#include "fucina/core/thread_pool.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <string>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "fucina/core/error.hpp"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FUCINA_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FUCINA_TEST_SANITIZED 1
#endif

namespace fucina {
namespace {

TEST(ThreadPool, SizeCountsTheCaller) {
  EXPECT_EQ(ThreadPool(1).size(), 1);
  EXPECT_EQ(ThreadPool(3).size(), 3);
  EXPECT_GE(ThreadPool(0).size(), 1);
}

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (std::int64_t n : {0, 1, 2, 3, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](std::int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
      for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "task " << i;
    }
  }
}

TEST(ThreadPool, ParallelRangeCoversEachIndexOnce) {
  ThreadPool pool(3);
  for (std::int64_t n : {1, 5, 100, 1001}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_range(n, 7, [&](std::int64_t b, std::int64_t e) {
      EXPECT_LT(b, e);
      for (std::int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

// Guided chunks: every index once, sizes never growing, none below min_chunk but the
// last, and a bounded count however small min_chunk is.
TEST(ThreadPool, ParallelGuidedCoversEachIndexOnceInShrinkingChunks) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (auto [n, min_chunk] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {0, 4}, {1, 4}, {3, 4}, {100, 1}, {352, 2}, {1001, 7}, {1000000, 1}}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex mu;
      std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
      pool.parallel_guided(n, min_chunk, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard lk(mu);
        chunks.emplace_back(b, e);
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
      std::sort(chunks.begin(), chunks.end());
      EXPECT_LE(chunks.size(), 128u);
      for (std::size_t c = 0; c < chunks.size(); ++c) {
        const std::int64_t len = chunks[c].second - chunks[c].first;
        EXPECT_GT(len, 0);
        if (c + 1 < chunks.size()) {
          EXPECT_GE(len, min_chunk) << "n=" << n << " chunk " << c;
          if (c + 2 < chunks.size()) {
            EXPECT_GE(len, chunks[c + 1].second - chunks[c + 1].first) << "n=" << n << " chunk " << c;
          }
        }
      }
      if (n >= 2 * threads * min_chunk && threads > 1 && n < 1000000) {
        EXPECT_GT(chunks.size(), static_cast<std::size_t>(threads)) << "n=" << n;
      }
    }
  }
}

TEST(ThreadPool, ExceptionPropagatesAndPoolStaysUsable) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(100, [](std::int64_t i) {
    if (i == 37) throw std::runtime_error("task 37");
  }), std::runtime_error);
  std::atomic<int> count{0};
  pool.parallel_for(50, [&](std::int64_t) { count.fetch_add(1); });
  EXPECT_EQ(count.load(), 50);
}

TEST(ThreadPool, SerialPoolPropagatesExceptions) {
  ThreadPool pool(1);
  EXPECT_THROW(pool.parallel_for(3, [](std::int64_t i) {
    if (i == 1) throw std::logic_error("x");
  }), std::logic_error);
}

TEST(ThreadPool, NestedParallelForRuns) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(8 * 16);
  pool.parallel_for(8, [&](std::int64_t i) {
    pool.parallel_for(16, [&](std::int64_t j) { hits[static_cast<size_t>(i * 16 + j)].fetch_add(1); });
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, ManyBackToBackDispatches) {
  ThreadPool pool(2);
  std::int64_t total = 0;
  std::vector<std::int64_t> slots(4);
  for (int round = 0; round < 20000; ++round) {
    pool.parallel_for(4, [&](std::int64_t i) { slots[static_cast<size_t>(i)] = round + i; });
    for (std::int64_t s : slots) total += s;
  }
  // sum over rounds of (4*round + 0+1+2+3)
  EXPECT_EQ(total, 4LL * (19999LL * 20000LL / 2) + 6LL * 20000LL);
}

TEST(ThreadPool, DispatchOrDestroyRightAfterConstruction) {
  // Workers may not have started yet: neither a job nor shutdown may be missed.
  for (int r = 0; r < 300; ++r) {
    ThreadPool idle(4);
  }
  for (int r = 0; r < 300; ++r) {
    ThreadPool pool(4);
    std::atomic<int> count{0};
    pool.parallel_for(8, [&](std::int64_t) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 8);
  }
}

TEST(ThreadPool, ConcurrentCallersFromTwoThreads) {
  ThreadPool pool(2);
  std::atomic<std::int64_t> sum{0};
  auto work = [&] {
    for (int r = 0; r < 200; ++r) pool.parallel_for(10, [&](std::int64_t i) { sum.fetch_add(i); });
  };
  std::thread t(work);
  work();
  t.join();
  EXPECT_EQ(sum.load(), 2 * 200 * 45);
}

// In a child whose address space leaves room for only a few thread stacks (RLIMIT_AS; as
// root RLIMIT_NPROC is not enforced), a 64-thread pool must throw fucina::Error naming the
// failed start after joining the workers it started. It used to wait forever in
// pthread_cond_destroy; a child still alive after a minute counts as that hang.
TEST(ThreadPool, RefusedThreadIsAnErrorNotAHang) {
#ifdef FUCINA_TEST_SANITIZED
  GTEST_SKIP() << "sanitizers reserve more address space than RLIMIT_AS leaves";
#else
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t room = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGE_SIZE)) + (48u << 20);
    const rlimit lim{room, room};
    if (pages == 0 || ::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
    try {
      ThreadPool pool(64);
    } catch (const Error& e) {
      ::_exit(std::string(e.what()).find("cannot start worker thread") != std::string::npos ? 0 : 4);
    } catch (...) {
      ::_exit(5);
    }
    ::_exit(6);  // every thread started: the limit did not bite
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 600 && done == 0; ++i) {
    done = ::waitpid(pid, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the pool hung after a refused thread";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "child died: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: setup, 4: wrong message, 5: not a fucina::Error, 6: no failure";
#endif
}

}  // namespace
}  // namespace fucina
