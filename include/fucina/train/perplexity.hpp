#pragma once
// The perplexity of a model on a text, measured as llama-perplexity measures it, so the two
// numbers can be compared (`fucina perplexity`, docs/DEFAULT-MODEL.md).
//
// Note [Perplexity protocol]: the whole text is tokenized (BOS first when the vocabulary adds
// one) and cut into chunks of n_ctx tokens; a tail shorter than a chunk is dropped. Each chunk
// runs alone from an empty cache, its first token replaced by BOS when the vocabulary adds
// one, and only its second half is scored: the logits of positions n_ctx/2 .. n_ctx - 2
// against the token that follows, so every scored token sees at least n_ctx/2 tokens of
// context. The negative log-likelihood of a token is a float log-softmax summed in double,
// PPL = exp(mean), and its error is llama-perplexity's (the standard error of the mean
// log-likelihood, times PPL). Bits per byte divide the total in bits by the bytes of the
// scored tokens' pieces: a number that does not depend on the vocabulary.
#include <cstdint>
#include <functional>
#include <string_view>

#include "fucina/model/model.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace fucina::train {

struct PerplexityOptions {
  std::int64_t n_ctx = 512;    // tokens per chunk (at most the model's context)
  std::int64_t n_chunks = -1;  // < 0: every whole chunk of the text
};

struct PerplexityResult {
  std::int64_t chunks = 0;
  std::int64_t scored_tokens = 0;
  std::int64_t scored_bytes = 0;
  double mean_nll = 0;  // nats per scored token
  double ppl = 0, ppl_error = 0;
  double bits_per_byte = 0;
};

// Throws InvalidArgument, with the counts, when the text has fewer than 2 · n_ctx tokens (as
// llama-perplexity refuses it) or n_ctx is outside [8, the model's context]. on_chunk, when
// set, is called after each chunk with its number (from 1) and the perplexity so far.
PerplexityResult perplexity(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx,
                            std::string_view text, const PerplexityOptions& options = {},
                            const std::function<void(std::int64_t, double)>& on_chunk = {});

}  // namespace fucina::train
