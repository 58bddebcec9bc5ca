// The hot kernels of inference, each with its roofline:
//   stream/read          the machine's read bandwidth (the tg roofline), GB/s
//   gemv/<type>          one activation row x a ~96 MiB weight matrix (decode), GB/s of weights
//   .../packed           the same through the interleaved VNNI kernels (quant/packed.hpp)
//   batch8/<type>        8 activation rows x the gemv matrix (8-stream batched decode): GB/s
//                        of weights, GFLOP/s; the weights are read once for all 8 rows
//   f16rows/<order>      rows x n_out x k (the args) f16 products in one order, one thread, CPU
//                        time: vec = one-row arithmetic's rows (speculation), tiled = plain
//                        batches; 151936 x 512 streams from DRAM, d = 256 / 768 are the default
//                        model's verification products (Note [One-row arithmetic])
//   f16layers/<order>    rows (arg 0) through the seven f16 products of arg 1 Qwen3-0.6B
//                        layers in turn (30 MB each: 4 layers stream from DRAM like decode
//                        does, matrix by matrix), one thread, CPU time, GFLOP/s; .../all_cores:
//                        the Context's threads, real time
//   gemm/<type>          512 activation rows x a 1024 x 3072 weight (prefill), GFLOP/s;
//                        the roofline is gemm/f32 (the f32 micro-kernel the decoded weights feed)
//   attention/decode     flash attention of 1 query over 512 cached f16 positions, 16 heads x 128
//   attention/step       a decode step's attention pass: 8 sequences x 8 KV heads x 2 rows, paged f16
//   rmsnorm              [512, 1024] f32, GB/s (read + write)
// Threads: the Context default (all cores). Run: build/release/bench/bench_inference.
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "fucina/fucina.hpp"
#include "fucina/kernels/gemm/sgemm.hpp"
#include "fucina/model/f16_matmul.hpp"
#include "fucina/model/flash_attention.hpp"
#include "fucina/model/quant_matmul.hpp"
#include "fucina/quant/packed.hpp"
#include "fucina/quant/traits.hpp"

namespace {

using namespace fucina;
using fucina::quant::QuantType;

Context& ctx() {
  static Context c;
  return c;
}

std::vector<float> noise(std::int64_t n, std::uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = rng::normal(seed, static_cast<std::uint64_t>(i));
  return v;
}

// A weight matrix in one storage type: f32, f16 or a quant type.
struct Matrix {
  QuantType type;
  std::int64_t rows, cols;
  std::vector<std::byte> bytes;
  model::QuantMatrix q;

  Matrix(QuantType t, std::int64_t r, std::int64_t c, bool packed = false) : type(t), rows(r), cols(c) {
    const std::int64_t rb = quant::row_bytes(t, c);
    bytes.resize(static_cast<std::size_t>(rb * r));
    ctx().pool().parallel_for(r, [&](std::int64_t i) {
      const auto row = noise(c, 100 + static_cast<std::uint64_t>(i));
      quant::quantize_row(t, row.data(), bytes.data() + i * rb, c);
    });
    q.data = bytes.data();
    q.type = t;
    q.rows = r;
    q.cols = c;
    q.row_bytes = rb;
    if (packed) q.packed = std::make_shared<const quant::PackedMatrix>(quant::pack_matrix(t, q.data, r, c, rb, &ctx().pool()));
  }
  void multiply(const float* x, std::int64_t n, float* y) const {
    if (type == QuantType::F16) {
      // The orders the model uses (model/weights.hpp): ggml_vec_dot_f16's for one row (decode).
      model::matmul_f16(ctx().pool(), x, n, cols, reinterpret_cast<const Half*>(bytes.data()), cols, rows, y,
                        n == 1 ? model::GgmlOrder::vec : model::GgmlOrder::tiled);
    } else if (type == QuantType::F32) {
      kernels::GemmArgs g{.m = n, .n = rows, .k = cols, .a = x, .a_rs = cols,
                          .b = reinterpret_cast<const float*>(bytes.data()), .b_rs = 1, .b_cs = cols, .c = y,
                          .c_rs = rows};
      kernels::sgemm(g, &ctx().pool());
    } else {
      model::matmul_quant(ctx().pool(), x, n, q, y);
    }
  }
};

void bench_stream(benchmark::State& state) {
  const std::int64_t n = std::int64_t{1} << 27;  // 512 MiB of 32-bit words
  std::vector<std::uint32_t> a(static_cast<std::size_t>(n), 1u);
  std::vector<std::uint32_t> part(static_cast<std::size_t>(ctx().threads()), 0u);
  for (auto _ : state) {
    ctx().pool().parallel_range(n, n / ctx().threads(), [&](std::int64_t b, std::int64_t e) {
      std::uint32_t s = 0;  // integer adds reassociate freely, so this loop vectorizes
      for (std::int64_t i = b; i < e; ++i) s += a[static_cast<std::size_t>(i)];
      part[static_cast<std::size_t>(b * ctx().threads() / n)] = s;
    });
    benchmark::DoNotOptimize(part.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 4);
}

void bench_gemv(benchmark::State& state, QuantType t, bool packed) {
  // ~96 MiB in every format, 3x the 32 MiB L3: a victim L3 keeps nothing of a cyclic
  // stream that long, so every pass reads DRAM as decode does.
  const std::int64_t cols = 8192, row_bytes = quant::row_bytes(t, cols);
  const std::int64_t rows = ((std::int64_t{96} << 20) / row_bytes + 15) / 16 * 16;
  const Matrix w(t, rows, cols, packed);
  const auto x = noise(w.cols, 1);
  std::vector<float> y(static_cast<std::size_t>(w.rows));
  for (auto _ : state) {
    w.multiply(x.data(), 1, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(w.bytes.size()));
}

void bench_batch8(benchmark::State& state, QuantType t, bool packed) {
  const std::int64_t m = 8, cols = 8192, row_bytes = quant::row_bytes(t, cols);
  const std::int64_t rows = ((std::int64_t{96} << 20) / row_bytes + 15) / 16 * 16;
  const Matrix w(t, rows, cols, packed);
  const auto x = noise(m * w.cols, 7);
  std::vector<float> y(static_cast<std::size_t>(m * w.rows));
  for (auto _ : state) {
    w.multiply(x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(w.bytes.size()));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * w.rows * w.cols),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void bench_f16_rows(benchmark::State& state, model::GgmlOrder order) {
  static ThreadPool one(1);
  const std::int64_t m = state.range(0), n_out = state.range(1), k = state.range(2);
  const Matrix w(QuantType::F16, n_out, k);
  auto x = noise(m * k, 9);
  model::round_to_f16(x.data(), m * k);
  std::vector<float> y(static_cast<std::size_t>(m * n_out));
  for (auto _ : state) {
    model::matmul_f16(one, x.data(), m, k, reinterpret_cast<const Half*>(w.bytes.data()), k, n_out, y.data(), order);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n_out * k),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void bench_f16_layers(benchmark::State& state, model::GgmlOrder order, bool all_cores) {
  static ThreadPool one(1);
  ThreadPool& pool = all_cores ? ctx().pool() : one;
  const std::int64_t m = state.range(0), layers = state.range(1);
  // q, k, v, o, gate, up, down of Qwen3-0.6B: {n_out, k}.
  constexpr std::pair<std::int64_t, std::int64_t> kShapes[] = {{2048, 1024}, {1024, 1024}, {1024, 1024}, {1024, 2048},
                                                               {3072, 1024}, {3072, 1024}, {1024, 3072}};
  std::vector<Matrix> w;
  w.reserve(std::size(kShapes) * static_cast<std::size_t>(layers));
  for (const auto& [n_out, k] : kShapes) w.emplace_back(QuantType::F16, n_out, k);
  for (std::int64_t l = 1; l < layers; ++l)  // copies: distinct memory, filled quickly
    for (std::size_t i = 0; i < std::size(kShapes); ++i) w.push_back(w[i]);
  auto x = noise(m * 3072, 9);
  model::round_to_f16(x.data(), m * 3072);
  std::vector<float> y(static_cast<std::size_t>(m * 3072));
  std::int64_t flop = 0;
  for (const Matrix& mat : w) flop += 2 * m * mat.rows * mat.cols;
  for (auto _ : state) {
    for (const Matrix& mat : w)
      model::matmul_f16(pool, x.data(), m, mat.cols, reinterpret_cast<const Half*>(mat.bytes.data()), mat.cols, mat.rows,
                        y.data(), order);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(flop), benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void bench_gemm(benchmark::State& state, QuantType t, bool packed) {
  const std::int64_t m = 512;
  const Matrix w(t, 3072, 1024, packed);
  const auto x = noise(m * w.cols, 2);
  std::vector<float> y(static_cast<std::size_t>(m * w.rows));
  for (auto _ : state) {
    w.multiply(x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * w.rows * w.cols),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void bench_attention_decode(benchmark::State& state) {
  const std::int64_t n_kv = state.range(0), kvh = 8, grp = 2, hd = 128;
  auto q = Tensor<"seq", "kvh", "grp", "hd">::randn(ctx(), {1, kvh, grp, hd}, 3);
  auto k = Tensor<"kseq", "kvh", "hd">::randn(ctx(), {n_kv, kvh, hd}, 4).to<DType::f16>(ctx());
  auto v = Tensor<"kseq", "kvh", "hd">::randn(ctx(), {n_kv, kvh, hd}, 5).to<DType::f16>(ctx());
  for (auto _ : state) {
    // Split as a decode over a context of n_kv positions is (Note [split decode]).
    auto o = model::flash_attention_f16(ctx(), q, k, v, n_kv - 1, 1.f / std::sqrt(float(hd)),
                                        n_kv >= 512 ? (n_kv + ctx().threads() - 1) / ctx().threads() : 0);
    benchmark::DoNotOptimize(o.data().data());
  }
  // Reads K and V once (f16), 4 flops per (head, position, dim).
  state.SetBytesProcessed(state.iterations() * 2 * n_kv * kvh * hd * 2);
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * static_cast<double>(kvh * grp * n_kv * hd),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// A decode step's attention pass as the model runs it (one pool pass, every sequence one new
// row stored in the pass, paged caches of 32-position blocks): args seqs, head size, cached
// positions, layers (each its own cache, walked in turn so that many layers' K/V leave the
// cache as a step's do), threads. ns_per_pair: per (key, KV head) of a task's pair of rows.
void bench_attention_step(benchmark::State& state) {
  const std::int64_t seqs = state.range(0), hd = state.range(1), n_past = state.range(2), layers = state.range(3);
  const std::int64_t kvh = 8, grp = 2, block = 32, blocks_per_seq = (n_past + block) / block;
  static Context one({.threads = 1}), two({.threads = 2});
  Context& c = state.range(4) == 1 ? one : two;
  const std::int64_t rows = seqs * blocks_per_seq * block;
  std::vector<RawTensor> k, v;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(seqs * blocks_per_seq));
  for (std::size_t b = 0; b < ids.size(); ++b) ids[b] = static_cast<std::int32_t>(b);
  for (std::int64_t l = 0; l < 2 * layers; ++l) {
    RawTensor t = c.empty(DType::f16, 3, Dims{kvh, rows, hd});
    t.shape = Dims{rows, kvh, hd};
    t.strides = Dims{hd, rows * hd, 1};
    const auto x = noise(rows * kvh * hd, 10 + static_cast<std::uint64_t>(l));
    for (std::size_t i = 0; i < x.size(); ++i) t.data<Half>()[i] = Half{float_to_half(x[i])};
    (l % 2 == 0 ? k : v).push_back(t);
  }
  const auto q = Tensor<"seq", "kvh", "grp", "hd">::randn(c, {seqs, kvh, grp, hd}, 3);
  const auto new_kv = noise(seqs * kvh * hd, 7);
  std::vector<std::vector<model::AttentionRows>> rows_of(static_cast<std::size_t>(layers));
  for (std::int64_t l = 0; l < layers; ++l)
    for (std::int64_t s = 0; s < seqs; ++s)
      rows_of[static_cast<std::size_t>(l)].push_back(
          {.r0 = s, .n = 1, .n_past = n_past,
           .kv = {k[static_cast<std::size_t>(l)], v[static_cast<std::size_t>(l)],
                  std::span(ids).subspan(static_cast<std::size_t>(s * blocks_per_seq), static_cast<std::size_t>(blocks_per_seq)),
                  block},
           .new_k = new_kv.data() + s * kvh * hd, .new_v = new_kv.data() + s * kvh * hd});
  for (auto _ : state)
    for (const auto& r : rows_of) {
      auto o = model::flash_attention_f16(c, q, r, 1.f / std::sqrt(float(hd)));
      benchmark::DoNotOptimize(o.data().data());
    }
  const double pairs = static_cast<double>(layers * seqs * kvh * (n_past + 1));
  state.counters["ns_per_pair"] = benchmark::Counter(
      pairs * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void bench_rmsnorm(benchmark::State& state) {
  auto x = Tensor<"seq", "embd">::randn(ctx(), {512, 1024}, 6);
  for (auto _ : state) {
    auto y = rms_norm<"embd">(ctx(), x, 1e-6f);
    benchmark::DoNotOptimize(y.data().data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * 512 * 1024 * 4);
}

const int kRegistered = [] {
  benchmark::RegisterBenchmark("stream/read", bench_stream)->UseRealTime()->Unit(benchmark::kMillisecond);
  for (QuantType t : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K,
                      QuantType::Q6_K}) {
    for (const bool packed : {false, true}) {
      if (packed && !(quant::packed_fast_arm_compiled() && quant::packable(t, 1024))) continue;
      const std::string name = std::string(quant::codec_traits(t).name) + (packed ? "/packed" : "");
      benchmark::RegisterBenchmark(("gemv/" + name).c_str(), bench_gemv, t, packed)->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("batch8/" + name).c_str(), bench_batch8, t, packed)->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("gemm/" + name).c_str(), bench_gemm, t, packed)->UseRealTime()->Unit(benchmark::kMillisecond);
    }
  }
  for (const auto& [name, order] : {std::pair{"f16rows/tiled", model::GgmlOrder::tiled}, std::pair{"f16rows/vec", model::GgmlOrder::vec}}) {
    auto* b = benchmark::RegisterBenchmark(name, bench_f16_rows, order);
    b->Args({8, 151936, 512})->Args({8, 3072, 1024})->Args({8, 1024, 3072});
    for (std::int64_t rows : {2, 5, 9, 17}) b->Args({rows, 768, 256})->Args({rows, 256, 768})->Args({rows, 8192, 256});
    b->Unit(benchmark::kMicrosecond);
  }
  for (const auto& [name, order] : {std::pair{"f16layers/tiled", model::GgmlOrder::tiled}, std::pair{"f16layers/vec", model::GgmlOrder::vec}}) {
    benchmark::RegisterBenchmark(name, bench_f16_layers, order, false)->Args({8, 4})->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string(name) + "/all_cores").c_str(), bench_f16_layers, order, true)
        ->Args({8, 4})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("attention/decode", bench_attention_decode)
      ->Arg(512)
      ->Arg(4096)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  // Qwen3-0.6B's 8-stream decode step (8 of its 28 layers) and the default model's
  // verification rows (hd 64, one layer).
  benchmark::RegisterBenchmark("attention/step", bench_attention_step)
      ->ArgNames({"seqs", "hd", "past", "layers", "threads"})
      ->Args({8, 128, 160, 8, 1})
      ->Args({8, 128, 160, 8, 2})
      ->Args({8, 128, 160, 1, 1})
      ->Args({8, 128, 160, 1, 2})
      ->Args({16, 64, 160, 1, 1})
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("rmsnorm", bench_rmsnorm)->UseRealTime()->Unit(benchmark::kMicrosecond);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
