// The pooled, refcounted memory model (docs/MEMORY-MODEL.md).
#include <gtest/gtest.h>

#include "fucina/fucina.hpp"

using namespace fucina;

TEST(Memory, ReleasedBufferComesBackAtSameAddress) {
  Context ctx({.threads = 1});
  auto x = Tensor<"a", "b">::ones(ctx, {64, 64});
  const void* addr;
  {
    auto y = exp(ctx, x);
    addr = y.raw().buf.get()->data;
  }
  auto z = tanh(ctx, x);
  EXPECT_EQ(z.raw().buf.get()->data, addr);
}

TEST(Memory, SixteenOpChainPeaksAtThreeBuffers) {
  Context ctx({.threads = 2});
  auto x = Tensor<"batch", "in">::randn(ctx, {32, 256}, 1);
  ctx.buffers().reset_peak();
  {
    auto h = x;
    for (int i = 0; i < 16; ++i) {
      h = i % 2 ? tanh(ctx, h) : mul(ctx, h, 0.5f);
    }
    EXPECT_EQ(h.size<"in">(), 256);
  }
  const PoolStats s = ctx.buffers().stats();
  EXPECT_LE(s.peak_outstanding, 3u);
  EXPECT_EQ(s.outstanding, 1u);  // only x
}

TEST(Memory, NoLeakAtTeardownAndCacheCap) {
  Context ctx({.threads = 1, .max_cached_bytes = 64 * 1024});
  {
    auto a = Tensor<"n">::zeros(ctx, {1 << 16});  // 256 KiB: above the cap, freed on release
    auto b = Tensor<"n">::zeros(ctx, {1024});
  }
  PoolStats s = ctx.buffers().stats();
  EXPECT_EQ(s.outstanding, 0u);
  EXPECT_LE(s.cached_bytes, 64u * 1024u);
  EXPECT_EQ(s.cached_bytes, 4096u);
}

// A batch step's buffers change size with its rows: a free block up to twice as large or up
// to 1 MiB larger serves the request (warm pages), a larger one does not (it would waste
// memory, or be missing for the large request it was made for).
TEST(Memory, NearlySameSizeReusesAFreeBlock) {
  BufferPool pool;
  const void* big;
  {
    BufferRef a = pool.acquire(1000 * 4096);
    big = a.get()->data;
  }
  {
    BufferRef b = pool.acquire(500 * 4096);  // 1000 <= 500 * 2
    EXPECT_EQ(b.get()->data, big);
    EXPECT_EQ(pool.stats().outstanding_bytes, 1000u * 4096u);
  }
  {
    BufferRef c = pool.acquire(499 * 4096);  // 1000 > 499 * 2 and > 499 + 256 (1 MiB): a new block
    EXPECT_NE(c.get()->data, big);
    EXPECT_EQ(pool.stats().hits, 1u);
  }
  const void* small;
  {
    BufferRef d = pool.acquire(40 * 4096);
    small = d.get()->data;
  }
  {
    BufferRef e = pool.acquire(3 * 4096);  // 40 <= 3 + 256: within 1 MiB
    EXPECT_EQ(e.get()->data, small);
  }
  const void* two_k;
  {
    BufferRef s = pool.acquire(2048);
    two_k = s.get()->data;
  }
  BufferRef t = pool.acquire(1000);  // up to 4 KiB: exact classes only (1024, not 2048)
  EXPECT_NE(t.get()->data, two_k);
}

TEST(Memory, SizeClasses) {
  EXPECT_EQ(BufferPool::size_class(1), 64u);
  EXPECT_EQ(BufferPool::size_class(65), 128u);
  EXPECT_EQ(BufferPool::size_class(4096), 4096u);
  EXPECT_EQ(BufferPool::size_class(4097), 8192u);
  EXPECT_EQ(BufferPool::size_class(3 * 4096 + 1), 4 * 4096u);
}

TEST(Memory, BorrowedBufferRunsReleaseHookOnce) {
  static int released = 0;
  std::vector<float> host{1, 2, 3};
  {
    RawTensor r;
    r.buf = borrow_buffer(host.data(), host.size() * 4, [](void*) { ++released; });
    r.rank = 1;
    r.shape[0] = 3;
    r.strides[0] = 1;
    Tensor<"x"> t(r);
    auto v = t.narrow<"x">(1, 2);
    EXPECT_EQ(v.to_vector(), (std::vector<float>{2, 3}));
  }
  EXPECT_EQ(released, 1);
}
