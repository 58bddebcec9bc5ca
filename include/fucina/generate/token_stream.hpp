#pragma once
// One request's output side, shared by Generator and BatchGenerator: sample a token from
// its logits, detokenize it (UTF-8 held back until complete), hold back and cut stop
// strings, call the step callback, and decide when generation ends (Note [Generation loop]
// in generator.hpp). How the logits are computed is the caller's business.
#include <cstdint>
#include <span>

#include "fucina/generate/generator.hpp"
#include "fucina/sample/stop.hpp"

namespace fucina::generate {

class TokenStream {
 public:
  // request and tok must outlive the stream. Negative max_tokens: at most `unlimited`.
  TokenStream(const tokenizer::Tokenizer& tok, const Request& request, std::int64_t unlimited);

  // Asked before each token: false once generation ended, max_tokens are generated
  // (Length) or the cancel flag is set (Cancelled).
  bool wants_more();
  // Samples the next token from logits and records it in the sampler; ends generation on
  // an end-of-generation token (Eos) or a stop string (StopString). Returns the token.
  tokenizer::TokenId push(sample::Sampler& sampler, std::span<const float> logits);
  // Ends generation for a reason the stream cannot see (ContextFull).
  void stop(StopReason reason);
  bool ended() const { return ended_; }
  // Releases the held-back text (the callback's final flush) and returns the result
  // (timings are the caller's).
  Result finish();

 private:
  void emit(tokenizer::TokenId token, const std::string& text, std::span<const float> logits);
  const tokenizer::Tokenizer& tok_;
  const Request& request_;
  std::int64_t limit_;
  tokenizer::StreamDecoder detok_;
  sample::StopMatcher stop_;
  Result result_;
  bool ended_ = false;
};

}  // namespace fucina::generate
