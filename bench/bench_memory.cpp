// Pool vs arena for a 16-layer MLP forward (docs/MEMORY-MODEL.md): time per forward and
// peak bytes of live intermediates. The arena is the rejected design and lives only here:
// a bump allocator over one reserved block, reset after each forward; nothing is reused
// within a pass.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <new>
#include <vector>

#include "fucina/fucina.hpp"

using namespace fucina;

namespace {

class ArenaAllocator final : public Allocator {
 public:
  explicit ArenaAllocator(std::size_t capacity) : cap_(capacity) {
    base_ = static_cast<std::byte*>(::operator new(capacity, std::align_val_t{64}));
  }
  ~ArenaAllocator() override { ::operator delete(base_, std::align_val_t{64}); }
  BufferRef acquire(std::size_t bytes) override {
    const std::size_t need = (sizeof(Buffer) + 63) / 64 * 64 + (bytes + 63) / 64 * 64;
    if (used_ + need > cap_) throw std::bad_alloc();
    auto* b = new (base_ + used_) Buffer;  // header lives in the arena too
    b->data = base_ + used_ + (sizeof(Buffer) + 63) / 64 * 64;
    b->bytes = bytes;
    b->on_release = [](Buffer* self) { self->~Buffer(); };  // no reuse until reset()
    used_ += need;
    high_ = std::max(high_, used_);
    return BufferRef(b);
  }
  void reset() { used_ = 0; }
  std::size_t high_water() const { return high_; }

 private:
  std::byte* base_;
  std::size_t cap_, used_ = 0, high_ = 0;
};

constexpr int kLayers = 16;

struct Mlp {
  std::vector<Tensor<"out", "in">> w;
  std::vector<Tensor<"out">> b;
};

Mlp make_mlp(Context& ctx, std::int64_t width) {
  Mlp m;
  for (int l = 0; l < kLayers; ++l) {
    m.w.push_back(Tensor<"out", "in">::randn(ctx, {width, width}, 100 + l, 0.f, 1.f / std::sqrt(float(width))));
    m.b.push_back(Tensor<"out">::zeros(ctx, {width}));
  }
  return m;
}

// The natural RAII style: each intermediate dies when its handle is reassigned.
Tensor<"batch", "in"> forward(Context& ctx, const Mlp& m, const Tensor<"batch", "in">& x) {
  auto h = x;
  for (int l = 0; l < kLayers; ++l) {
    auto z = add(ctx, h.dot<"in">(ctx, m.w[l]), m.b[l]);
    h = tanh(ctx, z).rename<"out", "in">();
  }
  return h;
}

void BM_MlpForward_Pool(benchmark::State& st) {
  const std::int64_t batch = st.range(0), width = st.range(1);
  Context ctx({.threads = 2});
  Mlp m = make_mlp(ctx, width);
  auto x = Tensor<"batch", "in">::randn(ctx, {batch, width}, 1);
  const std::size_t base = ctx.buffers().stats().outstanding_bytes;
  ctx.buffers().reset_peak();
  for (auto _ : st) benchmark::DoNotOptimize(forward(ctx, m, x).raw().buf.get());
  st.counters["peak_MiB"] = double(ctx.buffers().stats().peak_bytes - base) / (1 << 20);
}

void BM_MlpForward_Arena(benchmark::State& st) {
  const std::int64_t batch = st.range(0), width = st.range(1);
  Context ctx({.threads = 2});
  Mlp m = make_mlp(ctx, width);
  auto x = Tensor<"batch", "in">::randn(ctx, {batch, width}, 1);
  ArenaAllocator arena(std::size_t{1} << 30);
  for (auto _ : st) {
    ctx.set_allocator(&arena);
    { benchmark::DoNotOptimize(forward(ctx, m, x).raw().buf.get()); }
    ctx.set_allocator(nullptr);
    arena.reset();
  }
  st.counters["peak_MiB"] = double(arena.high_water()) / (1 << 20);
}

}  // namespace

BENCHMARK(BM_MlpForward_Pool)->Args({64, 1024})->Args({512, 1024})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MlpForward_Arena)->Args({64, 1024})->Args({512, 1024})->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
