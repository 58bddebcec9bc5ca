#pragma once
// The execution context: the worker pool and the buffer pool every eager op draws its
// results from. Non-copyable, non-movable (buffers point back at its pool).
#include <cstddef>
#include <memory>

#include "fucina/core/buffer_pool.hpp"
#include "fucina/core/raw_tensor.hpp"
#include "fucina/core/thread_pool.hpp"

namespace fucina {

struct ContextOptions {
  int threads = 0;                                      // 0: all cores
  std::size_t max_cached_bytes = std::size_t{1} << 30;  // pool cache cap
};

class Context {
 public:
  explicit Context(ContextOptions opts = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  ThreadPool& pool() noexcept { return *threads_; }
  BufferPool& buffers() noexcept { return *buffers_; }
  int threads() const noexcept { return threads_->size(); }
  // Replaces the source of result buffers (nullptr restores the pool). For measuring
  // alternatives only; the allocator must outlive every tensor drawn from it.
  void set_allocator(Allocator* a) noexcept { alloc_ = a ? a : buffers_; }

  // A contiguous, uninitialised tensor drawn from the pool.
  RawTensor empty(DType dtype, int rank, const Dims& shape);

 private:
  BufferPool* buffers_;  // leaked on purpose if buffers are still alive at teardown
  Allocator* alloc_;
  std::unique_ptr<ThreadPool> threads_;
};

}  // namespace fucina
