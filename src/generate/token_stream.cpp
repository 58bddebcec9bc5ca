#include "fucina/generate/token_stream.hpp"

namespace fucina::generate {

TokenStream::TokenStream(const tokenizer::Tokenizer& tok, const Request& request, std::int64_t unlimited)
    : tok_(tok),
      request_(request),
      limit_(request.max_tokens < 0 ? unlimited : request.max_tokens),
      detok_(tok, {.continues_text = true}),
      stop_(request.stops) {}

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
  const tokenizer::TokenId next = sampler.sample(logits);
  sampler.accept(next);
  result_.tokens.push_back(next);
  if (!request_.ignore_eos && tok_.is_eog(next)) {
    stop(StopReason::Eos);
    emit(next, {}, logits);
    return next;
  }
  emit(next, stop_.push(detok_.push(next)), logits);
  if (stop_.stopped()) stop(StopReason::StopString);
  return next;
}

Result TokenStream::finish() {
  emit(tokenizer::null_token, stop_.stopped() ? std::string() : stop_.push(detok_.flush()) + stop_.flush(), {});
  return std::move(result_);
}

}  // namespace fucina::generate
