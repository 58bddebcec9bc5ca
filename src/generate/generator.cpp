#include "fucina/generate/generator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "fucina/core/error.hpp"
#include "fucina/generate/token_stream.hpp"

namespace fucina::generate {

namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

}  // namespace

std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const tokenizer::Tokenizer& tok) {
  std::vector<std::string> pieces(tok.vocab_size());
  std::vector<bool> is_end(tok.vocab_size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const auto id = static_cast<tokenizer::TokenId>(i);
    pieces[i] = tok.piece(id, /*render_special=*/false);  // what StreamDecoder prints
    is_end[i] = tok.is_eog(id);
  }
  return std::make_shared<const grammar::Vocabulary>(pieces, is_end);
}

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::Length: return "length";
    case StopReason::Eos: return "eos";
    case StopReason::StopString: return "stop string";
    case StopReason::ContextFull: return "context full";
    case StopReason::Cancelled: return "cancelled";
  }
  return "?";
}

Generator::Generator(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx,
                     const GeneratorOptions& options)
    : model_(model),
      tok_(tok),
      ctx_(ctx),
      n_batch_(options.n_batch),
      cache_(model.new_cache(options.n_ctx, options.kv_type)),
      sampler_(options.sampling),
      vocabulary_(options.vocabulary),
      spec_(options.speculative) {
  FUCINA_CHECK(n_batch_ >= 1, InvalidArgument, "[generate] n_batch must be at least 1, got {}", n_batch_);
}

std::int64_t Generator::feed_prompt(std::span<const tokenizer::TokenId> ids) {
  FUCINA_CHECK(!ids.empty(), InvalidArgument, "[generate] the prompt has no tokens");
  const std::int64_t capacity = cache_.capacity();
  if (static_cast<std::int64_t>(ids.size()) >= capacity)
    fail(ErrorCode::InvalidArgument,
         fmt::format("the prompt has {} tokens, the context holds {}", ids.size(), capacity));
  // Keep the longest common prefix, but run at least the last token: its logits are needed.
  const auto common = std::mismatch(cached_.begin(), cached_.end(), ids.begin(), ids.end()).first - cached_.begin();
  const std::size_t keep = std::min(static_cast<std::size_t>(common), ids.size() - 1);
  cache_.truncate(static_cast<std::int64_t>(keep));
  cached_.resize(keep);
  unrun_ = tokenizer::null_token;
  const auto rest = ids.subspan(keep);
  for (const auto id : rest) sampler_.accept(id);
  const auto t0 = clock_type::now();
  logits_ = model_.prefill(ctx_, cache_, rest, n_batch_).to_vector();
  cached_.insert(cached_.end(), rest.begin(), rest.end());
  prompt_ = {.prompt_tokens = static_cast<std::int64_t>(rest.size()), .prompt_seconds = seconds_since(t0)};
  return prompt_.prompt_tokens;
}

Result Generator::generate(const Request& request) {
  FUCINA_CHECK(!logits_.empty(), InvalidArgument, "[generate] generate() before feed_prompt()");
  if (request.sampling) {
    sampler_ = sample::Sampler(*request.sampling);
    for (const auto id : cached_) sampler_.accept(id);
  }
  if (request.grammar && !vocabulary_) vocabulary_ = grammar_vocabulary(tok_);
  TokenStream out(tok_, request, cache_.capacity(), vocabulary_);
  Timings t = prompt_;
  spec_.reset(cached_);
  if (unrun_ != tokenizer::null_token) spec_.sampled(unrun_);
  const auto t0 = clock_type::now();
  while (out.wants_more()) {
    if (unrun_ != tokenizer::null_token) {  // the previous token, for the logits to sample from
      if (cache_.size() >= cache_.capacity()) {
        out.stop(StopReason::ContextFull);
        break;
      }
      // Rows after unrun_'s that the cache has room for and that can yield a token before max_tokens.
      const std::int64_t room = std::min(cache_.capacity() - cache_.size(), out.remaining()) - 1;
      if (const auto drafted = spec_.draft(out, room); !drafted.empty()) {
        verify(out, drafted, t);
        continue;
      }
      const tokenizer::TokenId one[1] = {unrun_};
      const auto t1 = clock_type::now();
      logits_ = model_.forward(ctx_, cache_, one).to_vector();
      spec_.timed(1, 1, seconds_since(t1));
      cached_.push_back(unrun_);
    }
    if (const auto next = out.push(sampler_, logits_); next != tokenizer::null_token) sampled(next);
  }
  Result r = out.finish();
  r.timings = t;
  r.timings.gen_tokens = static_cast<std::int64_t>(r.tokens.size());
  r.timings.gen_seconds = seconds_since(t0);
  r.timings.grammar_seconds = out.grammar_seconds();
  return r;
}

void Generator::sampled(tokenizer::TokenId token) {
  unrun_ = token;
  spec_.sampled(token);
}

void Generator::verify(TokenStream& out, std::span<const tokenizer::TokenId> drafted, Timings& t) {
  std::vector<tokenizer::TokenId> ids{unrun_};
  ids.insert(ids.end(), drafted.begin(), drafted.end());
  const std::int64_t n0 = cache_.size();
  const auto t0 = clock_type::now();
  const auto logits = model_.forward_as_decode(ctx_, cache_, ids);  // read in place: k+1 rows of the vocabulary
  const auto rows = logits.data();
  spec_.timed(1, static_cast<std::int64_t>(ids.size()), seconds_since(t0));
  const auto v = spec_.verify(out, sampler_, rows, drafted, t);
  if (v.last != tokenizer::null_token) unrun_ = v.last;
  cache_.truncate(n0 + static_cast<std::int64_t>(v.rows));
  cached_.insert(cached_.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(v.rows));
  const std::size_t vocab = rows.size() / ids.size();
  logits_.assign(rows.begin() + static_cast<std::ptrdiff_t>((v.rows - 1) * vocab),
                 rows.begin() + static_cast<std::ptrdiff_t>(v.rows * vocab));
}

}  // namespace fucina::generate
