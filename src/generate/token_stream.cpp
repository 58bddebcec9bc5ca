#include "fucina/generate/token_stream.hpp"

#include <chrono>

#include "fucina/core/error.hpp"

namespace fucina::generate {

TokenStream::TokenStream(const tokenizer::Tokenizer& tok, const Request& request, std::int64_t unlimited,
                         std::shared_ptr<const grammar::Vocabulary> vocabulary)
    : tok_(tok),
      request_(request),
      limit_(request.max_tokens < 0 ? unlimited : request.max_tokens),
      detok_(tok, {.continues_text = true}),
      stop_(request.stops) {
  if (request.grammar) {
    FUCINA_ASSERT(vocabulary != nullptr);
    matcher_.emplace(request.grammar, std::move(vocabulary));
  }
}

void TokenStream::stop(StopReason reason) {
  result_.reason = reason;
  ended_ = true;
}

bool TokenStream::wants_more() {
  if (ended_) return false;
  if (static_cast<std::int64_t>(result_.tokens.size()) >= limit_) {
    stop(StopReason::Length);
  } else if (request_.cancel && request_.cancel->load()) {
    stop(StopReason::Cancelled);
  }
  return !ended_;
}

void TokenStream::emit(tokenizer::TokenId token, const std::string& text, std::span<const float> logits) {
  result_.text += text;
  if (request_.on_step) request_.on_step({.token = token, .text = text, .logits = logits});
}

tokenizer::TokenId TokenStream::push(sample::Sampler& sampler, std::span<const float> logits) {
  tokenizer::TokenId next = sampler.sample(logits);
  if (matcher_) {  // Note [Constrained sampling]
    const auto t0 = std::chrono::steady_clock::now();
    if (!matcher_->allows(next)) {
      masked_.assign(logits.begin(), logits.end());
      if (matcher_->mask(masked_) == 0) {
        FUCINA_CHECK(matcher_->complete(), InvalidArgument,
                     "[generate] the grammar allows no token of this vocabulary after {} tokens", result_.tokens.size());
        stop(StopReason::Eos);
        return tokenizer::null_token;
      }
      next = sampler.sample(masked_);
    }
    const bool allowed = matcher_->accept_token(next);
    FUCINA_ASSERT(allowed);
    grammar_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  sampler.accept(next);
  result_.tokens.push_back(next);
  if ((!request_.ignore_eos || matcher_) && tok_.is_eog(next)) {
    stop(StopReason::Eos);
    emit(next, {}, logits);
    return next;
  }
  emit(next, stop_.push(detok_.push(next)), logits);
  if (stop_.stopped()) stop(StopReason::StopString);
  return next;
}

std::size_t TokenStream::allowed_prefix(std::span<const tokenizer::TokenId> drafted) {
  if (!matcher_) return drafted.size();
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t n = matcher_->allowed_prefix(drafted);
  grammar_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return n;
}

Result TokenStream::finish() {
  emit(tokenizer::null_token, stop_.stopped() ? std::string() : stop_.push(detok_.flush()) + stop_.flush(), {});
  return std::move(result_);
}

}  // namespace fucina::generate
