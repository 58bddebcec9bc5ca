#pragma once
// UTF-8 helpers with llama.cpp's exact leniency, so token ids match on any input bytes.
//
// Note [llama.cpp UTF-8 decoding]
// llama.cpp decodes by the lead byte's bit pattern only: overlong forms and surrogates are
// accepted as code points, a bad lead or a missing continuation byte yields U+FFFD and
// consumes ONE byte. The BPE path re-encodes the decoded code points, so invalid bytes
// reach the vocabulary as EF BF BD and overlong forms as their shortest encoding. SPM
// instead splits raw bytes by the lead byte's length (utf8_seq_len) without validating.
// Code points above U+10FFFF (lead bytes F4..F7) make llama.cpp throw; we map them to U+FFFD.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fucina::tokenizer {

inline constexpr std::uint32_t replacement_char = 0xFFFD;

// Sequence length implied by a lead byte's high nibble (1 for continuation bytes).
constexpr std::size_t utf8_seq_len(unsigned char lead) {
  constexpr unsigned char lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lut[lead >> 4];
}

// Decodes one code point at `pos` the way llama.cpp does (Note above); advances `pos`.
std::uint32_t decode_utf8_lenient(std::string_view s, std::size_t& pos);

// Appends the UTF-8 encoding of `cpt` (<= 0x10FFFF; surrogates are encoded as 3 bytes).
void append_utf8(std::string& out, std::uint32_t cpt);

// True when `s` is strict UTF-8 (shortest forms, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

// llama.cpp's decode-then-re-encode of `s` (Note above). Returns false and leaves `out`
// untouched when `s` is already strict UTF-8 (then the canonical form is `s` itself).
bool canonicalize_utf8(std::string_view s, std::string& out);

// Length of the longest prefix of `s` that does not end inside an incomplete (but so far
// well-formed) multi-byte sequence: what a streaming decoder may emit now.
std::size_t utf8_complete_prefix(std::string_view s);

}  // namespace fucina::tokenizer
