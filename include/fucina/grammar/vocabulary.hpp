#pragma once
// The token byte strings a grammar mask is computed over, as a trie: one walk of the trie
// against the grammar visits a shared prefix of many tokens once, and drops a whole subtree
// at the first byte the grammar refuses.
//
// Layout: the trie nodes in preorder (the root, index 0, has no byte), each with its depth
// and the end of its subtree, so a walk is one pass over flat arrays that skips a refused
// subtree by jumping to its end.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fucina::grammar {

using TokenId = std::int32_t;

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

  // Trie in preorder (node 0 is the root).
  std::size_t nodes() const { return byte_.size(); }
  std::uint8_t byte(std::size_t node) const { return byte_[node]; }
  std::uint16_t depth(std::size_t node) const { return depth_[node]; }
  std::size_t max_depth() const { return max_depth_; }
  std::uint32_t subtree_end(std::size_t node) const { return end_[node]; }
  // Tokens whose bytes end at `node`.
  std::span<const TokenId> tokens_at(std::size_t node) const {
    return {tokens_.data() + tok_begin_[node], tokens_.data() + tok_begin_[node + 1]};
  }

 private:
  std::size_t size_;
  std::vector<std::string> pieces_;
  std::vector<bool> is_end_;
  std::vector<TokenId> end_tokens_;
  std::vector<std::uint8_t> byte_;
  std::vector<std::uint16_t> depth_;
  std::size_t max_depth_ = 0;
  std::vector<std::uint32_t> end_;
  std::vector<std::uint32_t> tok_begin_;  // nodes() + 1 offsets into tokens_
  std::vector<TokenId> tokens_;
};

}  // namespace fucina::grammar
