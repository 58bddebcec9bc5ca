#pragma once
// A context-free grammar over Unicode code points, parsed from llama.cpp's GBNF.
//
// Note [GBNF]
// Rules `name ::= alternatives`, one per line (a line break inside parentheses or after `|`
// continues the rule); names are [a-zA-Z0-9-]+. Items: "literal" strings, [character
// classes] with ranges and `^` negation, `.` (any character), rule names, ( groups ), each
// optionally followed by `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` or `{,n}`. Escapes in literals
// and classes: \t \n \r \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH. `#` comments to the end of
// the line. The input matches when the start rule (`root`) derives it entirely.
// Repetitions become generated rules (`x*` -> `x-star ::= x x-star |`), so the stored form
// is plain alternatives of sequences. Left recursion (direct or through rules that can
// derive the empty string) is refused, as llama.cpp refuses it: a top-down matcher would
// never stop expanding such a rule.
//
// Storage: every alternative of every rule is a run of `elements` ended by an End element;
// a rule is the list of its alternatives' first positions. A matcher position is an index
// into `elements`.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fucina::grammar {

struct CharRange {
  char32_t lo, hi;  // inclusive
};

// A set of code points: the union of ranges, or its complement (`.` is a negated empty set).
struct CharSet {
  std::vector<CharRange> ranges;
  bool negated = false;
  std::array<std::uint64_t, 2> ascii{};  // membership of 0..127, precomputed
  // Beyond ASCII: 0 some code points in, some out; 1 none in; 2 all in (the usual cases:
  // "x", [a-z] hold none; [^"\\], . hold all), precomputed.
  std::uint8_t beyond_ascii = 0;

  bool contains(char32_t c) const {
    if (c < 128) return (ascii[c >> 6] >> (c & 63)) & 1;
    bool in = false;
    for (const auto& r : ranges) in |= (c >= r.lo && c <= r.hi);
    return in != negated;
  }
  // Whether some code point in [lo, hi] is in the set (a partial UTF-8 sequence's range).
  bool intersects(char32_t lo, char32_t hi) const;
  void finish();  // sorts and merges the ranges, fills `ascii`
};

enum class ElementKind : std::uint8_t { Chars, Rule, End };

struct Element {
  ElementKind kind;
  std::uint32_t index;  // Chars: into charsets; Rule: a rule id; End: unused
};

struct Grammar {
  std::vector<std::string> rule_names;
  std::vector<std::vector<std::uint32_t>> rules;  // rule id -> first positions of its alternatives
  std::vector<Element> elements;
  std::vector<CharSet> charsets;
  std::uint32_t root = 0;
};

// Parses GBNF (Note [GBNF]). Throws Error(InvalidArgument) naming line:column and what was
// expected, an undefined rule, a missing start rule or left recursion.
Grammar parse_gbnf(std::string_view text, std::string_view start_rule = "root");

}  // namespace fucina::grammar
