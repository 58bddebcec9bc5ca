// Tokenizer encode throughput on a ~1 MB text, per vocabulary.
//   FUCINA_TOKENIZER_CORPUS=FILE  text to encode (bench/compare_tokenizer.sh makes one);
//   otherwise ../shared/vocab/*.inp repeated up to 1 MiB.
//   FUCINA_SHARED=DIR             where the vocab GGUFs live (default ../shared).
// Counters: bytes/s of input and tokens/s of output. Encoding uses add_special=false,
// parse_special=false, i.e. what llama.cpp's test-tokenizer-0 times.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using fucina::tokenizer::Tokenizer;

fs::path shared_dir() {
  if (const char* e = std::getenv("FUCINA_SHARED")) return e;
  return fs::path(__FILE__).parent_path().parent_path().parent_path() / "shared";  // <repo>/../shared
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string& corpus() {
  static const std::string text = [] {
    if (const char* e = std::getenv("FUCINA_TOKENIZER_CORPUS")) return read(e);
    std::string seed;
    for (const auto& entry : fs::directory_iterator(shared_dir() / "vocab"))
      if (entry.path().extension() == ".inp") seed += read(entry.path());
    std::string t;
    while (!seed.empty() && t.size() < (std::size_t{1} << 20)) t += seed;
    return t.substr(0, std::size_t{1} << 20);
  }();
  return text;
}

void encode(benchmark::State& state, const std::string& vocab) {
  const fs::path path = shared_dir() / "vocab" / ("ggml-vocab-" + vocab + ".gguf");
  if (!fs::exists(path) || corpus().empty()) {
    state.SkipWithError("vocab or corpus not found (../shared absent?)");
    return;
  }
  const Tokenizer tok(fucina::tokenizer::load_tokenizer_data(fucina::gguf::Reader::open(path)));
  std::size_t n_tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(corpus(), {.add_special = false, .parse_special = false});
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * corpus().size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n_tokens) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(encode, qwen2, std::string("qwen2"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(encode, llama_spm, std::string("llama-spm"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(encode, llama_bpe, std::string("llama-bpe"))->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
