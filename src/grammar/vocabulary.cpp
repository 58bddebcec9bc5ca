#include "fucina/grammar/vocabulary.hpp"

#include "fucina/core/error.hpp"
#include "fucina/grammar/utf8_prefix.hpp"

namespace fucina::grammar {

namespace {

// What a piece starts with: its plain characters (a whole piece: all of them), then where
// that stops.
struct PlainPrefix {
  std::size_t chars = 0;
  enum { Whole, Control, Other } stop = Whole;
};
PlainPrefix plain_prefix(std::string_view piece) {
  PlainPrefix r;
  Utf8Phase phase = Utf8Phase::Clean;
  for (const char ch : piece) {
    const auto b = static_cast<std::uint8_t>(ch);
    if ((byte_kind::of(b) & ~byte_kind::plain) != 0) {
      r.stop = TokenTrie::is_control(b) && phase == Utf8Phase::Clean ? PlainPrefix::Control : PlainPrefix::Other;
      return r;
    }
    phase = next_utf8_phase(phase, b);
    if (phase == Utf8Phase::Invalid) break;
    r.chars += phase == Utf8Phase::Clean;
  }
  if (phase != Utf8Phase::Clean) r.stop = PlainPrefix::Other;
  return r;
}

}  // namespace

Vocabulary::Vocabulary(const std::vector<std::string>& pieces, const std::vector<bool>& is_end)
    : size_(pieces.size()), pieces_(pieces), is_end_(is_end) {
  FUCINA_CHECK(is_end.size() == pieces.size(), InvalidArgument, "[grammar] {} end flags for {} tokens", is_end.size(),
               pieces.size());
  std::vector<TokenId> in_trie, controls, others;
  plain_chars_.assign(size_, not_plain);
  for (std::size_t i = 0; i < size_; ++i) {
    const auto id = static_cast<TokenId>(i);
    if (is_end[i]) end_tokens_.push_back(id);
    if (is_end[i] || pieces[i].empty()) {
      outside_trie_.push_back(id);
      continue;
    }
    in_trie.push_back(id);
    const PlainPrefix p = plain_prefix(pieces[i]);
    if (p.stop == PlainPrefix::Whole && p.chars <= max_plain_chars) plain_chars_[i] = static_cast<std::uint8_t>(p.chars);
    else if (p.stop == PlainPrefix::Control && p.chars < max_plain_chars) controls.push_back(id);
    else others.push_back(id);
  }
  trie_ = TokenTrie(pieces, std::move(in_trie));
  control_trie_ = TokenTrie(pieces, std::move(controls));
  not_plain_trie_ = TokenTrie(pieces, std::move(others));
}

}  // namespace fucina::grammar
