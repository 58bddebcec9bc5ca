#pragma once
// A set of token byte strings as a trie: one walk of the trie against a grammar visits a
// shared prefix of many tokens once, and drops a whole subtree at the first byte the
// grammar refuses.
//
// Layout: the trie nodes in preorder (the root, index 0, has no byte), each with its depth
// and the end of its subtree, so a walk is one pass over flat arrays that skips a refused
// subtree by jumping to its end. The tokens are numbered in the same order (their trie
// order), so a subtree's tokens are one range of it, and each subtree carries a summary of
// its bytes (Subtree) that lets a walk allow it whole without visiting it; a second summary
// stops at control characters (code tokens hold many line breaks), so that where they are
// refused a subtree is allowed but for the ranges below its first control bytes. A third,
// one byte (kinds), is coarse and read first.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fucina::grammar {

using TokenId = std::int32_t;

// What is below a trie node, the node's own byte included.
struct Subtree {
  std::array<std::uint32_t, 4> ascii{};  // the ASCII bytes used (bit c of word c / 32)
  std::uint16_t height = 0;              // bytes from the node to its deepest descendant, inclusive
  std::uint8_t utf8_ok = 0;              // bit p: every path down is a valid UTF-8 continuation from Utf8Phase p
  bool non_ascii = false;                // some byte >= 0x80

  // Whether every byte below is in `chars` (bit c of word c / 64) or, if `beyond`, >= 0x80.
  bool bytes_within(const std::array<std::uint64_t, 2>& chars, bool beyond) const {
    const std::uint64_t lo = ascii[0] | std::uint64_t{ascii[1]} << 32, hi = ascii[2] | std::uint64_t{ascii[3]} << 32;
    return (lo & ~chars[0]) == 0 && (hi & ~chars[1]) == 0 && (beyond || !non_ascii);
  }
};

// Coarse byte classes, for a one-byte summary of a subtree (Vocabulary::kinds) that a walk
// compares with the classes a state's loop holds whole before it reaches for the full
// summaries: most subtrees inside a string are words, and that needs no more than this.
namespace byte_kind {
// punctuation: the other printable ASCII; not_utf8 is a subtree's, never a byte's: some
// path down is no valid UTF-8 from between characters.
inline constexpr std::uint8_t letters = 1, digits = 2, space = 4, punctuation = 8, quote_or_backslash = 16, control = 32,
                              non_ascii = 64, not_utf8 = 128;
// Text inside a string: what a JSON string's loop holds whole.
inline constexpr std::uint8_t plain = letters | digits | space | punctuation | non_ascii;
constexpr std::uint8_t of(std::uint8_t b) {
  if (b >= 0x80) return non_ascii;
  if (b < 0x20 || b == 0x7F) return control;
  if ((b | 0x20) >= 'a' && (b | 0x20) <= 'z') return letters;
  if (b >= '0' && b <= '9') return digits;
  if (b == ' ') return space;
  if (b == '"' || b == '\\') return quote_or_backslash;
  return punctuation;
}
}  // namespace byte_kind

class TokenTrie {
 public:
  // The trie of the tokens `ids` (each with a non-empty piece, fewer than 65535 bytes).
  TokenTrie(const std::vector<std::string>& pieces, std::vector<TokenId> ids);
  TokenTrie() : TokenTrie({}, {}) {}

  // Trie in preorder (node 0 is the root).
  std::size_t nodes() const { return nodes_.size() - 1; }
  std::uint8_t byte(std::size_t node) const { return nodes_[node].byte; }
  std::uint16_t depth(std::size_t node) const { return nodes_[node].depth; }
  std::size_t max_depth() const { return max_depth_; }
  std::uint32_t subtree_end(std::size_t node) const { return nodes_[node].end; }
  const Subtree& below(std::size_t node) const { return summaries_[node].below; }
  // The subtree cut above its control characters (is_control): their nodes count as empty.
  const Subtree& above_controls(std::size_t node) const { return summaries_[node].above_controls; }
  // The least depth that could allow node's subtree by either summary (min of below's
  // height and above_controls' height + 1), capped at max_least_depth: a walk reads it from
  // the node's own record before it reaches for the summaries.
  static constexpr std::uint8_t max_least_depth = 255;
  std::uint8_t least_depth(std::size_t node) const { return nodes_[node].least_depth; }
  // The byte_kind bits of the bytes below node (its own included), and not_utf8 unless
  // every path down is valid UTF-8 from between characters; apart from the node records
  // (a walk reads it in preorder too, 1 byte a node).
  std::uint8_t kinds(std::size_t node) const { return kinds_[node]; }
  static constexpr bool is_control(std::uint8_t b) { return b < 0x20 || b == 0x7F; }
  // Calls f(k) for the first control nodes down each path of node's subtree, in preorder.
  template <class F>
  void for_each_control_root(std::size_t node, const F& f) const {
    const std::uint32_t end = nodes_[node].end;
    auto i = static_cast<std::size_t>(std::lower_bound(controls_.begin(), controls_.end(), node) - controls_.begin());
    while (i < controls_.size() && controls_[i] < end) {
      f(controls_[i]);
      i = after_control_[i];
    }
  }
  // The trie order of tokens: those ending at `node` are [first_token(node),
  // first_token(node + 1)) of it, those in its subtree [first_token(node),
  // first_token(subtree_end(node))).
  std::uint32_t first_token(std::size_t node) const { return nodes_[node].first_token; }
  TokenId token_in_trie_order(std::uint32_t i) const { return tokens_[i]; }
  std::size_t tokens_in_trie() const { return tokens_.size(); }
  // The bytes the trie's arrays take.
  std::size_t memory_bytes() const;

 private:
  // What a walk reads of every node it visits, 12 bytes, and a last record past the end
  // holding only first_token; the summaries apart (read only to skip a subtree).
  struct Node {
    std::uint32_t end = 0;          // the end of its subtree
    std::uint32_t first_token = 0;  // into tokens_
    std::uint16_t depth = 0;
    std::uint8_t byte = 0;
    std::uint8_t least_depth = 0;
  };
  struct Summaries {
    Subtree below, above_controls;
  };
  std::vector<Node> nodes_;
  std::vector<Summaries> summaries_;
  std::vector<std::uint8_t> kinds_;
  std::vector<std::uint32_t> controls_;       // the nodes of control bytes, in preorder
  std::vector<std::uint32_t> after_control_;  // i -> the first index of controls_ past controls_[i]'s subtree
  std::size_t max_depth_ = 0;
  std::vector<TokenId> tokens_;  // trie order
};

}  // namespace fucina::grammar
