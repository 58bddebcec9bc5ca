#pragma once
// Byte-level BPE merging (GPT-2 style) on raw bytes.
//
// Note [BPE in raw-byte space]
// GPT-2 vocabularies spell each byte as one printable code point (bytes_to_unicode), so a
// word's encoded characters correspond one-to-one with its raw bytes. We decode every
// vocabulary string and merge rule back to raw bytes once, at load time, and merge on raw
// bytes: no per-word re-encoding, and merge lookups are keyed by the two token ids
// (a flat hash of id pairs) instead of strings. Strings that are not pure byte-map text can
// never be produced by encoding and are left out. Merge order equals llama.cpp's heap:
// lowest rank first, leftmost on ties; a duplicate merge rule keeps its first rank and a
// duplicate token string maps to its last id.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fucina/tokenizer/tokenizer_data.hpp"

namespace fucina::tokenizer {

// Reusable per-call buffers so encoding a long text allocates O(1) times.
struct BpeScratch {
  struct Symbol {
    std::uint32_t off;
    std::uint32_t len;
    TokenId id;  // token of the symbol's bytes, or null_token
    std::int32_t prev, next;
  };
  struct Bigram {
    std::int32_t rank;
    std::int32_t left;
    std::int32_t right;
    std::uint32_t size;
    TokenId result;
  };
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
};

class BpeModel {
 public:
  BpeModel(std::span<const std::string> tokens, std::span<const std::string> merges, bool ignore_merges);

  // Appends the ids of one pre-tokenized word given as raw (canonical UTF-8) bytes.
  void encode_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const;

  // Token whose byte-decoded text is `raw`, or null_token.
  TokenId find_raw(std::string_view raw) const;

  // GPT-2 bytes_to_unicode: the code point that spells byte b.
  static std::uint32_t byte_to_cpt(std::uint8_t b);
  // Decodes a vocabulary string to raw bytes; false if it holds a non byte-map character.
  static bool decode_text(std::string_view text, std::string& raw);

  std::size_t n_merges() const { return n_merges_; }

 private:
  struct MergeSlot {
    std::uint64_t key;  // (left id << 32) | right id; empty_key when unused
    std::int32_t rank;
    TokenId result;
  };
  static constexpr std::uint64_t empty_key = ~std::uint64_t{0};

  const MergeSlot* find_merge(TokenId a, TokenId b) const;
  bool find_merge_slow(std::string_view a, std::string_view b, std::int32_t& rank, TokenId& result) const;
  void insert_merge(std::uint64_t key, std::int32_t rank, TokenId result);
  void try_add(BpeScratch& s, std::string_view word, std::int32_t left, std::int32_t right) const;

  std::vector<std::string> raw_texts_;  // raw bytes per token id ("" when not decodable)
  std::unordered_map<std::string_view, TokenId> raw_to_id_;
  TokenId byte_id_[256];
  std::vector<TokenId> fallback_ids_[256];  // llama.cpp's per-byte fallback for token-less symbols
  std::vector<MergeSlot> table_;
  std::uint32_t table_shift_ = 64;
  // Merges whose parts are not tokens themselves, keyed by raw "left\0right" with lengths.
  std::unordered_map<std::string, std::pair<std::int32_t, TokenId>> slow_merges_;
  std::size_t n_merges_ = 0;
  bool ignore_merges_;
};

}  // namespace fucina::tokenizer
