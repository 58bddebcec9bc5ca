#pragma once
// SentencePiece-style BPE (llama.cpp's `llama` vocab type): merge adjacent symbols whose
// concatenation is a token, highest token score first, leftmost on ties.
//
// Note [SPM merging]
// Symbols start as one UTF-8 character each, sized by the lead byte alone (llama.cpp does not
// validate here), so invalid bytes still tokenize. A final symbol that is not a token is
// emitted byte by byte as <0xXX> tokens (else the raw one-byte token, else UNK).
// Speed-up, exact by construction: when no token holds U+2581 right after another character,
// no merge can cross the start of a "▁..." run, so the text is cut there and each chunk
// (mostly a word) is merged on its own with a small heap and memoised per call.
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fucina/tokenizer/tokenizer_data.hpp"

namespace fucina::tokenizer {

struct SpmScratch {
  struct Symbol {
    std::uint32_t off;
    std::uint32_t len;
    std::int32_t prev, next;
  };
  struct Bigram {
    float score;
    std::int32_t left;
    std::int32_t right;
    std::uint32_t size;
  };
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
};

class SpmModel {
 public:
  // `token_to_id` must outlive the model (the Tokenizer owns both).
  SpmModel(const std::unordered_map<std::string_view, TokenId>& token_to_id, const std::vector<float>& scores,
           TokenId unk_id);

  // Appends the ids for `text`, which already has spaces escaped to U+2581.
  void encode(std::string_view text, std::vector<TokenId>& out, SpmScratch& scratch) const;

  TokenId byte_token(std::uint8_t b) const { return byte_id_[b]; }
  bool splits_at_spaces() const { return split_at_spaces_; }

 private:
  TokenId find(std::string_view s) const;
  void try_add(SpmScratch& s, std::string_view text, std::int32_t left, std::int32_t right) const;
  void encode_chunk(std::string_view text, std::vector<TokenId>& out, SpmScratch& scratch) const;

  const std::unordered_map<std::string_view, TokenId>* token_to_id_;
  const std::vector<float>* scores_;
  TokenId byte_id_[256];
  bool split_at_spaces_ = false;
};

}  // namespace fucina::tokenizer
