#include "fucina/tokenizer/bpe_model.hpp"

#include <algorithm>
#include <bit>

#include "fucina/core/error.hpp"
#include "fucina/tokenizer/utf8.hpp"

namespace fucina::tokenizer {

namespace {

// Inverse of bytes_to_unicode for code points < 324 (the map's range); -1 elsewhere.
struct ByteMap {
  std::uint32_t to_cpt[256];
  std::int16_t to_byte[324];
  ByteMap() {
    std::fill(std::begin(to_byte), std::end(to_byte), std::int16_t{-1});
    std::uint32_t n = 0;
    for (std::uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cpt[b] = printable ? b : 256 + n++;
      to_byte[to_cpt[b]] = static_cast<std::int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

std::uint64_t pair_key(TokenId a, TokenId b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

std::string slow_key(std::string_view a, std::string_view b) {
  std::string k;
  k.reserve(a.size() + b.size() + 5);
  const auto n = static_cast<std::uint32_t>(a.size());
  k.append(reinterpret_cast<const char*>(&n), sizeof(n));
  k.append(a);
  k.append(b);
  return k;
}

}  // namespace

std::uint32_t BpeModel::byte_to_cpt(std::uint8_t b) { return byte_map().to_cpt[b]; }

bool BpeModel::decode_text(std::string_view text, std::string& raw) {
  raw.clear();
  const ByteMap& m = byte_map();
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::uint32_t cpt = decode_utf8_lenient(text, pos);
    if (cpt >= 324 || m.to_byte[cpt] < 0) return false;
    raw.push_back(static_cast<char>(m.to_byte[cpt]));
  }
  return true;
}

BpeModel::BpeModel(std::span<const std::string> tokens, std::span<const std::string> merges, bool ignore_merges)
    : ignore_merges_(ignore_merges) {
  FUCINA_CHECK(tokens.size() < (std::size_t{1} << 31), InvalidFile, "[tokenizer] too many tokens ({})", tokens.size());
  raw_texts_.resize(tokens.size());
  TokenId single_byte_token[256];
  std::fill(std::begin(single_byte_token), std::end(single_byte_token), null_token);
  std::vector<bool> decodable(tokens.size(), false);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].size() == 1) single_byte_token[static_cast<unsigned char>(tokens[i][0])] = static_cast<TokenId>(i);
    decodable[i] = decode_text(tokens[i], raw_texts_[i]) && !raw_texts_[i].empty();
  }
  raw_to_id_.reserve(tokens.size() * 2);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (decodable[i]) raw_to_id_.insert_or_assign(std::string_view(raw_texts_[i]), static_cast<TokenId>(i));

  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    byte_id_[b] = find_raw(std::string_view(&c, 1));
    std::string enc;
    append_utf8(enc, byte_to_cpt(static_cast<std::uint8_t>(b)));
    for (const char e : enc) {
      const TokenId t = single_byte_token[static_cast<unsigned char>(e)];
      if (t != null_token) fallback_ids_[b].push_back(t);
    }
  }

  // Open-addressing table sized to a power of two at most half full.
  const std::size_t cap = std::bit_ceil(std::max<std::size_t>(16, merges.size() * 2));
  table_.assign(cap, MergeSlot{empty_key, 0, null_token});
  table_shift_ = 64 - static_cast<std::uint32_t>(std::countr_zero(cap));
  std::string a_raw, b_raw;
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const std::string& m = merges[r];
    const std::size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) continue;
    if (!decode_text(std::string_view(m).substr(0, sp), a_raw) || a_raw.empty()) continue;
    if (!decode_text(std::string_view(m).substr(sp + 1), b_raw) || b_raw.empty()) continue;
    const TokenId a = find_raw(a_raw);
    const TokenId b = find_raw(b_raw);
    const TokenId result = find_raw(a_raw + b_raw);
    const auto rank = static_cast<std::int32_t>(r);
    ++n_merges_;
    if (a != null_token && b != null_token) {
      insert_merge(pair_key(a, b), rank, result);
    } else {
      slow_merges_.try_emplace(slow_key(a_raw, b_raw), rank, result);
    }
  }
}

void BpeModel::insert_merge(std::uint64_t key, std::int32_t rank, TokenId result) {
  const std::size_t mask = table_.size() - 1;
  std::size_t i = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> table_shift_);
  while (table_[i].key != empty_key) {
    if (table_[i].key == key) return;  // first rank wins
    i = (i + 1) & mask;
  }
  table_[i] = MergeSlot{key, rank, result};
}

const BpeModel::MergeSlot* BpeModel::find_merge(TokenId a, TokenId b) const {
  const std::uint64_t key = pair_key(a, b);
  const std::size_t mask = table_.size() - 1;
  std::size_t i = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> table_shift_);
  while (true) {
    const MergeSlot& s = table_[i];
    if (s.key == key) return &s;
    if (s.key == empty_key) return nullptr;
    i = (i + 1) & mask;
  }
}

bool BpeModel::find_merge_slow(std::string_view a, std::string_view b, std::int32_t& rank, TokenId& result) const {
  if (slow_merges_.empty()) return false;
  const auto it = slow_merges_.find(slow_key(a, b));
  if (it == slow_merges_.end()) return false;
  rank = it->second.first;
  result = it->second.second;
  return true;
}

TokenId BpeModel::find_raw(std::string_view raw) const {
  const auto it = raw_to_id_.find(raw);
  return it == raw_to_id_.end() ? null_token : it->second;
}

namespace {
// Min-heap order on (rank, left): std heap functions build a max-heap, so invert.
struct BigramAfter {
  bool operator()(const BpeScratch::Bigram& l, const BpeScratch::Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};
}  // namespace

void BpeModel::try_add(BpeScratch& s, std::string_view word, std::int32_t left, std::int32_t right) const {
  if (left < 0 || right < 0) return;
  const auto& l = s.symbols[static_cast<std::size_t>(left)];
  const auto& r = s.symbols[static_cast<std::size_t>(right)];
  std::int32_t rank;
  TokenId result;
  if (l.id != null_token && r.id != null_token) {
    const MergeSlot* m = find_merge(l.id, r.id);
    if (!m) return;
    rank = m->rank;
    result = m->result;
  } else if (!find_merge_slow(word.substr(l.off, l.len), word.substr(r.off, r.len), rank, result)) {
    return;
  }
  s.heap.push_back({rank, left, right, l.len + r.len, result});
  std::push_heap(s.heap.begin(), s.heap.end(), BigramAfter{});
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& s) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const TokenId whole = find_raw(word);
    if (whole != null_token) {
      out.push_back(whole);
      return;
    }
  }
  if (word.size() == 1) {
    const auto b = static_cast<unsigned char>(word[0]);
    if (byte_id_[b] != null_token) {
      out.push_back(byte_id_[b]);
    } else {
      out.insert(out.end(), fallback_ids_[b].begin(), fallback_ids_[b].end());
    }
    return;
  }
  const auto n = static_cast<std::int32_t>(word.size());
  s.symbols.resize(word.size());
  for (std::int32_t i = 0; i < n; ++i) {
    s.symbols[static_cast<std::size_t>(i)] = {static_cast<std::uint32_t>(i), 1,
                                              byte_id_[static_cast<unsigned char>(word[static_cast<std::size_t>(i)])],
                                              i - 1, i + 1 < n ? i + 1 : -1};
  }
  s.heap.clear();
  for (std::int32_t i = 1; i < n; ++i) try_add(s, word, i - 1, i);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), BigramAfter{});
    const BpeScratch::Bigram bg = s.heap.back();
    s.heap.pop_back();
    auto& l = s.symbols[static_cast<std::size_t>(bg.left)];
    auto& r = s.symbols[static_cast<std::size_t>(bg.right)];
    // Stale: one side was merged away or grew since this bigram was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.size) continue;
    l.len += r.len;
    l.id = bg.result;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) s.symbols[static_cast<std::size_t>(r.next)].prev = bg.left;
    try_add(s, word, l.prev, bg.left);
    try_add(s, word, bg.left, l.next);
  }

  for (std::int32_t i = 0; i >= 0; i = s.symbols[static_cast<std::size_t>(i)].next) {
    const auto& sym = s.symbols[static_cast<std::size_t>(i)];
    if (sym.id != null_token) {
      out.push_back(sym.id);
      continue;
    }
    for (std::uint32_t k = 0; k < sym.len; ++k) {
      const auto b = static_cast<unsigned char>(word[sym.off + k]);
      out.insert(out.end(), fallback_ids_[b].begin(), fallback_ids_[b].end());
    }
  }
}

}  // namespace fucina::tokenizer
