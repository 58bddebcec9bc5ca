// Grammar-constrained sampling cost per token at a 151,936-token vocabulary (Qwen2's, from
// ../shared/models/tiny-qwen3-f16.gguf) with the 10-property JSON schema bench/schema_10.json:
//   Mask/<state>/cold   the full vocabulary mask of a state seen for the first time (a
//                       trie walk), i.e. llama.cpp's grammar sampler work on a refused token
//   Mask/<state>/cached the same state again: the cached bitset applied to a logits row
//   Mask/<state>/next   the state one character further, its mask not cached but the
//                       matcher's steps warm from the mask before (how decoding meets a new
//                       state: cold above also builds every step of a fresh matcher)
//   CheckToken          is one sampled token allowed (the common case: no mask needed)
//   Decode              one generated token as a random-weight model drives it: a uniformly
//                       random candidate, checked, the vocabulary masked when it is refused,
//                       a random allowed token accepted (restarting at a complete text)
//   FUCINA_SHARED=DIR   where models/tiny-qwen3-f16.gguf lives (default ../shared).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <random>

#include "fucina/generate/generator.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/grammar/json_schema.hpp"
#include "fucina/grammar/matcher.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
namespace g = fucina::grammar;

fs::path shared_dir() {
  if (const char* e = std::getenv("FUCINA_SHARED")) return e;
  return fs::path(__FILE__).parent_path().parent_path().parent_path() / "shared";  // <repo>/../shared
}

// The 10-property schema of docs/BENCHMARK.md's rows (bench/compare_grammar.sh uses it too).
std::string schema_10() {
  std::ifstream in(fs::path(FUCINA_BENCH_DIR) / "schema_10.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Setup {
  std::shared_ptr<const g::Vocabulary> vocab;
  std::shared_ptr<const g::Grammar> grammar;
};

const Setup* setup() {
  static const std::unique_ptr<Setup> s = []() -> std::unique_ptr<Setup> {
    const fs::path path = shared_dir() / "models" / "tiny-qwen3-f16.gguf";
    if (!fs::exists(path)) return nullptr;
    const fucina::tokenizer::Tokenizer tok(fucina::tokenizer::load_tokenizer_data(fucina::gguf::Reader::open(path)));
    return std::make_unique<Setup>(Setup{fucina::generate::grammar_vocabulary(tok),
                                         std::make_shared<const g::Grammar>(g::from_json_schema_text(schema_10()))});
  }();
  return s.get();
}

const std::pair<const char*, const char*> states[] = {
    {"key", "{"},
    {"string", R"({"id": 7, "name": "Ada)"},
    {"number", R"({"id": 7, "name": "Ada", "email": "a@b.c", "age": 3)"},
};

enum class Kind { Cold, Cached, Next };

void mask(benchmark::State& state, std::string_view prefix, Kind kind) {
  const Setup* s = setup();
  if (!s) return state.SkipWithError("../shared/models/tiny-qwen3-f16.gguf not found");
  std::vector<float> logits(s->vocab->size(), 0.f);
  g::Matcher warm(s->grammar, s->vocab);
  warm.accept(prefix);
  std::size_t kept = 0;
  for (auto _ : state) {
    if (kind == Kind::Cached) {
      kept = warm.mask(logits);
    } else if (kind == Kind::Next) {
      state.PauseTiming();
      g::Matcher m(s->grammar, s->vocab);
      m.accept(prefix.substr(0, prefix.size() - 1));
      m.mask(logits);
      m.accept(prefix.substr(prefix.size() - 1));
      state.ResumeTiming();
      kept = m.mask(logits);
    } else {
      state.PauseTiming();
      g::Matcher m(s->grammar, s->vocab);
      m.accept(prefix);
      state.ResumeTiming();
      kept = m.mask(logits);
    }
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["allowed"] = static_cast<double>(kept);
}

void check_token(benchmark::State& state) {
  const Setup* s = setup();
  if (!s) return state.SkipWithError("../shared/models/tiny-qwen3-f16.gguf not found");
  g::Matcher m(s->grammar, s->vocab);
  m.accept(states[1].second);
  std::mt19937 rng(1);
  std::uniform_int_distribution<g::TokenId> pick(0, static_cast<g::TokenId>(s->vocab->size() - 1));
  for (auto _ : state) benchmark::DoNotOptimize(m.allows(pick(rng)));
}

void decode(benchmark::State& state) {
  const Setup* s = setup();
  if (!s) return state.SkipWithError("../shared/models/tiny-qwen3-f16.gguf not found");
  g::Matcher m(s->grammar, s->vocab);
  std::mt19937 rng(2);
  std::uniform_int_distribution<g::TokenId> pick(0, static_cast<g::TokenId>(s->vocab->size() - 1));
  std::vector<g::TokenId> allowed;
  std::int64_t masked = 0, texts = 0;
  std::string text;
  for (auto _ : state) {
    g::TokenId t = pick(rng);
    if (!m.allows(t)) {
      ++masked;
      const auto bits = m.allowed();
      allowed.clear();
      for (std::size_t w = 0; w < bits.size(); ++w)
        for (std::uint64_t b = bits[w]; b; b &= b - 1) allowed.push_back(static_cast<g::TokenId>(w * 64 + std::countr_zero(b)));
      if (allowed.empty()) return state.SkipWithError(("no token allowed after: " + text).c_str());
      t = allowed[std::uniform_int_distribution<std::size_t>(0, allowed.size() - 1)(rng)];
    }
    m.accept_token(t);
    text += s->vocab->piece(t);
    if (s->vocab->is_end(t) || !m.can_continue()) {
      text.clear();
      m = g::Matcher(s->grammar, s->vocab);
      ++texts;
    }
  }
  state.counters["masked"] = benchmark::Counter(static_cast<double>(masked) / static_cast<double>(state.iterations()));
  state.counters["texts"] = static_cast<double>(texts);
}

const bool registered = [] {
  for (const auto& [name, prefix] : states) {
    for (const auto& [kind_name, kind] : {std::pair{"cold", Kind::Cold}, {"next", Kind::Next}, {"cached", Kind::Cached}})
      benchmark::RegisterBenchmark(fmt::format("Mask/{}/{}", name, kind_name).c_str(), mask, prefix, kind)
          ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("CheckToken", check_token)->Unit(benchmark::kNanosecond);
  benchmark::RegisterBenchmark("Decode", decode)->Unit(benchmark::kMicrosecond)->Iterations(3000);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
