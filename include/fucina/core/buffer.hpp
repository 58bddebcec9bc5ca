#pragma once
// A Buffer is a refcounted block of bytes; BufferRef is its intrusive handle.
//
// Note [Buffer refcount]: increments are relaxed (a new reference is always made from
// an existing one); the decrement is acq_rel so the thread that drops the last
// reference sees every write made through the others before the block is recycled.
// At zero the owner hook runs exactly once: a pooled buffer goes back to its pool, a
// borrowed one (e.g. a view over an mmap) runs its release callback or nothing.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace fucina {

class BufferPool;

struct Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;     // usable bytes (the size class, >= requested)
  BufferPool* pool = nullptr;  // null: not pooled
  void (*on_release)(Buffer*) = nullptr;  // for non-pooled buffers; must free the Buffer
  void* user = nullptr;                   // context for on_release
  std::atomic<std::uint32_t> refs{0};
};

void release_buffer(Buffer* b) noexcept;  // refcount reached zero

class BufferRef {
 public:
  BufferRef() = default;
  explicit BufferRef(Buffer* b) noexcept : b_(b) { retain(); }  // adopts one new reference
  BufferRef(const BufferRef& o) noexcept : b_(o.b_) { retain(); }
  BufferRef(BufferRef&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
  BufferRef& operator=(const BufferRef& o) noexcept {
    if (this != &o) {
      BufferRef tmp(o);
      swap(tmp);
    }
    return *this;
  }
  BufferRef& operator=(BufferRef&& o) noexcept {
    BufferRef tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~BufferRef() { reset(); }

  void reset() noexcept {
    if (b_ && b_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) release_buffer(b_);
    b_ = nullptr;
  }
  void swap(BufferRef& o) noexcept { std::swap(b_, o.b_); }
  Buffer* get() const noexcept { return b_; }
  explicit operator bool() const noexcept { return b_ != nullptr; }
  std::byte* bytes() const noexcept { return static_cast<std::byte*>(b_->data); }
  std::uint32_t use_count() const noexcept { return b_ ? b_->refs.load(std::memory_order_relaxed) : 0; }

 private:
  void retain() noexcept {
    if (b_) b_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  Buffer* b_ = nullptr;
};

// Wraps memory the caller owns (e.g. an mmap'd weight). `on_release(user)` runs when the
// last reference goes; pass nullptr for memory that outlives every tensor over it.
BufferRef borrow_buffer(void* data, std::size_t bytes, void (*on_release)(void*) = nullptr,
                        void* user = nullptr);

}  // namespace fucina
