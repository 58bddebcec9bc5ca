#include "fucina/grammar/token_trie.hpp"

#include <string_view>

#include "fucina/core/error.hpp"
#include "fucina/grammar/utf8_prefix.hpp"

namespace fucina::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::vector<TokenId> ids) {
  std::stable_sort(ids.begin(), ids.end(), [&](TokenId a, TokenId b) {
    return pieces[static_cast<std::size_t>(a)] < pieces[static_cast<std::size_t>(b)];
  });
  // Sorted pieces give the trie in preorder: each piece opens the nodes past its common
  // prefix with the previous one; `path` holds the node of each depth on the current path.
  nodes_ = {Node{}};
  std::vector<std::uint32_t> path = {0};
  std::vector<std::uint32_t> owner;  // the node each token of `ids` ends at
  std::string_view prev;
  for (const TokenId id : ids) {
    const std::string_view p = pieces[static_cast<std::size_t>(id)];
    FUCINA_CHECK(p.size() < 65535, InvalidArgument, "[grammar] token {} has {} bytes", id, p.size());
    const std::size_t common = static_cast<std::size_t>(
        std::mismatch(prev.begin(), prev.end(), p.begin(), p.end()).first - prev.begin());
    path.resize(common + 1);
    for (std::size_t d = common; d < p.size(); ++d) {
      path.push_back(static_cast<std::uint32_t>(nodes_.size()));
      nodes_.push_back({.end = 0, .first_token = 0, .depth = static_cast<std::uint16_t>(d + 1), .byte = static_cast<std::uint8_t>(p[d])});
    }
    owner.push_back(path.back());
    max_depth_ = std::max(max_depth_, p.size());
    prev = p;
  }
  const auto n = static_cast<std::uint32_t>(nodes_.size());
  // Subtree ends: a node's subtree runs until the next node no deeper than it.
  std::vector<std::uint32_t> open, parent(n, 0);
  for (std::uint32_t i = 0; i < n; ++i) {
    while (!open.empty() && nodes_[open.back()].depth >= nodes_[i].depth) nodes_[open.back()].end = i, open.pop_back();
    if (!open.empty()) parent[i] = open.back();
    open.push_back(i);
  }
  for (const std::uint32_t i : open) nodes_[i].end = n;
  // Subtree summaries, children before parents (reverse preorder); `children_ok[i]`: the
  // phases from which every child's paths are valid (all of them for a leaf).
  std::vector<std::uint8_t> children_ok(n, 0xFF), children_ok_above(n, 0xFF);
  const auto add = [](Subtree& up, const Subtree& s) {
    for (int w = 0; w < 4; ++w) up.ascii[w] |= s.ascii[w];
    up.non_ascii |= s.non_ascii;
    up.height = std::max(up.height, s.height);
  };
  const auto summarize = [](Subtree& s, std::uint8_t b, std::uint8_t ok_below) {
    if (b < 0x80) s.ascii[b >> 5] |= std::uint32_t{1} << (b & 31);
    else s.non_ascii = true;
    ++s.height;
    for (int p = 0; p < utf8_phases; ++p) {
      const Utf8Phase next = next_utf8_phase(static_cast<Utf8Phase>(p), b);
      if (next != Utf8Phase::Invalid && ((ok_below >> static_cast<int>(next)) & 1)) s.utf8_ok |= 1u << p;
    }
  };
  summaries_.assign(n, Summaries{});
  kinds_.assign(n, 0);
  for (std::uint32_t i = n; i-- > 1;) {
    Summaries& node = summaries_[i];
    const std::uint8_t b = nodes_[i].byte;
    summarize(node.below, b, children_ok[i]);
    if (is_control(b)) node.above_controls = {.ascii = {}, .height = 0, .utf8_ok = 0xFF, .non_ascii = false};  // nothing above it
    else summarize(node.above_controls, b, children_ok_above[i]);
    nodes_[i].least_depth =
        static_cast<std::uint8_t>(std::min<int>({node.below.height, node.above_controls.height + 1, int{max_least_depth}}));
    kinds_[i] |= byte_kind::of(b);
    if (!(node.below.utf8_ok & (1u << static_cast<int>(Utf8Phase::Clean)))) kinds_[i] |= byte_kind::not_utf8;
    kinds_[parent[i]] |= kinds_[i] & ~byte_kind::not_utf8;  // (a lead byte makes its continuations valid)
    add(summaries_[parent[i]].below, node.below);
    add(summaries_[parent[i]].above_controls, node.above_controls);
    children_ok[parent[i]] &= node.below.utf8_ok;
    children_ok_above[parent[i]] &= node.above_controls.utf8_ok;
  }
  for (std::uint32_t i = 1; i < n; ++i)
    if (is_control(nodes_[i].byte)) controls_.push_back(i);
  for (const std::uint32_t k : controls_)
    after_control_.push_back(static_cast<std::uint32_t>(
        std::lower_bound(controls_.begin(), controls_.end(), nodes_[k].end) - controls_.begin()));
  // Tokens grouped by node (ids are already by node, nodes being in preorder); the record
  // past the last node closes the last node's range.
  nodes_.push_back({});
  for (const std::uint32_t i : owner) ++nodes_[i + 1].first_token;
  for (std::size_t i = 1; i < nodes_.size(); ++i) nodes_[i].first_token += nodes_[i - 1].first_token;
  tokens_ = std::move(ids);
}

std::size_t TokenTrie::memory_bytes() const {
  return nodes_.size() * sizeof(Node) + summaries_.size() * sizeof(Summaries) + kinds_.size() +
         (controls_.size() + after_control_.size()) * sizeof(std::uint32_t) + tokens_.size() * sizeof(TokenId);
}

}  // namespace fucina::grammar
