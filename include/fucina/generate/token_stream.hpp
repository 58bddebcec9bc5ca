#pragma once
// One request's output side, shared by Generator and BatchGenerator: sample a token from
// its logits (under the request's grammar, Note [Constrained sampling]), detokenize it
// (UTF-8 held back until complete), hold back and cut stop strings, call the step
// callback, and decide when generation ends (Note [Generation loop] in generator.hpp). How
// the logits are computed is the caller's business.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fucina/generate/generator.hpp"
#include "fucina/sample/stop.hpp"

namespace fucina::generate {

class TokenStream {
 public:
  // request and tok must outlive the stream. Negative max_tokens: at most `unlimited`.
  // `vocabulary` (grammar_vocabulary(tok)) is needed when the request has a grammar.
  TokenStream(const tokenizer::Tokenizer& tok, const Request& request, std::int64_t unlimited,
              std::shared_ptr<const grammar::Vocabulary> vocabulary = {});

  // Asked before each token: false once generation ended, max_tokens are generated
  // (Length) or the cancel flag is set (Cancelled).
  bool wants_more();
  // Samples the next token from logits and records it in the sampler; ends generation on
  // an end-of-generation token (Eos) or a stop string (StopString). Returns the token, or
  // null_token when the grammar is complete and allows no further token (Eos, nothing to run).
  tokenizer::TokenId push(sample::Sampler& sampler, std::span<const float> logits);
  // Tokens push() may still sample before max_tokens.
  std::int64_t remaining() const { return limit_ - static_cast<std::int64_t>(result_.tokens.size()); }
  // How many leading tokens of `drafted` the request's grammar allows after the tokens so
  // far (all of them without a grammar): the rest could never be sampled.
  std::size_t allowed_prefix(std::span<const tokenizer::TokenId> drafted);
  // Ends generation for a reason the stream cannot see (ContextFull).
  void stop(StopReason reason);
  bool ended() const { return ended_; }
  // Releases the held-back text (the callback's final flush) and returns the result
  // (timings are the caller's).
  Result finish();
  // The grammar's share of the time so far (checking, masking, the second draw).
  double grammar_seconds() const { return grammar_seconds_; }

 private:
  void emit(tokenizer::TokenId token, const std::string& text, std::span<const float> logits);
  const tokenizer::Tokenizer& tok_;
  const Request& request_;
  std::int64_t limit_;
  tokenizer::StreamDecoder detok_;
  sample::StopMatcher stop_;
  Result result_;
  bool ended_ = false;
  std::optional<grammar::Matcher> matcher_;
  std::vector<float> masked_;  // the logits row with refused tokens at -inf
  double grammar_seconds_ = 0;
};

}  // namespace fucina::generate
