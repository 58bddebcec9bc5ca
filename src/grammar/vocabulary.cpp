#include "fucina/grammar/vocabulary.hpp"

#include <algorithm>
#include <numeric>

#include "fucina/core/error.hpp"

namespace fucina::grammar {

Vocabulary::Vocabulary(const std::vector<std::string>& pieces, const std::vector<bool>& is_end)
    : size_(pieces.size()), pieces_(pieces), is_end_(is_end) {
  FUCINA_CHECK(is_end.size() == pieces.size(), InvalidArgument, "[grammar] {} end flags for {} tokens", is_end.size(),
               pieces.size());
  std::vector<TokenId> order;
  for (std::size_t i = 0; i < size_; ++i) {
    if (is_end[i]) end_tokens_.push_back(static_cast<TokenId>(i));
    else if (!pieces[i].empty()) order.push_back(static_cast<TokenId>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
    return pieces[static_cast<std::size_t>(a)] < pieces[static_cast<std::size_t>(b)];
  });
  // Sorted pieces give the trie in preorder: each piece opens the nodes past its common
  // prefix with the previous one; `path` holds the node of each depth on the current path.
  byte_ = {0};
  depth_ = {0};
  std::vector<std::uint32_t> path = {0};
  std::vector<std::uint32_t> owner;  // the node each token of `order` ends at
  std::string_view prev;
  for (const TokenId id : order) {
    const std::string_view p = pieces[static_cast<std::size_t>(id)];
    FUCINA_CHECK(p.size() < 65535, InvalidArgument, "[grammar] token {} has {} bytes", id, p.size());
    const std::size_t common = static_cast<std::size_t>(
        std::mismatch(prev.begin(), prev.end(), p.begin(), p.end()).first - prev.begin());
    path.resize(common + 1);
    for (std::size_t d = common; d < p.size(); ++d) {
      path.push_back(static_cast<std::uint32_t>(byte_.size()));
      byte_.push_back(static_cast<std::uint8_t>(p[d]));
      depth_.push_back(static_cast<std::uint16_t>(d + 1));
    }
    owner.push_back(path.back());
    max_depth_ = std::max(max_depth_, p.size());
    prev = p;
  }
  // Subtree ends: a node's subtree runs until the next node no deeper than it.
  end_.assign(byte_.size(), static_cast<std::uint32_t>(byte_.size()));
  std::vector<std::uint32_t> open;
  for (std::uint32_t i = 0; i < byte_.size(); ++i) {
    while (!open.empty() && depth_[open.back()] >= depth_[i]) end_[open.back()] = i, open.pop_back();
    open.push_back(i);
  }
  // Tokens grouped by node (order is already by node, nodes being in preorder).
  tok_begin_.assign(byte_.size() + 1, 0);
  for (const std::uint32_t n : owner) ++tok_begin_[n + 1];
  std::partial_sum(tok_begin_.begin(), tok_begin_.end(), tok_begin_.begin());
  tokens_ = std::move(order);
}

}  // namespace fucina::grammar
