#include "fucina/grammar/vocabulary.hpp"

#include "fucina/core/error.hpp"
#include "fucina/grammar/utf8_prefix.hpp"

namespace fucina::grammar {

namespace {

// The characters of a plain piece (Vocabulary::plain_chars), else Vocabulary::not_plain.
std::uint8_t plain_chars_of(std::string_view piece) {
  std::size_t chars = 0;
  Utf8Phase phase = Utf8Phase::Clean;
  for (const char ch : piece) {
    const auto b = static_cast<std::uint8_t>(ch);
    if ((byte_kind::of(b) & ~byte_kind::plain) != 0) return Vocabulary::not_plain;
    phase = next_utf8_phase(phase, b);
    if (phase == Utf8Phase::Invalid) return Vocabulary::not_plain;
    chars += phase == Utf8Phase::Clean;
  }
  const bool plain = !piece.empty() && phase == Utf8Phase::Clean && chars <= Vocabulary::max_plain_chars;
  return plain ? static_cast<std::uint8_t>(chars) : Vocabulary::not_plain;
}

}  // namespace

Vocabulary::Vocabulary(const std::vector<std::string>& pieces, const std::vector<bool>& is_end)
    : size_(pieces.size()), pieces_(pieces), is_end_(is_end) {
  FUCINA_CHECK(is_end.size() == pieces.size(), InvalidArgument, "[grammar] {} end flags for {} tokens", is_end.size(),
               pieces.size());
  std::vector<TokenId> in_trie, others;  // others: with a piece, not plain
  plain_chars_.assign(size_, not_plain);
  for (std::size_t i = 0; i < size_; ++i) {
    const auto id = static_cast<TokenId>(i);
    if (is_end[i]) end_tokens_.push_back(id);
    if (is_end[i] || pieces[i].empty()) {
      outside_trie_.push_back(id);
      continue;
    }
    in_trie.push_back(id);
    plain_chars_[i] = plain_chars_of(pieces[i]);
    if (plain_chars_[i] == not_plain) others.push_back(id);
  }
  trie_ = TokenTrie(pieces, std::move(in_trie));
  not_plain_trie_ = TokenTrie(pieces, std::move(others));
}

}  // namespace fucina::grammar
