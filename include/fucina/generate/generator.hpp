#pragma once
// Text generation over one sequence: a model, its KV cache and a sampler, fed a prompt and
// decoding token by token. `fucina run` is a thin shell over it; a server runs one
// Generator per request or per client slot (cache, sampler and history are per-object
// state; Request::sampling gives a request its own sampler on a reused slot). Request,
// Step, Result and StopReason do not depend on how the forward pass runs, so a batched
// decoder stepping many sequences at once can keep them.
//
// Note [Generation loop]
// feed_prompt(ids) makes the cache hold exactly `ids`: the longest prefix it shares with the
// tokens already cached stays (the next turn of a chat, rendered in full again, shares the
// whole conversation so far) and only the rest is run. Reuse compares token ids, not text,
// so a turn sees the same tokens as the full render fed to an empty cache; a generated token
// that the render's encoding spells otherwise (a byte token <0x6C> where the text "l"
// encodes to the token "l") only shortens the reused prefix.
// generate(request) then repeats, until a stop reason:
//   max_tokens generated -> Length
//   cancel flag set -> Cancelled (read before each token: none is sampled after it is set)
//   run the previous sampled token through the model for the logits (the cache is full ->
//   ContextFull), sample from them and record the token in the sampler
//   with a grammar: the sampled token must be one the grammar allows next; if it is not,
//   the logits of every token it does not allow are set to -inf and the sampler draws again
//   (Note [Constrained sampling])
//   an end-of-generation token (unless ignore_eos) -> Eos; it prints nothing
//   detokenize (StreamDecoder with continues_text: llama.cpp's token_to_piece bytes, UTF-8
//   held back until complete), hold back a possible stop string (sample/stop.hpp) -> StopString
// So the last sampled token is not run when generation ends (nothing needs its logits yet):
// the cache holds the prompt and every generated token but the last. generate() again
// continues the text from it; feed_prompt() drops it (a chat's next render spells it anyway).
//
// Note [Speculative decoding]
// Lossless, without a draft model (one sequence's state: generate/speculator.hpp; batches:
// Note [Speculative batches]). Before running the previous sampled token t, k tokens
// d1..dk are drafted from the context (generate/draft.hpp; k from generate/draft_length.hpp,
// cut to what the grammar allows, to the tokens max_tokens leaves and to the room in the
// cache) and t, d1..dk run in one forward of k+1 rows: forward_as_decode(), whose row i is
// bit for bit the logits plain decoding computes after d_i, and whose K/V are plain
// decoding's (Note [One-row arithmetic]). Then the stream samples from row 0 exactly as
// plain decoding would; while the token sampled from row i is d_{i+1}, row i+1 holds the
// logits plain decoding would run for it, and the stream samples from it too. At the first
// token that differs from the draft, the rows after it are dropped (KvCache::truncate) and
// the token sampled becomes the next t. Every token is thus sampled by the same sampler
// calls, from the same logits, as in plain decoding: greedy output is byte-identical, and so
// is sampled output with the same seed (draw i stays draw i). This is the exact rule of
// speculative sampling for a drafted token d, in its sample-then-compare form: d is
// accepted with probability p(d) (p: the sampler's final distribution), and on rejection
// the token is a draw from p with d removed and renormalised (p conditioned on not d).
// Stop strings, EOS, cancellation and grammars act token by token as in plain decoding.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fucina/generate/draft_length.hpp"
#include "fucina/generate/speculator.hpp"
#include "fucina/grammar/grammar.hpp"
#include "fucina/grammar/matcher.hpp"
#include "fucina/grammar/vocabulary.hpp"
#include "fucina/model/model.hpp"
#include "fucina/sample/sampler.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace fucina::generate {

class TokenStream;

enum class StopReason {
  Length,       // max_tokens generated
  Eos,          // the model emitted an end-of-generation token
  StopString,   // a stop string appeared in the text
  ContextFull,  // the KV cache has no room for another token
  Cancelled,    // the request's cancel flag was set
};
// "length", "eos", "stop string", "context full", "cancelled".
std::string_view to_string(StopReason reason);

// Per-sequence settings, fixed for the Generator's life.
struct GeneratorOptions {
  std::int64_t n_ctx = 0;      // KV cache length; <= 0: the model's training context
  model::KvType kv_type = model::KvType::f16;  // KV cache element type (f16 as llama.cpp, f32 or q8_0)
  std::int64_t n_batch = 512;  // prompt tokens per forward pass
  sample::SamplerConfig sampling{};
  SpeculativeOptions speculative{};  // Note [Speculative decoding]
  // The token bytes grammars are matched against (grammar_vocabulary(tok)); unset: built on
  // the first request with a grammar. Generators of one tokenizer may share one.
  std::shared_ptr<const grammar::Vocabulary> vocabulary{};
};

// Note [Constrained sampling]
// A request's grammar constrains the generated text (not the prompt): the bytes each token
// prints (llama.cpp's token_to_piece, as streamed) must continue a sentence of the grammar,
// a token may end inside a UTF-8 character when the grammar allows a character it can
// complete to, and an end-of-generation token is allowed only once the text is complete
// (with a grammar, ignore_eos does not extend a complete text). The sampled token is checked
// first and the whole vocabulary masked only when it is refused, as llama.cpp does: with no
// truncation (top-k/top-p/min-p off) the result is exactly a draw from the masked
// distribution (p(t) + P(refused)·p(t)/Z = p(t)/Z). A max_tokens cut reports Length, so a
// caller knows the text may be incomplete; a complete text that nothing can follow and no
// end token can close (a vocabulary without one) ends as Eos.

// The bytes each token of `tok` prints and which tokens end generation.
std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const tokenizer::Tokenizer& tok);

// One sampled token as the step callback sees it.
struct Step {
  tokenizer::TokenId token = tokenizer::null_token;  // null_token: the final flush
  std::string_view text;           // text released by this token (may be empty: held back)
  // The row the token was sampled from (empty at the flush); valid during the call only.
  std::span<const float> logits;
};
using StepCallback = std::function<void(const Step&)>;

struct Request {
  std::int64_t max_tokens = 128;  // < 0: until EOS or the context is full
  // A fresh sampler for this request (its penalty history: the cached tokens); unset: the
  // Generator's sampler goes on (a chat's turns share one, as llama.cpp's does).
  std::optional<sample::SamplerConfig> sampling{};
  std::vector<std::string> stops{};  // stop strings (never part of the text)
  bool ignore_eos = false;        // keep going after an end-of-generation token
  // Read before each token; once true, generation ends with Cancelled.
  const std::atomic<bool>* cancel = nullptr;
  // The text must match this grammar (Note [Constrained sampling]); null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar{};
  // Called for every sampled token, then once with the held-back rest (token null_token);
  // the texts together are Result::text.
  StepCallback on_step{};
};

struct Timings {
  std::int64_t prompt_tokens = 0;  // run by the last feed_prompt (not those reused)
  double prompt_seconds = 0;
  std::int64_t gen_tokens = 0;     // sampled, a final end-of-generation token included
  double gen_seconds = 0;
  // Of gen_seconds: the grammar's work (checking, masking, the second draw), 0 without one.
  double grammar_seconds = 0;
  // Speculative decoding: forwards that verified drafted tokens, the tokens they verified
  // and those sampled as drafted.
  std::int64_t verify_steps = 0, drafted = 0, accepted = 0;
};

struct Result {
  std::string text;
  std::vector<tokenizer::TokenId> tokens;  // every sampled token
  StopReason reason = StopReason::Length;
  Timings timings;
};

class Generator {
 public:
  // model, tok and ctx must outlive the Generator. One Model and Tokenizer serve any number
  // of Generators; give Generators that run on different threads a Context each.
  Generator(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx, const GeneratorOptions& options);

  // Makes the cache hold `ids` (Note [Generation loop]); returns how many were run (at
  // least the last one). Throws InvalidArgument, cache unchanged, for no ids or too many.
  std::int64_t feed_prompt(std::span<const tokenizer::TokenId> ids);
  Result generate(const Request& request);

  std::span<const float> logits() const { return logits_; }  // after the last token run
  std::span<const tokenizer::TokenId> cached_tokens() const { return cached_; }
  const model::KvCache& cache() const { return cache_; }
  const tokenizer::Tokenizer& tokenizer() const { return tok_; }

 private:
  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  Context& ctx_;
  std::int64_t n_batch_;
  model::KvCache cache_;
  sample::Sampler sampler_;
  std::shared_ptr<const grammar::Vocabulary> vocabulary_;
  std::vector<tokenizer::TokenId> cached_;  // the tokens whose K/V the cache holds
  std::vector<float> logits_;
  tokenizer::TokenId unrun_ = tokenizer::null_token;  // sampled, not yet through the model
  Timings prompt_;  // of the last feed_prompt

  // Note [Speculative decoding]: runs unrun_ and `drafted` in one forward and samples from
  // the rows while they hold plain decoding's logits.
  void verify(TokenStream& out, std::span<const tokenizer::TokenId> drafted, Timings& t);
  // Records a sampled token: the context grew.
  void sampled(tokenizer::TokenId token);
  Speculator spec_;  // drafts over cached_ and unrun_
};

}  // namespace fucina::generate
