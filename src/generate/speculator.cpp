#include "fucina/generate/speculator.hpp"

#include <algorithm>

#include "fucina/generate/generator.hpp"
#include "fucina/generate/token_stream.hpp"

namespace fucina::generate {

Speculator::Speculator(const SpeculativeOptions& options) : options_(options), length_(options) {}

void Speculator::reset(std::span<const tokenizer::TokenId> tokens) {
  if (!enabled()) return;
  drafter_.reset(tokens);
  shadow_ = tokenizer::null_token;
}

void Speculator::sampled(tokenizer::TokenId token) {
  if (!enabled()) return;
  if (shadow_ != tokenizer::null_token) length_.record(1, shadow_ == token ? 1 : 0);
  shadow_ = tokenizer::null_token;
  drafter_.push(token);
}

std::vector<tokenizer::TokenId> Speculator::draft(TokenStream& out, std::int64_t room) {
  if (!enabled()) return {};
  const std::int32_t k = length_.next();
  if (k == 0) {  // the cost gate is shut: a free guess keeps the acceptance rate current
    const auto guess = drafter_.draft(1);
    shadow_ = guess.empty() ? tokenizer::null_token : guess[0];
    return {};
  }
  if (room < options_.draft_min) return {};
  auto drafted = drafter_.draft(static_cast<std::size_t>(std::min<std::int64_t>(k, room)));
  drafted.resize(out.allowed_prefix(drafted));
  if (static_cast<std::int64_t>(drafted.size()) < options_.draft_min) return {};
  return drafted;
}

Speculator::Verified Speculator::verify(TokenStream& out, sample::Sampler& sampler, std::span<const float> rows,
                                        std::span<const tokenizer::TokenId> drafted, Timings& t) {
  const std::size_t vocab = rows.size() / (drafted.size() + 1);
  std::int32_t compared = 0, hits = 0;
  Verified v;
  while (true) {
    const tokenizer::TokenId next = out.push(sampler, rows.subspan(v.rows * vocab, vocab));
    if (next != tokenizer::null_token) sampled(next), v.last = next;
    if (++v.rows == drafted.size() + 1) break;  // the last row: nothing was drafted after it
    ++compared;
    if (next != drafted[v.rows - 1]) break;
    ++hits;
    if (!out.wants_more()) break;
  }
  length_.record(compared, hits);
  ++t.verify_steps;
  t.drafted += static_cast<std::int64_t>(drafted.size());
  t.accepted += hits;
  return v;
}

}  // namespace fucina::generate
