// libFuzzer target for the tokenizer: any bytes through every vocabulary must encode to ids
// inside the vocabulary and decode without crashing, or throw fucina::Error.
// Vocabularies: every *.gguf under $FUCINA_VOCAB_DIR (default ../shared/vocab next to the
// source tree; llama.cpp's ggml-vocab-*.gguf cover SPM and byte-level BPE with each
// pre-tokenizer), plus two small built-in ones (SPM with byte fallback, byte-level BPE) so
// the target runs without the shared files. Input: byte 0 picks the vocabulary, byte 1's
// bits the encode/decode options, the rest is the text.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/bpe_model.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "fucina/tokenizer/utf8.hpp"

namespace {

namespace tk = fucina::tokenizer;

tk::TokenizerData builtin_spm() {
  tk::TokenizerData d;
  d.model = "llama";
  const auto add = [&](std::string t, float score, tk::TokenType type) {
    d.tokens.push_back(std::move(t));
    d.scores.push_back(score);
    d.token_types.push_back(static_cast<std::int32_t>(type));
  };
  add("<unk>", 0, tk::TokenType::Unknown);
  add("<s>", 0, tk::TokenType::Control);
  add("</s>", 0, tk::TokenType::Control);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, tk::TokenType::Byte);
  for (const char* t : {"\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "a", "he", "llo"}) add(t, -1, tk::TokenType::Normal);
  add("<|user|>", 0, tk::TokenType::UserDefined);
  add("<ctl>", 0, tk::TokenType::Control);
  return d;
}

std::string byte_level(std::string_view raw) {
  std::string s;
  for (const char c : raw) tk::append_utf8(s, tk::BpeModel::byte_to_cpt(static_cast<std::uint8_t>(c)));
  return s;
}

tk::TokenizerData builtin_bpe() {
  tk::TokenizerData d;
  d.model = "gpt2";
  d.pre = "llama3";
  for (unsigned b = 0; b < 256; ++b) d.tokens.push_back(byte_level(std::string(1, static_cast<char>(b))));
  const std::pair<std::string, std::string> merges[] = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {" ", "w"}, {"1", "2"}};
  for (const auto& [a, b] : merges) {
    d.merges.push_back(byte_level(a) + " " + byte_level(b));
    d.tokens.push_back(byte_level(a + b));
  }
  d.tokens.push_back("<|end|>");
  d.token_types.assign(d.tokens.size(), static_cast<std::int32_t>(tk::TokenType::Normal));
  d.token_types.back() = static_cast<std::int32_t>(tk::TokenType::Control);
  d.eos_id = static_cast<tk::TokenId>(d.tokens.size() - 1);
  return d;
}

std::vector<tk::Tokenizer> load_all() {
  std::vector<tk::Tokenizer> out;
  out.emplace_back(builtin_spm());
  out.emplace_back(builtin_bpe());
  const char* env = std::getenv("FUCINA_VOCAB_DIR");
  const std::filesystem::path dir = env ? env : FUCINA_DEFAULT_VOCAB_DIR;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".gguf") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::size_t skipped = 0;
  for (const auto& f : files) {
    try {
      out.emplace_back(tk::load_tokenizer_data(fucina::gguf::Reader::open(f)));
    } catch (const fucina::Error&) {
      ++skipped;  // a vocabulary type this tokenizer does not support (e.g. WPM, UGM)
    }
  }
  if (files.empty())
    std::fprintf(stderr, "tokenizer_fuzz: no vocab GGUFs in '%s' (set FUCINA_VOCAB_DIR); built-in vocabularies only\n",
                 dir.c_str());
  else
    std::fprintf(stderr, "tokenizer_fuzz: %zu vocabularies from '%s' (%zu unsupported skipped) + 2 built-in\n",
                 files.size() - skipped, dir.c_str(), skipped);
  return out;
}

const std::vector<tk::Tokenizer>& tokenizers() {
  static const std::vector<tk::Tokenizer> all = load_all();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const auto& all = tokenizers();
  const tk::Tokenizer& tok = all[data[0] % all.size()];
  const unsigned flags = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    const std::vector<tk::TokenId> ids =
        tok.encode(text, {.add_special = (flags & 1) != 0, .parse_special = (flags & 2) != 0});
    for (const tk::TokenId id : ids)
      if (id < 0 || static_cast<std::size_t>(id) >= tok.vocab_size()) __builtin_trap();
    (void)tok.decode(ids, {.remove_special = (flags & 4) != 0, .render_special = (flags & 8) != 0, .clean_spaces = (flags & 32) != 0});
    for (const tk::TokenId id : ids) (void)tok.piece(id, (flags & 16) != 0);
  } catch (const fucina::Error&) {
  }
  return 0;
}
