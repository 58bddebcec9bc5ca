#pragma once
// Size-bucketed buffer pool (see docs/MEMORY-MODEL.md).
//
// Note [Pool size classes]: requests round up to a power of two up to 4 KiB and to a
// multiple of 4 KiB above; each class keeps a LIFO free list, so a buffer released and
// requested again at the same size comes back at the same address (warm in cache). Above
// 4 KiB a request whose class has no free block takes the smallest free block at most twice
// its size or at most 1 MiB larger: a batch or speculative step changes its row count every
// step (a verification of 3, then 17, then 11 rows after a prompt of 229), and a fresh block
// costs a page fault per 4 KiB, ~10 us on this VM. With a quarter's slack, as before, the
// default model's copy task faulted ~940 times more in 266 tokens (~670 of them went with the
// factor of two, the rest with the 1 MiB; docs/BENCHMARK.md, issue 23 seventh part), and a
// fine-tuning run peaked 21-28% higher. The bound keeps a small request from taking a
// logits-sized block that a large one then has to allocate again.
// Cached (free) bytes are capped; a release past the cap frees the block instead.
// `outstanding` counts buffers handed out and not yet returned: it must be zero when the
// pool is destroyed (a non-zero count is a leak and is reported).
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "fucina/core/allocator.hpp"
#include "fucina/core/buffer.hpp"

namespace fucina {

struct PoolStats {
  std::size_t outstanding = 0;       // buffers handed out, not returned
  std::size_t peak_outstanding = 0;  // max of the above since reset_peak()
  std::size_t outstanding_bytes = 0;
  std::size_t peak_bytes = 0;
  std::size_t cached_bytes = 0;  // free blocks kept for reuse
  std::size_t hits = 0, misses = 0;
};

class BufferPool final : public Allocator {
 public:
  explicit BufferPool(std::size_t max_cached_bytes = std::size_t{1} << 30);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Uninitialised storage of at least `bytes` bytes, 64-byte aligned.
  BufferRef acquire(std::size_t bytes) override;
  PoolStats stats() const;
  void reset_peak();
  void trim();  // frees every cached block

  static std::size_t size_class(std::size_t bytes);

 private:
  friend void release_buffer(Buffer* b) noexcept;
  void reclaim(Buffer* b) noexcept;

  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<Buffer*>> free_;  // size class -> LIFO stack
  std::size_t max_cached_;
  PoolStats stats_;
};

}  // namespace fucina
