#include "fucina/tokenizer/spm_model.hpp"

#include <algorithm>

#include "fucina/tokenizer/utf8.hpp"

namespace fucina::tokenizer {

SpmModel::SpmModel(const std::unordered_map<std::string_view, TokenId>& token_to_id, const std::vector<float>& scores,
                   TokenId unk_id)
    : token_to_id_(&token_to_id), scores_(&scores) {
  static constexpr char hex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    TokenId id = find(std::string_view(name, 6));
    if (id == null_token) {
      const char c = static_cast<char>(b);
      id = find(std::string_view(&c, 1));
    }
    byte_id_[b] = id == null_token ? unk_id : id;
  }
  constexpr std::string_view space = "\xE2\x96\x81";
  split_at_spaces_ = true;
  for (const auto& [text, id] : token_to_id) {
    for (std::size_t p = text.find(space, 1); p != std::string_view::npos; p = text.find(space, p + 1)) {
      if (p < 3 || text.substr(p - 3, 3) != space) {
        split_at_spaces_ = false;
        return;
      }
    }
  }
}

TokenId SpmModel::find(std::string_view s) const {
  const auto it = token_to_id_->find(s);
  return it == token_to_id_->end() ? null_token : it->second;
}

namespace {
// Max-heap on score; on equal scores the smaller left index comes first.
struct BigramBefore {
  bool operator()(const SpmScratch::Bigram& l, const SpmScratch::Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};
}  // namespace

void SpmModel::try_add(SpmScratch& s, std::string_view text, std::int32_t left, std::int32_t right) const {
  if (left < 0 || right < 0) return;
  const auto& l = s.symbols[static_cast<std::size_t>(left)];
  const auto& r = s.symbols[static_cast<std::size_t>(right)];
  // Adjacent live symbols are contiguous in `text`, so the pair is a plain substring.
  const TokenId id = find(text.substr(l.off, l.len + r.len));
  if (id == null_token) return;
  const float score = static_cast<std::size_t>(id) < scores_->size() ? (*scores_)[static_cast<std::size_t>(id)] : 0.0f;
  s.heap.push_back({score, left, right, l.len + r.len});
  std::push_heap(s.heap.begin(), s.heap.end(), BigramBefore{});
}

void SpmModel::encode(std::string_view text, std::vector<TokenId>& out, SpmScratch& s) const {
  if (!split_at_spaces_ || text.size() < 256) {
    encode_chunk(text, out, s);
    return;
  }
  constexpr std::string_view space = "\xE2\x96\x81";
  // Chunk starts: a character (as the merge loop segments them) that is U+2581 and follows
  // a character that is not.
  std::unordered_map<std::string_view, std::pair<std::uint32_t, std::uint32_t>> cache;
  std::vector<TokenId> cached;
  std::size_t chunk = 0;
  std::size_t off = 0;
  bool prev_space = false;
  const auto flush = [&](std::size_t end) {
    if (end == chunk) return;
    const std::string_view c = text.substr(chunk, end - chunk);
    const auto it = cache.find(c);
    if (it != cache.end()) {
      out.insert(out.end(), cached.begin() + it->second.first, cached.begin() + it->second.first + it->second.second);
    } else {
      const std::size_t before = out.size();
      encode_chunk(c, out, s);
      const auto start = static_cast<std::uint32_t>(cached.size());
      cached.insert(cached.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
      cache.emplace(c, std::make_pair(start, static_cast<std::uint32_t>(out.size() - before)));
    }
    chunk = end;
  };
  while (off < text.size()) {
    const std::size_t len = std::min(utf8_seq_len(static_cast<unsigned char>(text[off])), text.size() - off);
    const bool is_space = text.substr(off, len) == space;
    if (is_space && !prev_space) flush(off);
    prev_space = is_space;
    off += len;
  }
  flush(text.size());
}

void SpmModel::encode_chunk(std::string_view text, std::vector<TokenId>& out, SpmScratch& s) const {
  s.symbols.clear();
  s.heap.clear();
  std::size_t off = 0;
  while (off < text.size()) {
    const std::size_t len = std::min(utf8_seq_len(static_cast<unsigned char>(text[off])), text.size() - off);
    const auto idx = static_cast<std::int32_t>(s.symbols.size());
    off += len;
    s.symbols.push_back({static_cast<std::uint32_t>(off - len), static_cast<std::uint32_t>(len), idx - 1,
                         off == text.size() ? -1 : idx + 1});
  }
  if (s.symbols.empty()) return;
  for (std::int32_t i = 1; i < static_cast<std::int32_t>(s.symbols.size()); ++i) try_add(s, text, i - 1, i);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), BigramBefore{});
    const SpmScratch::Bigram bg = s.heap.back();
    s.heap.pop_back();
    auto& l = s.symbols[static_cast<std::size_t>(bg.left)];
    auto& r = s.symbols[static_cast<std::size_t>(bg.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) s.symbols[static_cast<std::size_t>(r.next)].prev = bg.left;
    try_add(s, text, l.prev, bg.left);
    try_add(s, text, bg.left, l.next);
  }

  for (std::int32_t i = 0; i >= 0; i = s.symbols[static_cast<std::size_t>(i)].next) {
    const auto& sym = s.symbols[static_cast<std::size_t>(i)];
    const std::string_view piece = text.substr(sym.off, sym.len);
    const TokenId id = find(piece);
    if (id != null_token) {
      out.push_back(id);
      continue;
    }
    for (const char c : piece) {
      const TokenId b = byte_id_[static_cast<unsigned char>(c)];
      if (b != null_token) out.push_back(b);
    }
  }
}

}  // namespace fucina::tokenizer
