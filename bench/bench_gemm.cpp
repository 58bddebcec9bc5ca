// Dense f32 GEMM: fucina::kernels::sgemm vs OpenBLAS cblas_sgemm, row-major C = A * B,
// reporting GFLOP/s (2*m*n*k per call). Run: build/<dir>/bench/bench_gemm
//
// OpenBLAS picks its kernels when the library loads and misdetects this CPU (Zen with
// AVX-512) as Haswell; the dev environment even exports OPENBLAS_CORETYPE=Haswell. So main()
// re-executes the binary with OPENBLAS_CORETYPE=SkylakeX (or $FUCINA_BENCH_OPENBLAS_CORETYPE)
// whenever the variable differs: the comparison is against OpenBLAS's AVX-512 kernels.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "fucina/core/thread_pool.hpp"
#include "fucina/kernels/gemm/sgemm.hpp"

#if defined(FUCINA_BENCH_OPENBLAS)
#include <cblas.h>
#endif

namespace {

using fucina::ThreadPool;
using fucina::kernels::GemmArgs;

struct Operands {
  std::int64_t m, n, k;
  bool trans_b;  // B stored n x k (the x * W^T layout of LLM weights)
  std::vector<float> a, b, c;
};

Operands make_operands(std::int64_t m, std::int64_t k, std::int64_t n, bool trans_b) {
  Operands o{m, n, k, trans_b, std::vector<float>(m * k), std::vector<float>(k * n), std::vector<float>(m * n)};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : o.a) x = dist(rng);
  for (auto& x : o.b) x = dist(rng);
  return o;
}

ThreadPool& pool_of(int threads) {
  static std::unique_ptr<ThreadPool> pools[3];
  if (!pools[threads]) pools[threads] = std::make_unique<ThreadPool>(threads);
  return *pools[threads];
}

void set_counters(benchmark::State& state, const Operands& o) {
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(o.m * o.n * o.k),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// Args: m, k, n, threads, trans_b.
void BM_fucina(benchmark::State& state) {
  Operands o = make_operands(state.range(0), state.range(1), state.range(2), state.range(4) != 0);
  ThreadPool& pool = pool_of(static_cast<int>(state.range(3)));
  GemmArgs g;
  g.m = o.m;
  g.n = o.n;
  g.k = o.k;
  g.a = o.a.data();
  g.a_rs = o.k;
  g.b = o.b.data();
  if (o.trans_b) { g.b_rs = 1; g.b_cs = o.k; } else { g.b_rs = o.n; g.b_cs = 1; }
  g.c = o.c.data();
  g.c_rs = o.n;
  for (auto _ : state) {
    fucina::kernels::sgemm(g, &pool);
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, o);
}

#if defined(FUCINA_BENCH_OPENBLAS)
void BM_openblas(benchmark::State& state) {
  Operands o = make_operands(state.range(0), state.range(1), state.range(2), state.range(4) != 0);
  openblas_set_num_threads(static_cast<int>(state.range(3)));
  const int m = static_cast<int>(o.m), n = static_cast<int>(o.n), k = static_cast<int>(o.k);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, o.trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                o.a.data(), k, o.b.data(), o.trans_b ? k : n, 0.0f, o.c.data(), n);
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, o);
  state.SetLabel(openblas_get_corename());
}
#endif

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "k", "n", "thr", "bt"});
  for (int threads : {1, 2}) {
    for (std::int64_t s : {256, 512, 1024, 2048}) b->Args({s, s, s, threads, 0});
    b->Args({1, 1024, 3072, threads, 0});
    b->Args({1, 1024, 3072, threads, 1});
    b->Args({512, 1024, 3072, threads, 0});
  }
  b->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(0.5);
}

BENCHMARK(BM_fucina)->Apply(shapes);
#if defined(FUCINA_BENCH_OPENBLAS)
BENCHMARK(BM_openblas)->Apply(shapes);
#endif

}  // namespace

int main(int argc, char** argv) {
#if defined(FUCINA_BENCH_OPENBLAS)
  const char* want = std::getenv("FUCINA_BENCH_OPENBLAS_CORETYPE");
  if (want == nullptr) want = "SkylakeX";
  const char* have = std::getenv("OPENBLAS_CORETYPE");
  if (have == nullptr || std::string_view(have) != want) {
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
    std::perror("bench_gemm: re-exec with OPENBLAS_CORETYPE failed");  // fall through
  }
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
