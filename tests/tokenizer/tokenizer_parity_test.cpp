// Token-id parity with llama.cpp: every case of ../shared/vocab/*.inp/.out (llama.cpp's own
// tokenizer test vectors, encoded with add_special=false, parse_special=false) and our
// committed llama-tokenize cases under tests/data/tokenizer.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "fucina/tokenizer/utf8.hpp"
#include "support/shared_dir.hpp"
#include "vocab_cases.hpp"

namespace fucina::tokenizer {
namespace {

Tokenizer load_vocab(const std::filesystem::path& p) {
  return Tokenizer(load_tokenizer_data(gguf::Reader::open(p)));
}

class VocabParity : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabParity, EveryCaseMatchesLlamaCpp) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto base = shared / "vocab" / ("ggml-vocab-" + GetParam() + ".gguf");
  ASSERT_TRUE(std::filesystem::exists(base)) << base;
  const Tokenizer tok = load_vocab(base);
  const auto cases = test::read_vocab_cases(base.string() + ".inp", base.string() + ".out");
  ASSERT_FALSE(cases.empty()) << "no cases read for " << base;
  int passed = 0;
  for (const auto& c : cases) {
    const auto ids = tok.encode(c.text, {.add_special = false, .parse_special = false});
    if (ids == c.ids) {
      ++passed;
    } else {
      ADD_FAILURE() << GetParam() << ": text '" << c.text << "'\n  expected " << fmt::format("{}", c.ids)
                    << "\n  got      " << fmt::format("{}", ids);
    }
  }
  RecordProperty("passed", passed);
  std::printf("[ vocab %-15s ] %d / %zu cases\n", GetParam().c_str(), passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(SharedVocabs, VocabParity,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "deepseek-llm",
                                           "deepseek-coder", "falcon", "starcoder", "mpt", "refact", "command-r"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// Our hard-text goldens (tools/dev/tokenizer_make_cases.py): mixed scripts, emoji, combining
// marks, whitespace runs, digits, code, special-token strings, invalid UTF-8.
class HardCases : public ::testing::TestWithParam<std::string> {};

std::filesystem::path find_model(const std::filesystem::path& shared, const std::string& stem) {
  const auto v = shared / "vocab" / ("ggml-vocab-" + stem + ".gguf");
  return std::filesystem::exists(v) ? v : shared / "models" / (stem + ".gguf");
}

TEST_P(HardCases, MatchLlamaTokenize) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto model = find_model(shared, GetParam());
  if (!std::filesystem::exists(model)) {
    GTEST_SKIP() << model << " not present";
  }
  const Tokenizer tok = load_vocab(model);
  const auto dir = test::test_data_dir() / "tokenizer";
  for (const bool special : {false, true}) {
    const auto cases = test::read_vocab_cases(dir / "hard.inp", dir / (GetParam() + (special ? ".special.out" : ".plain.out")));
    ASSERT_FALSE(cases.empty());
    int passed = 0;
    for (const auto& c : cases) {
      const EncodeOptions opt{.add_special = special && tok.add_bos(), .parse_special = special};
      const auto ids = tok.encode(c.text, opt);
      if (ids == c.ids) {
        ++passed;
      } else {
        ADD_FAILURE() << GetParam() << (special ? " special" : " plain") << ": text '" << c.text
                      << "'\n  expected " << fmt::format("{}", c.ids) << "\n  got      " << fmt::format("{}", ids);
      }
      // Lossless round trip wherever the input is valid UTF-8 and nothing was parsed as special.
      if (!special && is_valid_utf8(c.text)) {
        EXPECT_EQ(tok.decode(ids), c.text) << GetParam();
      }
    }
    std::printf("[ hard %-18s %-7s ] %d / %zu cases\n", GetParam().c_str(), special ? "special" : "plain", passed,
                cases.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Committed, HardCases,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "deepseek-llm",
                                           "deepseek-coder", "falcon", "starcoder", "mpt", "refact", "command-r",
                                           "tiny-qwen3-f16", "tiny-llama-spm-f32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace fucina::tokenizer
