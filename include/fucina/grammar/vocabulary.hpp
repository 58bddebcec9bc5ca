#pragma once
// The token byte strings a grammar mask is computed over: all of them as a trie
// (token_trie.hpp), and, for masks inside a string (Note [Plain tokens] in matcher.hpp),
// each token's length when it is plain text, and two more tries of the tokens that are not.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fucina/grammar/token_trie.hpp"

namespace fucina::grammar {

class Vocabulary {
 public:
  // pieces[id]: the bytes token id prints (may end inside a UTF-8 character); is_end[id]:
  // the token ends generation (allowed only where the grammar is complete). A token with no
  // bytes that is not an end token is never allowed.
  Vocabulary(const std::vector<std::string>& pieces, const std::vector<bool>& is_end);

  std::size_t size() const { return size_; }
  std::span<const TokenId> end_tokens() const { return end_tokens_; }
  bool is_end(TokenId id) const { return is_end_[static_cast<std::size_t>(id)]; }
  std::string_view piece(TokenId id) const { return pieces_[static_cast<std::size_t>(id)]; }

  // Every token with a piece (not end tokens, not empty pieces).
  const TokenTrie& trie() const { return trie_; }
  // The tokens with no trie node: end tokens and empty pieces.
  std::span<const TokenId> outside_trie() const { return outside_trie_; }

  // Plain text: a piece of whole, valid UTF-8 characters of at most max_plain_chars, none
  // of them a control character, a quote or a backslash (byte_kind::plain).
  static constexpr std::uint8_t max_plain_chars = 254, not_plain = 255;
  // By token id: the characters of a plain token, else not_plain (also end tokens and
  // empty pieces).
  std::span<const std::uint8_t> plain_chars() const { return plain_chars_; }
  // The tokens of plain text (of fewer than max_plain_chars) then a control character,
  // whatever follows it: inside a string they stop at the control character.
  const TokenTrie& control_trie() const { return control_trie_; }
  // The trie of the other tokens with a piece that are not plain.
  const TokenTrie& not_plain_trie() const { return not_plain_trie_; }

 private:
  std::size_t size_;
  std::vector<std::string> pieces_;
  std::vector<bool> is_end_;
  std::vector<TokenId> end_tokens_;
  std::vector<TokenId> outside_trie_;
  std::vector<std::uint8_t> plain_chars_;
  TokenTrie trie_, control_trie_, not_plain_trie_;
};

}  // namespace fucina::grammar
