#include "fucina/generate/draft.hpp"

#include <algorithm>

namespace fucina::generate {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The key of the n-gram `gram` (its length is part of it).
std::uint64_t gram_key(std::span<const tokenizer::TokenId> gram) {
  std::uint64_t h = mix(gram.size());
  for (const auto t : gram) h = mix(h ^ static_cast<std::uint32_t>(t));
  return h;
}

std::uint64_t follower_key(std::uint64_t gram, tokenizer::TokenId follower) {
  return mix(gram ^ (static_cast<std::uint64_t>(static_cast<std::uint32_t>(follower)) << 1 | 1));
}

}  // namespace

void NgramDrafter::reset(std::span<const tokenizer::TokenId> context) {
  tokens_.clear();
  followers_.clear();
  counts_.clear();
  for (const auto t : context) push(t);
}

void NgramDrafter::push(tokenizer::TokenId token) {
  const std::size_t size = tokens_.size();
  for (std::size_t n = 1; n <= std::min<std::size_t>(kMaxNgram, size); ++n) {
    const std::uint64_t key = gram_key(std::span(tokens_).subspan(size - n));
    const std::int32_t count = ++counts_[follower_key(key, token)];
    Followers& f = followers_[key];
    if (count >= f.best_count) f = {token, count};
  }
  tokens_.push_back(token);
}

tokenizer::TokenId NgramDrafter::propose(std::span<const tokenizer::TokenId> tip) const {
  for (std::size_t n = std::min<std::size_t>(kMaxNgram, tip.size()); n >= 1; --n) {
    const auto it = followers_.find(gram_key(tip.subspan(tip.size() - n)));
    if (it == followers_.end()) continue;
    if (n == 1 && it->second.best_count < 2) return tokenizer::null_token;
    return it->second.best;
  }
  return tokenizer::null_token;
}

std::vector<tokenizer::TokenId> NgramDrafter::draft(std::size_t max) const {
  // The tip: the context's last n-gram, then the tokens drafted so far.
  const std::size_t keep = std::min<std::size_t>(kMaxNgram, tokens_.size());
  std::vector<tokenizer::TokenId> tip(tokens_.end() - static_cast<std::ptrdiff_t>(keep), tokens_.end());
  std::vector<tokenizer::TokenId> out;
  while (out.size() < max) {
    const tokenizer::TokenId next = propose(tip);
    if (next == tokenizer::null_token) break;
    out.push_back(next);
    tip.push_back(next);
  }
  return out;
}

}  // namespace fucina::generate
