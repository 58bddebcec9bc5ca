// GCC 12 at -O3 reports false -Wrestrict overlaps inside std::string's operator+ once it
// is inlined (GCC bug 105329), as in json_schema.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "gbnf_text.hpp"

#include <fmt/format.h>

namespace fucina::grammar::detail {
// A GBNF string literal of raw bytes.
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') out += '\\', out += ch;
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02X}", c);
    else out += ch;
  }
  return out + "\"";
}

// A code point inside a GBNF character class.
std::string class_char(char32_t c) {
  if (c == ']' || c == '[' || c == '\\' || c == '-' || c == '^' || c == '"') return std::string("\\") + static_cast<char>(c);
  if (c < 0x20 || c == 0x7F) return fmt::format("\\x{:02X}", static_cast<unsigned>(c));
  std::string out;  // UTF-8
  if (c < 0x80) out += static_cast<char>(c);
  else if (c < 0x800) out += static_cast<char>(0xC0 | (c >> 6)), out += static_cast<char>(0x80 | (c & 0x3F));
  else if (c < 0x10000)
    out += static_cast<char>(0xE0 | (c >> 12)), out += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), out += static_cast<char>(0x80 | (c & 0x3F));
  else
    out += static_cast<char>(0xF0 | (c >> 18)), out += static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), out += static_cast<char>(0x80 | (c & 0x3F));
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? std::string(sep) : std::string()) + parts[i];
  return out;
}

// Alternatives as one GBNF item.
std::string group(const std::vector<std::string>& alts) {
  return alts.size() == 1 ? alts[0] : fmt::format("({})", join(alts, " | "));
}

// [lo-hi] inside a GBNF character class.
std::string class_range(char32_t lo, char32_t hi) {
  return lo == hi ? class_char(lo) : fmt::format("{}-{}", class_char(lo), class_char(hi));
}



// Next code point of UTF-8 text at i (advances i); invalid bytes pass as themselves.
char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 1;
  if (len == 1 || i + static_cast<std::size_t>(len) > s.size()) return s[i++] & 0xFF;
  char32_t c = b0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]) & 0x3F);
  i += static_cast<std::size_t>(len);
  return c;
}

}  // namespace fucina::grammar::detail
