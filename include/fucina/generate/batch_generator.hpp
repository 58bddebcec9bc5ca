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
// A request whose prefix a running sequence has still to run (the choices of one request,
// clients sharing a system prompt arriving together) waits for it, up to the steps that
// prefix takes, then forks it: admission holds back the queue behind it meanwhile.
//
// Note [Kept prefixes]: with keep_finished > 0, a sequence that finished (not cancelled)
// keeps its KV, its prompt and the tokens it generated but the last, up to keep_finished
// sequences, the most recently used last: a later request whose prompt starts with at least
// a block of it forks it as it would a running sequence's (a system prompt sent again, a
// chat's next turn). Kept sequences hold only blocks nobody needs yet: when a step's chunks
// need more blocks than are free, the oldest kept sequences are closed first.
//
// Note [Speculative batches]: with BatchOptions::speculative enabled, each decoding
// sequence drafts as Generator does (Note [Speculative decoding] in generator.hpp; its own
// drafts, length and cost gate, a speculator per sequence): its decode chunk is its last
// sampled token and the k tokens drafted after it, k cut to the budget left once every
// other decoding sequence has its row. The decode chunks lead the step's forward under
// OneRowArithmetic(their rows) (one_row.hpp), so every decode row, drafted or not, is bit for
// bit its sequence's one-token forward whatever else runs in the step, while the prompt
// chunks after them sum as in a forward of their own (one forward: the weights are read
// from memory once for both; a second pass over each matrix mostly hits the cache). The sequence samples
// from its rows while they hold the drafted tokens, and the K/V of the rows after the first
// miss are cut from its blocks (PagedKvCache::truncate). So at temperature 0 a sequence
// prints the same bytes with speculation on or off, and a seeded sampler draws the same
// tokens. With speculation off, decode rows share the prompt chunks' forward and its
// summation order (Note [Batched forward]).
//
// Note [Long-running batches]: a server adds requests for ever, so it must not keep what
// finished. release(i) moves a finished request's result out and frees its slot, whose
// index a later add() reuses. A request's cancel flag is read at every step, also while it
// is queued or reading its prompt: the step that sees it set ends the request (Cancelled)
// and frees its blocks before its forward runs.
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
  std::int64_t keep_finished = 0;    // finished sequences whose KV is kept (Note [Kept prefixes])
  SpeculativeOptions speculative{};  // Note [Speculative batches]
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

  // Queues a request for `prompt`; returns its index (results are in this order, until
  // release() frees an index for reuse). Throws InvalidArgument for an empty prompt or one
  // the context cannot hold.
  std::size_t add(std::span<const tokenizer::TokenId> prompt, Request request);
  // One forward over the running sequences; false when no request is left.
  bool step();
  // Steps until every request has finished; the results in add() order.
  std::vector<Result> run();

  bool finished(std::size_t request) const;
  const Result& result(std::size_t request) const;  // once finished
  // Moves out the result of a finished request and forgets it (Note [Long-running batches]).
  Result release(std::size_t request);
  // Requests added and not yet released, finished or not.
  std::int64_t held() const;
  std::int64_t running() const { return static_cast<std::int64_t>(running_.size()); }
  std::int64_t kept() const { return static_cast<std::int64_t>(kept_.size()); }
  const model::PagedKvCache& cache() const { return cache_; }

 private:
  struct Sequence;
  void admit();
  // The sequence and length of the longest prefix of `prompt` a running or kept sequence
  // holds, and the longest a running one will hold once its prompt has run.
  struct Prefix {
    model::SeqId from = -1;
    std::size_t ready = 0, coming = 0;
  };
  Prefix shared_prefix(std::span<const tokenizer::TokenId> prompt) const;
  // One forward's chunks and the request each belongs to.
  struct Plan {
    std::vector<model::Model::SeqChunk> chunks;
    std::vector<std::size_t> owners;
  };
  // Runs a plan's forward and samples (or verifies) from its rows.
  void run_forward(const Plan& plan);
  void finish(Sequence& s);
  void retire();  // finishes the running sequences that ended or are cancelled
  void close_or_keep(Sequence& s);
  std::int64_t drop_oldest_kept();  // returns the blocks it freed

  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  Context& ctx_;
  BatchOptions options_;
  model::PagedKvCache cache_;
  std::vector<Sequence> seqs_;     // per request
  std::deque<std::size_t> queue_;  // requests not yet admitted
  std::vector<std::size_t> running_;  // admitted, in admission order
  std::vector<std::size_t> unused_;   // released indices of seqs_, for add() to reuse
  struct Kept {
    model::SeqId seq;
    std::vector<tokenizer::TokenId> tokens;  // what its cache holds
  };
  std::deque<Kept> kept_;  // Note [Kept prefixes], least recently used first
};

}  // namespace fucina::generate
