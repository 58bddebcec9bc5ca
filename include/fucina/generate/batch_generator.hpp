#pragma once
// Many requests generating at once over one model: one forward per step serves every
// running sequence (model.hpp Note [Batched forward]), each with its own sampler, stop
// strings and text (TokenStream, as Generator). A server queues requests with add() and
// calls step() in its loop; `fucina run --parallel` and `fucina bench --parallel` run().
//
// Note [Continuous batching]: a step is one forward_batch of at most n_batch tokens. Up to
// n_parallel requests run at once, each as a sequence of one PagedKvCache; the next queued
// request is admitted when one finishes, whose blocks are freed at once. A step takes first
// one decode row for every running sequence that has sampled a token (its last sampled
// token, for the logits of the next), then prompt chunks of the running sequences still
// reading their prompts, in admission order, as many tokens as the budget leaves. A
// sequence samples from its row of the logits once its whole prompt has run and after each
// decode row. A prompt may run in other chunks than a solo prefill would (the budget splits
// it), which changes attention's kernel for those rows: logits move in the last bits, as
// between batch sizes in llama.cpp. A chunk that would overrun the shared KV budget waits a
// step; when nothing can run at all, the latest admitted sequence ends with ContextFull.
// A request admitted while a running sequence has already run a prefix of its prompt (at
// least one 32-position block: a chat's next turn, a shared system prompt) forks that
// prefix (PagedKvCache::fork: full blocks shared, not copied) and runs only the rest.
// Requests admitted in the same step share nothing (none has run its prompt yet).
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "fucina/generate/generator.hpp"
#include "fucina/generate/token_stream.hpp"
#include "fucina/model/paged_kv_cache.hpp"

namespace fucina::generate {

struct BatchOptions {
  std::int64_t n_parallel = 8;  // sequences running at once
  std::int64_t n_ctx = 0;       // per sequence; <= 0: the model's training context
  std::int64_t n_kv = 0;        // KV positions shared by all sequences; <= 0: n_parallel contexts
  std::int64_t n_batch = 512;   // tokens per step (>= n_parallel)
  model::KvType kv_type = model::KvType::f16;
  sample::SamplerConfig sampling{};  // for requests without their own
  // The token bytes of grammar requests (grammar_vocabulary(tok)); unset: built on the
  // first request with a grammar.
  std::shared_ptr<const grammar::Vocabulary> vocabulary{};
};

class BatchGenerator {
 public:
  // model, tok and ctx must outlive the BatchGenerator.
  BatchGenerator(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx, const BatchOptions& options);
  ~BatchGenerator();
  BatchGenerator(const BatchGenerator&) = delete;
  BatchGenerator& operator=(const BatchGenerator&) = delete;

  // Queues a request for `prompt`; returns its index (results are in this order). Throws
  // InvalidArgument for an empty prompt or one the context cannot hold.
  std::size_t add(std::span<const tokenizer::TokenId> prompt, Request request);
  // One forward over the running sequences; false when no request is left.
  bool step();
  // Steps until every request has finished; the results in add() order.
  std::vector<Result> run();

  bool finished(std::size_t request) const;
  const Result& result(std::size_t request) const;  // once finished
  std::int64_t running() const { return static_cast<std::int64_t>(running_.size()); }
  const model::PagedKvCache& cache() const { return cache_; }

 private:
  struct Sequence;
  void admit();
  void finish(Sequence& s);

  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  Context& ctx_;
  BatchOptions options_;
  model::PagedKvCache cache_;
  std::vector<Sequence> seqs_;     // per request
  std::deque<std::size_t> queue_;  // requests not yet admitted
  std::vector<std::size_t> running_;  // admitted, in admission order
};

}  // namespace fucina::generate
