// GCC 12 at -O3 reports false -Wrestrict overlaps inside std::string's operator+ once it
// is inlined (GCC bug 105329), as in json_schema.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "json_pattern.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include "gbnf_text.hpp"

namespace fucina::grammar::detail {

namespace {

struct ClassRange {
  char32_t lo, hi;
};

// A pattern (its ^...$ stripped) over the characters of a JSON string's text: literal
// characters are written as JSON spells them ("\"" for a quote).
class PatternConverter {
 public:
  explicit PatternConverter(std::string_view p) : p_(p) {}
  std::string run() {
    std::string out = alternatives();
    if (i_ < p_.size()) throw InvalidPattern{"unbalanced parentheses"};
    return out;
  }

 private:
  bool at_end() const { return i_ >= p_.size(); }
  char peek() const { return at_end() ? '\0' : p_[i_]; }

  std::string alternatives() {
    std::vector<std::string> alts{sequence()};
    while (peek() == '|') ++i_, alts.push_back(sequence());
    return group(alts);
  }

  std::string sequence() {
    std::vector<std::string> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      std::string item = atom();
      items.push_back(item + quantifier());
    }
    return items.empty() ? "\"\"" : join(items, " ");
  }

  std::string quantifier() {
    std::string q;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') q = std::string(1, c), ++i_;
    else if (c == '{') {
      const std::size_t close = p_.find('}', i_);
      if (close == std::string_view::npos) throw UnsupportedPattern{"unterminated curly brackets"};
      const std::string_view body = p_.substr(i_ + 1, close - i_ - 1);
      const bool ok = !body.empty() && body.find_first_not_of("0123456789,") == std::string_view::npos &&
                      std::count(body.begin(), body.end(), ',') <= 1 && body[0] != ',';
      if (!ok) throw UnsupportedPattern{fmt::format("repetition {{{}}}", body)};
      q = fmt::format("{{{}}}", body);
      i_ = close + 1;
    }
    if (!q.empty() && (peek() == '?')) ++i_;  // lazy: the same language
    if (!q.empty() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{'))
      throw InvalidPattern{"nothing to repeat"};
    return q;
  }

  std::string atom() {
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (peek() == '?') {
        if (p_.substr(i_, 2) != "?:") throw UnsupportedPattern{"group syntax (?" + std::string(p_.substr(i_ + 1, 1)) + ")"};
        i_ += 2;
      }
      std::string inner = alternatives();
      if (peek() != ')') throw InvalidPattern{"unbalanced parentheses"};
      ++i_;
      return "(" + inner + ")";
    }
    if (c == '[') return char_class();
    if (c == '.') return ++i_, "dot";
    if (c == '^' || c == '$') throw UnsupportedPattern{"an anchor inside the pattern"};
    if (c == '*' || c == '+' || c == '?' || c == '{') throw InvalidPattern{"nothing to repeat"};
    if (c == '\\') {
      ++i_;
      if (at_end()) throw InvalidPattern{"trailing backslash"};
      const char e = p_[i_++];
      if (const auto cls = shorthand(e)) return render_class(cls->first, cls->second);
      if (e == 't') return literal("\\t");
      if (e == 'n') return literal("\\n");
      if (e == 'r') return literal("\\r");
      if (std::isalnum(static_cast<unsigned char>(e))) throw UnsupportedPattern{fmt::format("escape \\{}", e)};
      return json_char(static_cast<unsigned char>(e));
    }
    return json_char(next_code_point(p_, i_));
  }

  // \d \w \s and their negations, as (ranges, negated).
  static std::optional<std::pair<std::vector<ClassRange>, bool>> shorthand(char e) {
    const std::vector<ClassRange> d = {{'0', '9'}}, w = {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}},
                                  s = {{' ', ' '}, {'\t', '\r'}};
    switch (e) {
      case 'd': return {{d, false}};
      case 'D': return {{d, true}};
      case 'w': return {{w, false}};
      case 'W': return {{w, true}};
      case 's': return {{s, false}};
      case 'S': return {{s, true}};
      default: return std::nullopt;
    }
  }

  std::string char_class() {
    ++i_;  // [
    bool negated = false;
    if (peek() == '^') negated = true, ++i_;
    std::vector<ClassRange> ranges;
    bool first = true;
    while (first || peek() != ']') {
      if (at_end()) throw InvalidPattern{"unterminated character class"};
      first = false;
      char32_t lo;
      if (peek() == '\\') {
        ++i_;
        if (at_end()) throw InvalidPattern{"unterminated character class"};
        const char e = p_[i_++];
        if (const auto cls = shorthand(e)) {
          if (cls->second) throw UnsupportedPattern{fmt::format("\\{} inside a character class", e)};
          ranges.insert(ranges.end(), cls->first.begin(), cls->first.end());
          continue;
        }
        lo = e == 't' ? '\t' : e == 'n' ? '\n' : e == 'r' ? '\r' : static_cast<unsigned char>(e);
        if (std::isalnum(static_cast<unsigned char>(e)) && e != 't' && e != 'n' && e != 'r')
          throw UnsupportedPattern{fmt::format("escape \\{} in a character class", e)};
      } else {
        lo = next_code_point(p_, i_);
      }
      char32_t hi = lo;
      if (peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (peek() == '\\') {
          ++i_;
          hi = static_cast<unsigned char>(p_[i_++]);
        } else {
          hi = next_code_point(p_, i_);
        }
        if (hi < lo) throw InvalidPattern{"character range out of order"};
      }
      ranges.push_back({lo, hi});
    }
    ++i_;  // ]
    return render_class(ranges, negated);
  }

  // One character of the string as JSON writes it.
  static std::string json_char(char32_t c) {
    if (c == '"') return literal("\\\"");
    if (c == '\\') return literal("\\\\");
    if (c == '\n') return literal("\\n");
    if (c == '\t') return literal("\\t");
    if (c == '\r') return literal("\\r");
    if (c < 0x20) return literal(fmt::format("\\u{:04x}", static_cast<unsigned>(c)));
    return "[" + class_char(c) + "]";
  }

  // A class over string characters: the raw characters JSON allows unescaped, plus the
  // escaped forms of `"`, `\` and the line breaks/tabs the class admits.
  static std::string render_class(const std::vector<ClassRange>& ranges, bool negated) {
    const auto in = [&](char32_t c) {
      bool hit = false;
      for (const auto& r : ranges) hit |= c >= r.lo && c <= r.hi;
      return hit != negated;
    };
    std::string cls = negated ? "[^" : "[";
    for (const auto& r : ranges) cls += class_range(r.lo, r.hi);
    if (negated) cls += "\"\\\\\\x7F\\x00-\\x1F";  // never raw inside a JSON string
    cls += "]";
    std::vector<std::string> alts;
    // A non-negated class that holds only escaped characters has no raw part.
    bool raw = negated;
    for (const auto& r : ranges)
      for (char32_t c = r.lo; c <= r.hi && !raw; ++c) raw = c >= 0x20 && c != '"' && c != '\\' && c != 0x7F;
    if (raw) {
      if (!negated) {  // drop what JSON must escape from the raw part
        std::string kept = "[";
        for (const auto& r : ranges) {
          for (char32_t lo = r.lo; lo <= r.hi;) {
            const auto bad = [](char32_t c) { return c < 0x20 || c == '"' || c == '\\' || c == 0x7F; };
            if (bad(lo)) {
              ++lo;
              continue;
            }
            char32_t hi = lo;
            while (hi < r.hi && !bad(hi + 1)) ++hi;
            kept += class_range(lo, hi);
            lo = hi + 1;
            if (hi == r.hi) break;
          }
        }
        cls = kept + "]";
      }
      alts.push_back(cls);
    }
    if (in('"')) alts.push_back(literal("\\\""));
    if (in('\\')) alts.push_back(literal("\\\\"));
    if (in('\n')) alts.push_back(literal("\\n"));
    if (in('\t')) alts.push_back(literal("\\t"));
    if (in('\r')) alts.push_back(literal("\\r"));
    if (alts.empty()) throw UnsupportedPattern{"a class of control characters only"};
    return group(alts);
  }

  std::string_view p_;
  std::size_t i_ = 0;
};

}  // namespace

std::string pattern_to_gbnf(std::string_view body) { return PatternConverter(body).run(); }

}  // namespace fucina::grammar::detail
