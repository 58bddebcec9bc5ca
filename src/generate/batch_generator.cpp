#include "fucina/generate/batch_generator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "fucina/core/error.hpp"
#include "fucina/generate/speculator.hpp"
#include "fucina/model/one_row.hpp"

namespace fucina::generate {

namespace {
using clock_type = std::chrono::steady_clock;
double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

struct BatchGenerator::Sequence {
  std::vector<tokenizer::TokenId> prompt;
  std::unique_ptr<Request> request;  // TokenStream holds a reference: a stable address
  std::unique_ptr<sample::Sampler> sampler;
  std::unique_ptr<TokenStream> out;
  model::SeqId seq = -1;
  std::size_t fed = 0;     // prompt tokens in the cache
  std::size_t reused = 0;  // of those, forked from another sequence
  tokenizer::TokenId unrun = tokenizer::null_token;
  std::unique_ptr<Speculator> spec;  // Note [Speculative batches]
  std::vector<tokenizer::TokenId> rows;  // this step's decode chunk: unrun, then the drafted tokens
  Timings verified;                      // verify_steps, drafted and accepted
  bool done = false;
  Result result;
  clock_type::time_point admitted, prompt_done;
};

BatchGenerator::BatchGenerator(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx,
                               const BatchOptions& options)
    : model_(model),
      tok_(tok),
      ctx_(ctx),
      options_(options),
      cache_([&] {
        FUCINA_CHECK(options.n_parallel >= 1, InvalidArgument, "[generate] --parallel must be at least 1, got {}",
                     options.n_parallel);
        FUCINA_CHECK(options.n_batch >= options.n_parallel, InvalidArgument,
                     "[generate] the batch of {} tokens cannot hold one row of each of {} sequences", options.n_batch,
                     options.n_parallel);
        validate(options.speculative);
        const std::int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : model.config().n_ctx_train;
        const std::int64_t n_kv = options.n_kv > 0 ? options.n_kv : model::PagedKvCache::budget_for(options.n_parallel, n_ctx);
        return model.new_paged_cache(n_kv, n_ctx, options.kv_type);
      }()) {}

BatchGenerator::~BatchGenerator() = default;

std::size_t BatchGenerator::add(std::span<const tokenizer::TokenId> prompt, Request request) {
  FUCINA_CHECK(!prompt.empty(), InvalidArgument, "[generate] the prompt has no tokens");
  if (static_cast<std::int64_t>(prompt.size()) >= cache_.capacity())
    fail(ErrorCode::InvalidArgument,
         fmt::format("the prompt has {} tokens, the context holds {}", prompt.size(), cache_.capacity()));
  Sequence s;
  s.prompt.assign(prompt.begin(), prompt.end());
  s.request = std::make_unique<Request>(std::move(request));
  s.sampler = std::make_unique<sample::Sampler>(s.request->sampling ? *s.request->sampling : options_.sampling);
  for (const auto id : s.prompt) s.sampler->accept(id);
  if (s.request->grammar && !options_.vocabulary) options_.vocabulary = grammar_vocabulary(tok_);
  s.out = std::make_unique<TokenStream>(tok_, *s.request, cache_.capacity(), options_.vocabulary);
  s.spec = std::make_unique<Speculator>(options_.speculative);
  std::size_t index = seqs_.size();
  if (unused_.empty()) {
    seqs_.push_back(std::move(s));
  } else {
    index = unused_.back();
    unused_.pop_back();
    seqs_[index] = std::move(s);
  }
  queue_.push_back(index);
  return index;
}

bool BatchGenerator::finished(std::size_t request) const { return seqs_.at(request).done; }
const Result& BatchGenerator::result(std::size_t request) const {
  FUCINA_CHECK(finished(request), InvalidArgument, "[generate] request {} has not finished", request);
  return seqs_[request].result;
}

std::int64_t BatchGenerator::held() const { return static_cast<std::int64_t>(seqs_.size() - unused_.size()); }

Result BatchGenerator::release(std::size_t request) {
  FUCINA_CHECK(finished(request), InvalidArgument, "[generate] request {} has not finished", request);
  Result r = std::move(seqs_[request].result);
  seqs_[request] = Sequence{};  // its prompt and request freed too
  unused_.push_back(request);
  return r;
}

BatchGenerator::Prefix BatchGenerator::shared_prefix(std::span<const tokenizer::TokenId> prompt) const {
  // Never the last prompt token: its logits are needed.
  const auto common = [&](std::span<const tokenizer::TokenId> held) {
    const auto n = std::mismatch(held.begin(), held.end(), prompt.begin(), prompt.end()).first - held.begin();
    return std::min(static_cast<std::size_t>(n), prompt.size() - 1);
  };
  Prefix best;
  for (const std::size_t r : running_) {
    const Sequence& o = seqs_[r];
    const std::size_t c = common(o.prompt);
    if (std::min(c, o.fed) > best.ready) best.ready = std::min(c, o.fed), best.from = o.seq;
    best.coming = std::max(best.coming, c);
  }
  for (const Kept& k : kept_)
    if (const std::size_t c = common(k.tokens); c > best.ready) best.ready = c, best.from = k.seq;
  return best;
}

void BatchGenerator::admit() {
  // A queued request cancelled (or given no tokens to make) ends without running.
  std::erase_if(queue_, [&](std::size_t r) {
    Sequence& s = seqs_[r];
    if (s.out->wants_more()) return false;
    finish(s);
    return true;
  });
  const auto block = static_cast<std::size_t>(cache_.block_size());
  while (!queue_.empty() && static_cast<std::int64_t>(running_.size()) < options_.n_parallel) {
    Sequence& s = seqs_[queue_.front()];
    const Prefix p = shared_prefix(s.prompt);
    if (p.coming >= p.ready + block) break;  // a running sequence is still reading more of it
    queue_.pop_front();
    s.admitted = clock_type::now();
    // At least one block, forked rather than run again.
    if (p.from >= 0 && p.ready >= block && cache_.free_blocks() > 0) {
      s.seq = cache_.fork(ctx_, p.from, static_cast<std::int64_t>(p.ready));
      s.fed = s.reused = p.ready;
      // A kept sequence just used becomes the most recently used.
      const auto k = std::find_if(kept_.begin(), kept_.end(), [&](const Kept& e) { return e.seq == p.from; });
      if (k != kept_.end()) {
        Kept used = std::move(*k);
        kept_.erase(k);
        kept_.push_back(std::move(used));
      }
    } else {
      s.seq = cache_.open();
    }
    running_.push_back(static_cast<std::size_t>(&s - seqs_.data()));
  }
}

void BatchGenerator::finish(Sequence& s) {
  const auto now = clock_type::now();
  if (s.seq < 0) s.admitted = now;                // never admitted
  if (s.prompt_done < s.admitted) s.prompt_done = now;  // ended before its prompt had run
  s.result = s.out->finish();
  s.result.timings = {.prompt_tokens = static_cast<std::int64_t>(s.prompt.size() - s.reused),
                      .prompt_seconds = seconds_between(s.admitted, s.prompt_done),
                      .gen_tokens = static_cast<std::int64_t>(s.result.tokens.size()),
                      .gen_seconds = seconds_between(s.prompt_done, now),
                      .grammar_seconds = s.out->grammar_seconds(),
                      .verify_steps = s.verified.verify_steps,
                      .drafted = s.verified.drafted,
                      .accepted = s.verified.accepted};
  if (s.seq >= 0) close_or_keep(s);
  s.done = true;
  s.out.reset();
  s.sampler.reset();
  s.spec.reset();
}

void BatchGenerator::close_or_keep(Sequence& s) {
  const std::int64_t n = cache_.size(s.seq);
  if (options_.keep_finished <= 0 || s.result.reason == StopReason::Cancelled || n < cache_.block_size()) {
    cache_.close(s.seq);
    return;
  }
  // The cache holds the prompt read so far, then each generated token but the last.
  std::vector<tokenizer::TokenId> tokens(s.prompt.begin(), s.prompt.begin() + static_cast<std::ptrdiff_t>(s.fed));
  for (std::size_t i = 0; static_cast<std::int64_t>(tokens.size()) < n; ++i) tokens.push_back(s.result.tokens.at(i));
  kept_.push_back({s.seq, std::move(tokens)});
  if (static_cast<std::int64_t>(kept_.size()) > options_.keep_finished) drop_oldest_kept();
}

std::int64_t BatchGenerator::drop_oldest_kept() {
  const std::int64_t before = cache_.free_blocks();
  cache_.close(kept_.front().seq);
  kept_.pop_front();
  return cache_.free_blocks() - before;
}

void BatchGenerator::retire() {
  std::erase_if(running_, [&](std::size_t r) {
    Sequence& s = seqs_[r];
    if (s.out->wants_more()) return false;  // ends at max_tokens or a cancel now, not a step later
    finish(s);
    return true;
  });
}

bool BatchGenerator::step() {
  retire();  // cancelled since the last step: their blocks are free for this one
  admit();
  if (running_.empty()) return false;
  // Note [Speculative batches]: the decode chunks lead the plan, in one-row arithmetic.
  const bool speculative = options_.speculative.enabled;
  Plan plan;
  std::int64_t budget = options_.n_batch, free_blocks = cache_.free_blocks();
  const auto take = [&](std::size_t r, std::span<const tokenizer::TokenId> ids, bool every_row) {
    const std::int64_t blocks = cache_.blocks_needed(seqs_[r].seq, static_cast<std::int64_t>(ids.size()));
    while (blocks > free_blocks && !kept_.empty()) free_blocks += drop_oldest_kept();
    if (blocks > free_blocks) return false;
    free_blocks -= blocks;
    budget -= static_cast<std::int64_t>(ids.size());
    plan.chunks.push_back({seqs_[r].seq, ids, every_row});
    plan.owners.push_back(r);
    return true;
  };
  const auto decoding = [&](const Sequence& s) { return s.unrun != tokenizer::null_token && s.out->wants_more(); };
  // Decode rows, each sequence's drafted rows in what the budget leaves after one row for each.
  std::int64_t rows_left = std::count_if(running_.begin(), running_.end(), [&](std::size_t r) { return decoding(seqs_[r]); });
  for (const std::size_t r : running_) {
    Sequence& s = seqs_[r];
    if (!decoding(s)) continue;
    --rows_left;
    const std::int64_t size = cache_.size(s.seq);
    if (size >= cache_.capacity()) {
      s.out->stop(StopReason::ContextFull);
      continue;
    }
    const std::int64_t room = std::min({cache_.capacity() - size, s.out->remaining(), budget - rows_left}) - 1;
    s.rows = s.spec->draft(*s.out, room);
    s.rows.insert(s.rows.begin(), s.unrun);
    if (s.rows.size() > 1 && take(r, s.rows, true)) continue;
    s.rows.resize(1);
    take(r, s.rows, false);
  }
  const std::size_t decode_chunks = plan.chunks.size();
  std::int64_t decode_rows = 0;
  for (const auto& c : plan.chunks) decode_rows += static_cast<std::int64_t>(c.ids.size());
  for (const std::size_t r : running_) {  // prompt chunks
    Sequence& s = seqs_[r];
    if (budget <= 0) break;
    if (s.fed == s.prompt.size() || s.out->ended()) continue;
    const std::size_t n = std::min(s.prompt.size() - s.fed, static_cast<std::size_t>(budget));
    take(r, std::span(s.prompt).subspan(s.fed, n), false);
  }
  if (plan.chunks.empty()) {  // nothing fits the KV budget: free the latest sequence's blocks
    for (auto it = running_.rbegin(); it != running_.rend(); ++it)
      if (!seqs_[*it].out->ended()) {
        seqs_[*it].out->stop(StopReason::ContextFull);
        break;
      }
  } else if (!speculative) {
    run_forward(plan);
  } else {
    model::OneRowArithmetic one_row(decode_rows);
    const auto t0 = clock_type::now();
    run_forward(plan);
    // Note [Draft length]: a decode-only forward's time by its rows, against a plain step's
    // one row per decoding sequence (a step with prompt rows says nothing about them).
    if (decode_chunks > 0 && decode_chunks == plan.chunks.size()) {
      const double seconds = seconds_between(t0, clock_type::now());
      for (const std::size_t r : plan.owners)
        if (seqs_[r].spec) seqs_[r].spec->timed(static_cast<std::int64_t>(decode_chunks), decode_rows, seconds);
    }
  }
  retire();
  return true;
}

void BatchGenerator::run_forward(const Plan& plan) {
  if (plan.chunks.empty()) return;
  const auto out = model_.forward_batch(ctx_, cache_, plan.chunks);
  const auto logits = out.data();  // read in place
  const auto vocab = static_cast<std::size_t>(model_.config().n_vocab);
  std::size_t row = 0;
  for (std::size_t j = 0; j < plan.chunks.size(); ++j) {
    const model::Model::SeqChunk& chunk = plan.chunks[j];
    Sequence& s = seqs_[plan.owners[j]];
    const std::size_t n = chunk.every_row ? chunk.ids.size() : 1;
    const std::span<const float> rows(logits.data() + row * vocab, n * vocab);
    row += n;
    if (s.fed < s.prompt.size()) {
      s.fed += chunk.ids.size();
      if (s.fed < s.prompt.size()) continue;
      s.prompt_done = clock_type::now();
      s.spec->reset(s.prompt);
      if (!s.out->wants_more()) continue;
    }
    if (chunk.every_row) {  // Note [Speculative decoding]: keep the K/V of the rows sampled from
      const std::int64_t n0 = cache_.size(s.seq) - static_cast<std::int64_t>(n);
      const auto v = s.spec->verify(*s.out, *s.sampler, rows, chunk.ids.subspan(1), s.verified);
      s.unrun = v.last != tokenizer::null_token ? v.last : s.unrun;
      cache_.truncate(s.seq, n0 + static_cast<std::int64_t>(v.rows));
      continue;
    }
    s.unrun = s.out->push(*s.sampler, rows);
    if (s.unrun != tokenizer::null_token) s.spec->sampled(s.unrun);
  }
}

std::vector<Result> BatchGenerator::run() {
  while (step()) {
  }
  std::vector<Result> results;
  for (const Sequence& s : seqs_) results.push_back(s.result);
  return results;
}

}  // namespace fucina::generate
