#pragma once
// Incremental matching of text against a Grammar, and the set of tokens that may come next.
//
// Note [Grammar matcher]
// A parse in progress is a stack of grammar positions (the top: the character class to
// match next; below: where each enclosing rule continues); the matcher holds every stack the
// text so far allows (an ambiguous grammar keeps several). A stack is a linked list of nodes
// (position, parent) that are hash-consed, so equal stacks are one node and a set of stacks
// is a sorted list of node ids. Sets are interned too, and a step over one code point from
// a set is computed once and then looked up (per set: a table for ASCII; one entry for all
// code points beyond it when every class holds all or none of them; else per the classes
// that hold it), so the pushdown automaton becomes, lazily, a DFA over the sets the text
// actually visits.
// Bytes are decoded as UTF-8 on the way: the matcher's state is a byte state, a set and a
// partial character, with a 256-entry table of next byte states filled on first use, so one
// byte is one table read. A partial character is accepted only when some stack's class can
// still match a code point it can complete to (a token ending mid-character is allowed
// exactly when a continuation is). Overlong forms (E0 81 BB for "{"), surrogates and code
// points past U+10FFFF are refused: byte-level vocabularies have tokens for them, and they
// are not UTF-8. The text is complete when a stack is empty and no character is pending.
// Token masks walk the Vocabulary's trie through the same tables, pruning a subtree at the
// first refused byte, and are cached per byte state. End tokens are allowed only when the
// text is complete. Past 2^22 stack nodes or 2^16 sets the tables are rebuilt around the
// current state, so memory stays bounded over any generation.
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "fucina/grammar/grammar.hpp"
#include "fucina/grammar/vocabulary.hpp"

namespace fucina::grammar {

class ByteAutomaton;

class Matcher {
 public:
  // vocab may be null for byte-level use (accept/accepting).
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab = nullptr);
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;
  ~Matcher();

  // Consumes bytes (UTF-8; may end inside a character): true if the grammar allows them
  // here, else false and the state is unchanged.
  bool accept(std::string_view bytes);
  // Whether the text so far is a complete sentence of the grammar.
  bool complete() const;
  // Whether the grammar allows anything more (false: complete and nothing can follow).
  bool can_continue() const;

  // ---- tokens (needs the vocabulary) ----
  bool allows(TokenId id);
  // Consumes a token; false (state unchanged) when it is not allowed.
  bool accept_token(TokenId id);
  // How many leading tokens of `ids` the grammar allows one after another from here (an
  // end token ends them); consumes nothing.
  std::size_t allowed_prefix(std::span<const TokenId> ids);
  // One bit per token id (bit i of word i/64): the tokens allowed next.
  std::span<const std::uint64_t> allowed();
  // Sets the logits of the tokens not allowed to -infinity; returns how many stay.
  std::size_t mask(std::span<float> logits);

 private:
  // The state after `bytes` from `state` (0: refused).
  std::int32_t step(std::int32_t state, std::string_view bytes);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::unique_ptr<ByteAutomaton> automaton_;
  std::int32_t state_ = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs_;  // allowed(): allowed runs of the trie order
};

}  // namespace fucina::grammar
