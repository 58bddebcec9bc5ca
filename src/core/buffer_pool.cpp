#include "fucina/core/buffer_pool.hpp"

#include <algorithm>
#include <bit>
#include <new>

namespace fucina {

namespace {
constexpr std::size_t kAlign = 64;
constexpr std::size_t kPage = 4096;
// A free block up to twice the request's class, or up to kServeExtra larger, serves it.
constexpr std::size_t kServeUpTo = 2, kServeExtra = std::size_t{1} << 20;

void free_block(Buffer* b) noexcept {
  ::operator delete(b->data, std::align_val_t{kAlign});
  delete b;
}

struct Borrowed {
  void (*fn)(void*);
  void* user;
};
}  // namespace

void release_buffer(Buffer* b) noexcept {
  if (b->pool) {
    b->pool->reclaim(b);
  } else if (b->on_release) {
    b->on_release(b);
  } else {
    delete b;
  }
}

BufferRef borrow_buffer(void* data, std::size_t bytes, void (*on_release)(void*), void* user) {
  auto* b = new Buffer;
  b->data = data;
  b->bytes = bytes;
  if (on_release) {
    b->user = new Borrowed{on_release, user};
    b->on_release = [](Buffer* self) {
      auto* br = static_cast<Borrowed*>(self->user);
      br->fn(br->user);
      delete br;
      delete self;
    };
  }
  return BufferRef(b);
}

std::size_t BufferPool::size_class(std::size_t bytes) {
  if (bytes <= 64) return 64;
  if (bytes <= kPage) return std::bit_ceil(bytes);
  return (bytes + kPage - 1) / kPage * kPage;
}

BufferPool::BufferPool(std::size_t max_cached_bytes) : max_cached_(max_cached_bytes) {}

BufferPool::~BufferPool() { trim(); }

BufferRef BufferPool::acquire(std::size_t bytes) {
  const std::size_t cls = size_class(bytes);
  {
    std::lock_guard lk(mu_);
    // The request's class, else the smallest cached block that serves it (Note [Pool size classes]).
    const std::size_t most = cls <= kPage ? cls : std::max(cls * kServeUpTo, cls + kServeExtra);
    auto it = free_.lower_bound(cls);
    while (it != free_.end() && it->first <= most && it->second.empty()) ++it;
    if (it != free_.end() && it->first <= most) {
      Buffer* b = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= b->bytes;
      ++stats_.hits;
      ++stats_.outstanding;
      stats_.outstanding_bytes += b->bytes;
      stats_.peak_outstanding = std::max(stats_.peak_outstanding, stats_.outstanding);
      stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.outstanding_bytes);
      return BufferRef(b);
    }
    ++stats_.misses;
    ++stats_.outstanding;
    stats_.outstanding_bytes += cls;
    stats_.peak_outstanding = std::max(stats_.peak_outstanding, stats_.outstanding);
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.outstanding_bytes);
  }
  // Allocate outside the lock; never value-initialise (pages commit lazily).
  auto* b = new Buffer;
  try {
    b->data = ::operator new(cls, std::align_val_t{kAlign});
  } catch (...) {
    delete b;
    std::lock_guard lk(mu_);
    --stats_.outstanding;
    stats_.outstanding_bytes -= cls;
    throw;
  }
  b->bytes = cls;
  b->pool = this;
  return BufferRef(b);
}

void BufferPool::reclaim(Buffer* b) noexcept {
  bool keep = false;
  {
    std::lock_guard lk(mu_);
    --stats_.outstanding;
    stats_.outstanding_bytes -= b->bytes;
    if (stats_.cached_bytes + b->bytes <= max_cached_) {
      try {
        free_[b->bytes].push_back(b);
        stats_.cached_bytes += b->bytes;
        keep = true;
      } catch (...) {
        keep = false;
      }
    }
  }
  if (!keep) free_block(b);
}

PoolStats BufferPool::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void BufferPool::reset_peak() {
  std::lock_guard lk(mu_);
  stats_.peak_outstanding = stats_.outstanding;
  stats_.peak_bytes = stats_.outstanding_bytes;
}

void BufferPool::trim() {
  std::lock_guard lk(mu_);
  for (auto& [cls, v] : free_)
    for (Buffer* b : v) free_block(b);
  free_.clear();
  stats_.cached_bytes = 0;
}

}  // namespace fucina
