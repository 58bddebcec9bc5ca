// `fucina vocab train` / tokenizer::train_bpe (Note [BPE training]): the merge order on a
// hand-checked corpus, determinism, every input encodes and decodes back, and a trained
// vocabulary tokenizes a validation text exactly as llama.cpp's llama-tokenize does
// (tests/data/vocab/goldens.json, scripts/parity/make_vocab_goldens.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fucina/core/error.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/bpe_trainer.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "quantize/sha256.hpp"

using namespace fucina;
using namespace fucina::tokenizer;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Trains, writes and reloads through the GGUF (the path every user takes).
struct Trained {
  TrainedVocab vocab;
  fs::path file;
  std::unique_ptr<Tokenizer> tok;
  Trained(std::vector<std::string> texts, std::int64_t size, const char* tag) {
    vocab = train_bpe(texts, {.vocab_size = size});
    file = fs::temp_directory_path() / (std::string("fucina_vocab_") + tag + "_" + std::to_string(::getpid()) + ".gguf");
    write_vocab_gguf(file, vocab);
    tok = std::make_unique<Tokenizer>(load_tokenizer_data(gguf::Reader::open(file)));
  }
  ~Trained() { fs::remove(file); }
};

TEST(BpeTrainer, MergesTheMostFrequentPairFirst) {
  // Words (GPT-2 pre-tokenizer; Ġ spells the space): "low", "Ġlow" x2, "Ġlower" x2,
  // "Ġnewest" x2, "Ġwidest". Counts: (l,o) 5 and (o,w) 5 -> the smaller pair of ids, "l o";
  // then (lo,w) 5; then (Ġ,low) 4; then (e,s) 3 ties (s,t) 3 -> "e s".
  const Trained t({"low low low lower lower newest newest widest"}, 256 + 4 + 1, "order");
  ASSERT_EQ(t.vocab.merges.size(), 4u);
  EXPECT_EQ(t.vocab.merges, (std::vector<std::string>{"l o", "lo w", "Ġ low", "e s"}));
  EXPECT_EQ(t.vocab.tokens[256], "lo");
  EXPECT_EQ(t.vocab.tokens[257], "low");
  EXPECT_EQ(t.vocab.types.back(), 3);  // <|endoftext|>, control
  EXPECT_EQ(t.vocab.tokens.back(), "<|endoftext|>");
  EXPECT_EQ(t.vocab.bos, static_cast<std::int32_t>(t.vocab.tokens.size()) - 1);
}

TEST(BpeTrainer, DeterministicAndEveryInputRoundTrips) {
  const std::string corpus = read_file(fs::path(FUCINA_TEST_DATA) / "vocab" / "corpus.txt");
  const Trained a({corpus}, 600, "a"), b({corpus}, 600, "b");
  EXPECT_EQ(read_file(a.file), read_file(b.file)) << "the same text gave two vocabularies";
  EXPECT_EQ(a.vocab.tokens.size(), 600u);
  const std::string tricky = "naïve café — 中文 🙂 \t\n  x\x01\x7f tabs\tand\nlines 12345 don't";
  const auto ids = a.tok->encode(tricky, {.add_special = false});
  EXPECT_EQ(a.tok->decode(ids), tricky);
  EXPECT_LT(ids.size(), tricky.size()) << "nothing merged";
}

TEST(BpeTrainer, LlamaCppTokenizesAsWeDo) {
  const json g = json::parse(read_file(fs::path(FUCINA_TEST_DATA) / "vocab" / "goldens.json"));
  const std::string corpus = read_file(fs::path(FUCINA_TEST_DATA) / "vocab" / "corpus.txt");
  const Trained t({corpus}, g.at("size").get<std::int64_t>(), "golden");
  const std::string bytes = read_file(t.file);
  EXPECT_EQ(test::sha256_hex(std::as_bytes(std::span(bytes.data(), bytes.size()))), g.at("vocab_sha256").get<std::string>())
      << "the trained vocabulary differs from the one llama.cpp tokenized with";
  const std::string text = read_file(fs::path(FUCINA_TEST_DATA) / "vocab" / "validation.txt");
  const auto ids = t.tok->encode(text);  // BOS as the metadata says, like llama-tokenize
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin(), ids.end()), g.at("llama_tokenize_ids").get<std::vector<std::int32_t>>());
}

TEST(BpeTrainer, BadOptionsAreClearErrors) {
  EXPECT_THROW(train_bpe(std::vector<std::string>{"x"}, {.vocab_size = 100}), Error);
  EXPECT_THROW(train_bpe(std::vector<std::string>{"x"}, {.vocab_size = 300, .min_frequency = 2, .pre = "no-such-pre"}), Error);
}

}  // namespace
