#pragma once
// GBNF text pieces shared by the JSON Schema converter and its regex-pattern converter
// (src/grammar only).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fucina::grammar::detail {

// A GBNF string literal of raw bytes.
std::string literal(std::string_view s);
// A code point inside a GBNF character class.
std::string class_char(char32_t c);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
// Alternatives as one GBNF item.
std::string group(const std::vector<std::string>& alts);
// [lo-hi] inside a GBNF character class.
std::string class_range(char32_t lo, char32_t hi);
// Next code point of UTF-8 text at i (advances i); invalid bytes pass as themselves.
char32_t next_code_point(std::string_view s, std::size_t& i);

}  // namespace fucina::grammar::detail
