#pragma once
// Drafts for speculative decoding without a draft model (Note [Speculative decoding] in
// generator.hpp): guesses of the tokens that follow a context, read off the context itself.
//
// Note [N-gram drafts]
// Every n-gram of the context (n = 1 .. kMaxNgram) is indexed with the tokens that followed
// it: how often each, and which one last. A draft is built one token at a time from its
// tip (the context, then the tokens drafted so far): the longest n-gram ending at the tip
// that occurred before proposes its most frequent follower, the latest one among equals.
// So a passage the text is re-emitting is copied from where it was last seen (prompt
// lookup: the longest recent n-gram proposes what followed it), a loop the text has fallen
// into continues, and where the longer n-grams are new the shorter ones' counts vote (an
// n-gram cache of the context). A 1-gram proposes only a follower seen at least twice: one
// token of agreement guesses too poorly to pay for its row. The draft ends where no n-gram
// matches.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "fucina/tokenizer/tokenizer.hpp"

namespace fucina::generate {

class NgramDrafter {
 public:
  static constexpr int kMaxNgram = 4;

  // Forgets everything, then indexes `context`.
  void reset(std::span<const tokenizer::TokenId> context);
  // The context grew by one token.
  void push(tokenizer::TokenId token);
  // Up to `max` tokens guessed to follow the context (fewer or none where nothing matches).
  std::vector<tokenizer::TokenId> draft(std::size_t max) const;
  std::span<const tokenizer::TokenId> context() const { return tokens_; }

 private:
  struct Followers {
    tokenizer::TokenId best = tokenizer::null_token;  // most frequent; the latest among equals
    std::int32_t best_count = 0;
  };
  // The follower proposed after `tip` (null_token: none).
  tokenizer::TokenId propose(std::span<const tokenizer::TokenId> tip) const;

  std::vector<tokenizer::TokenId> tokens_;
  std::unordered_map<std::uint64_t, Followers> followers_;  // by n-gram key
  std::unordered_map<std::uint64_t, std::int32_t> counts_;  // by (n-gram key, follower)
};

}  // namespace fucina::generate
