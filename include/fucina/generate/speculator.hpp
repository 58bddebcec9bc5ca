#pragma once
// One sequence's speculative decoding (Note [Speculative decoding] in generator.hpp), shared
// by Generator and BatchGenerator: its drafts (generate/draft.hpp), their length and the
// cost gate (generate/draft_length.hpp), and sampling from the verified rows. Running the
// rows and rolling back the KV of the rejected ones is the caller's business (one KvCache,
// or a sequence of a PagedKvCache).
#include <span>
#include <vector>

#include "fucina/generate/draft.hpp"
#include "fucina/generate/draft_length.hpp"
#include "fucina/sample/sampler.hpp"

namespace fucina::generate {

class TokenStream;
struct Timings;

class Speculator {
 public:
  explicit Speculator(const SpeculativeOptions& options);
  bool enabled() const { return options_.enabled; }

  // The context is `tokens` (the cached tokens, then the sampled one not yet run).
  void reset(std::span<const tokenizer::TokenId> tokens);
  // A token was sampled: the context grew.
  void sampled(tokenizer::TokenId token);
  // The tokens to verify after the unrun one (empty: a plain step); `room`: rows after it
  // that the cache holds and that can yield a token before max_tokens.
  std::vector<tokenizer::TokenId> draft(TokenStream& out, std::int64_t room);

  struct Verified {
    std::size_t rows = 0;  // rows sampled from: the cache keeps their K/V, the rest is rolled back
    tokenizer::TokenId last = tokenizer::null_token;  // the last token sampled (to run next)
  };
  // rows: the logits of the unrun token and of each of `drafted` after it, as
  // forward_as_decode gives them. Samples from each in turn while the tokens sampled are
  // the drafted ones; counts the step in t.
  Verified verify(TokenStream& out, sample::Sampler& sampler, std::span<const float> rows,
                  std::span<const tokenizer::TokenId> drafted, Timings& t);
  // A forward of `rows` rows took `seconds`, where a plain step runs `plain_rows` (Note [Draft length]).
  void timed(std::int64_t plain_rows, std::int64_t rows, double seconds) { length_.timed(plain_rows, rows, seconds); }
  double row_cost() const { return length_.row_cost(); }

 private:
  SpeculativeOptions options_;
  NgramDrafter drafter_;
  DraftLength length_;
  tokenizer::TokenId shadow_ = tokenizer::null_token;  // the gate's free guess of the next token
};

}  // namespace fucina::generate
