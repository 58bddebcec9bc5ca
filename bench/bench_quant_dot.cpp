// Quantized dot kernels: GB/s of weight bytes streamed, per format and per compiled arm.
// One activation row (4096 elements) against 512 weight rows (L2-resident for most formats).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "fucina/quant/traits.hpp"
#include "fucina/quant/vec_dot.hpp"

namespace {

using fucina::quant::DotArm;
using fucina::quant::QuantType;

constexpr std::int64_t kN = 4096;
constexpr std::int64_t kRows = 512;

void bench_dot(benchmark::State& state, QuantType t, DotArm arm) {
  namespace q = fucina::quant;
  const q::DotFn fn = q::dot_kernel(arm, t);
  const std::int64_t wbytes = q::row_bytes(t, kN);
  const QuantType at = q::codec_traits(t).vec_dot_type;
  std::mt19937 rng(42);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(kN);
  std::vector<std::uint8_t> w(static_cast<std::size_t>(wbytes * kRows));
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (float& v : x) v = g(rng);
    q::quantize_row(t, x.data(), w.data() + r * wbytes, kN);
  }
  for (float& v : x) v = g(rng);
  std::vector<std::uint8_t> act(static_cast<std::size_t>(q::row_bytes(at, kN)));
  q::quantize_row_activation(at, x.data(), act.data(), kN);
  std::vector<float> out(kRows);
  for (auto _ : state) {
    for (std::int64_t r = 0; r < kRows; ++r) out[r] = fn(kN, w.data() + r * wbytes, act.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * wbytes * kRows);
}

const int kRegistered = [] {
  namespace q = fucina::quant;
  const QuantType types[] = {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1, QuantType::Q5_0,
                             QuantType::Q5_1, QuantType::IQ4_NL, QuantType::Q2_K, QuantType::Q3_K,
                             QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K, QuantType::IQ4_XS,
                             QuantType::TQ1_0, QuantType::TQ2_0};
  const std::pair<DotArm, const char*> arms[] = {
      {DotArm::Scalar, "scalar"}, {DotArm::Avx2, "avx2"}, {DotArm::Avx512Vnni, "avx512vnni"}};
  for (QuantType t : types) {
    for (const auto& [arm, name] : arms) {
      if (q::dot_kernel(arm, t) == nullptr) continue;
      const std::string label = "dot/" + std::string(q::codec_traits(t).name) + "/" + name;
      benchmark::RegisterBenchmark(label.c_str(), bench_dot, t, arm);
    }
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
