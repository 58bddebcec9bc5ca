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
// first refused byte (and skipping whole the subtrees a state allows, Note [Loops]), and are
// cached per byte state. End tokens are allowed only when the text is complete. Past 2^22
// stack nodes or 2^16 sets the tables are rebuilt around the current state, so memory stays
// bounded over any generation.
//
// Note [Loops]
// Inside a JSON string almost every token is allowed, and with a maxLength every position
// is a new state, so a walk of the whole trie (333k nodes for Qwen2's 152k tokens) would be
// paid per token. Instead a set's classes split the characters into groups by which stacks
// hold them, and the group the set mostly moves on (the one holding the code points beyond
// ASCII when the classes treat those alike, else the largest) is its loop: every character
// of it leads to one next set. Following next sets while each group is within the next's
// gives the loop's depth: any valid UTF-8 of at most that many bytes over the group is
// allowed (a string with k characters left: k; an unbounded one: any), measured lazily only
// as deep as a subtree asks. The trie stores per node the ASCII bytes below it, whether any
// byte >= 0x80 is, its height, and from which UTF-8 phases every path is valid
// (utf8_prefix.hpp). A subtree whose bytes are within a state's loop, valid from the state's
// phase and no higher than the depth is allowed whole: its tokens are one run of the trie
// order, found without visiting it. Most such subtrees (words, inside a string) are told
// from one byte per node, the kinds of bytes below (letters, digits, space, other
// printable, quote or backslash, control, beyond ASCII, not UTF-8), against the kinds the
// loop holds whole: no subtree is too small to skip that way, and the full summary is read
// only for the rest. A second summary stops at control characters: where
// the loop's sets refuse them (JSON strings do), a subtree whose part above them fits (one
// byte short of the depth, so the control byte meets a set of the loop) is allowed but for
// the ranges under its first control bytes. Anything else is visited as before. The runs
// become bits by token id by setting them, or, when most tokens are allowed, by setting all
// and clearing the gaps. tests/grammar/mask_test.cpp checks every mask against the tokens'
// own checks.
// A state a walk steps into (not a leaf) has its depth measured 16 bytes deep, further
// only when a subtree whose kinds its loop holds asks: the few short tokens after a
// string's closing quote make no sets for loops they never enter.
//
// Note [Plain tokens]
// Even so, a walk inside a string decides ~4,000 subtrees, each a far load (the next
// sibling's record, in a trie of 13 MB), for a mask whose answer for most tokens follows from
// two facts about them. A token is plain when it is whole, valid UTF-8 characters with no
// control character, quote or backslash (byte_kind::plain); the vocabulary keeps, by token
// id, the characters of each plain token (at most 254; 255 for the rest). Where a state
// stands between characters and its loop holds every plain character, a plain token of at
// most depth characters is allowed (each character leads along the loop's chain), and when
// the depth is exact and the set at the chain's end refuses every plain character, a
// longer one is refused; then the mask of the plain tokens is one compare of 64 lengths
// with the depth per word (kernels/bits_at_most.hpp). The tokens of plain text then a
// control character (code's line breaks) have a trie of their own, not walked at all where
// the loop's sets and the set it ends in refuse control characters (the control character
// meets one of them, or plain text goes past the end); only the other tokens (quotes,
// escapes, pieces of characters, very long runs: a third trie, 4,720 nodes for Qwen2's
// 152k tokens) are always walked. Anywhere else (keys, numbers, a string whose loop ends
// where plain text may go on) the whole trie is walked as before.
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
  // Collects in runs_ the tokens of `trie` allowed from state_, as runs of its trie order.
  void walk(const TokenTrie& trie);
  // The state after `bytes` from `state` (0: refused).
  std::int32_t step(std::int32_t state, std::string_view bytes);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::unique_ptr<ByteAutomaton> automaton_;
  std::int32_t state_ = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs_;  // allowed(): allowed runs of the trie order
};

}  // namespace fucina::grammar
