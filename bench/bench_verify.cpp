// What a speculative verification step costs (Note [Speculative decoding]): one
// forward_as_decode of `rows` rows (the unrun token and rows - 1 drafted ones) after a
// 250-token prompt, the rows' K/V rolled back after each iteration, against rows = 1 (a
// plain decode step). Note [Draft length]'s c, the cost of an extra row in plain steps, is
// (time(rows) / time(1) - 1) / (rows - 1).
//   verify/threads:T/rows:R   wall time per forward (and CPU time: the pool's spinning counts)
// The model: FUCINA_VERIFY_MODEL, default models/fucina-default.gguf.
// Run: build/release/bench/bench_verify [--benchmark_filter=threads:2].
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fucina/fucina.hpp"
#include "fucina/model/model.hpp"

namespace {

using namespace fucina;

const model::Model& bench_model() {
  static const model::Model m = [] {
    const char* path = std::getenv("FUCINA_VERIFY_MODEL");
    return model::Model::load(path ? path : FUCINA_BENCH_DIR "/../models/fucina-default.gguf");
  }();
  return m;
}

void bench_verify(benchmark::State& state) {
  const auto threads = static_cast<int>(state.range(0));
  const std::int64_t rows = state.range(1), prompt = 250;
  const model::Model& m = bench_model();
  Context ctx({.threads = threads});
  auto cache = m.new_cache(prompt + 64);
  const std::int32_t vocab = static_cast<std::int32_t>(m.config().n_vocab);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(prompt + rows));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7919 + 13) % static_cast<std::size_t>(vocab));
  (void)m.prefill(ctx, cache, std::span(ids).first(static_cast<std::size_t>(prompt)));
  const auto step = std::span(ids).subspan(static_cast<std::size_t>(prompt));
  for (auto _ : state) {
    if (rows == 1)
      benchmark::DoNotOptimize(m.forward(ctx, cache, step).data().data());
    else
      benchmark::DoNotOptimize(m.forward_as_decode(ctx, cache, step).data().data());
    cache.truncate(prompt);
  }
}

const int kRegistered = [] {
  for (const int threads : {1, 2})
    for (const int rows : {1, 2, 4, 8, 16})
      benchmark::RegisterBenchmark("verify", bench_verify)
          ->Args({threads, rows})
          ->ArgNames({"threads", "rows"})
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
