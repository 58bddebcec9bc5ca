#pragma once
// A JSON Schema `pattern` (a regex subset) as a GBNF item over a JSON string's characters
// (src/grammar only; used by json_schema.cpp).
#include <string>
#include <string_view>

namespace fucina::grammar::detail {

// Thrown for regex syntax the converter does not take (the schema keyword is then refused or
// ignored as llama.cpp does), and for a pattern that is not a valid regex.
struct UnsupportedPattern {
  std::string why;
};
struct InvalidPattern {
  std::string why;
};

// `body` is the pattern without its ^ and $; literal characters come out as JSON spells them.
std::string pattern_to_gbnf(std::string_view body);

}  // namespace fucina::grammar::detail
