// GBNF parser (Note [GBNF]): recursive descent over the text into rules of alternatives of
// symbols, repetitions expanded into generated rules, then flattened into Grammar.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "fucina/core/error.hpp"
#include "fucina/grammar/grammar.hpp"

namespace fucina::grammar {

bool CharSet::intersects(char32_t lo, char32_t hi) const {
  // The ranges are sorted and disjoint (finish()). Not negated: a range overlaps [lo, hi];
  // negated: the ranges leave a gap in it.
  if (!negated) {
    for (const auto& r : ranges)
      if (r.lo <= hi && r.hi >= lo) return true;
    return false;
  }
  char32_t next = lo;  // the first code point of [lo, hi] not known to be excluded
  for (const auto& r : ranges) {
    if (r.lo > next) break;
    if (r.hi >= next) next = r.hi + 1;
    if (next > hi || next == 0) return false;
  }
  return next <= hi;
}

void CharSet::finish() {
  std::sort(ranges.begin(), ranges.end(), [](CharRange a, CharRange b) { return a.lo < b.lo; });
  std::vector<CharRange> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) merged.back().hi = std::max(merged.back().hi, r.hi);
    else merged.push_back(r);
  }
  ranges = std::move(merged);
  const bool some = intersects(0x80, 0x10FFFF);
  const bool all = !(negated ? CharSet{ranges, false, {}, 0}.intersects(0x80, 0x10FFFF)
                             : CharSet{ranges, true, {}, 0}.intersects(0x80, 0x10FFFF));
  beyond_ascii = all ? 2 : some ? 0 : 1;
  ascii = {};
  for (char32_t c = 0; c < 128; ++c) {
    bool in = false;
    for (const auto& r : ranges) in |= (c >= r.lo && c <= r.hi);
    if (in != negated) ascii[c >> 6] |= std::uint64_t{1} << (c & 63);
  }
}

namespace {

struct Symbol {
  bool is_rule;
  std::uint32_t index;  // charset id or rule id
};
using Sequence = std::vector<Symbol>;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Grammar run(std::string_view start_rule) {
    skip_space(true);
    while (pos_ < s_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (std::uint32_t id = 0; id < names_.size(); ++id)
      if (!defined_[id]) fail_at(first_use_[id], fmt::format("undefined rule '{}'", names_[id]));
    const auto root = ids_.find(std::string(start_rule));
    if (root == ids_.end() || !defined_[root->second])
      fail(ErrorCode::InvalidArgument, fmt::format("grammar: no '{}' rule (the start rule)", start_rule));
    Grammar g = flatten();
    g.root = root->second;
    check_left_recursion(g);
    return g;
  }

 private:
  // ---- errors -----------------------------------------------------------------------
  [[noreturn]] void fail_at(std::size_t at, const std::string& what) const {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, col = 1;
      else if ((static_cast<unsigned char>(s_[i]) & 0xC0) != 0x80) ++col;  // columns count characters
    }
    std::string near = "end of input";
    if (at < s_.size()) {
      std::string_view rest = s_.substr(at, 12);
      rest = rest.substr(0, rest.find('\n'));
      near = rest.empty() ? "end of line" : fmt::format("'{}'", rest);
    }
    fail(ErrorCode::InvalidArgument, fmt::format("grammar: line {}, column {}: {} (at {})", line, col, what, near));
  }
  [[noreturn]] void expected(const std::string& what) const { fail_at(pos_, "expected " + what); }

  // ---- lexing -----------------------------------------------------------------------
  bool at_end() const { return pos_ >= s_.size(); }
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  // Spaces, tabs and comments; line breaks too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') ++pos_;
      else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (newlines && (c == '\n' || c == '\r')) ++pos_;
      else break;
    }
  }
  std::string_view parse_name() {
    const std::size_t start = pos_;
    while (!at_end() && is_word(peek())) ++pos_;
    if (pos_ == start) expected("a rule name");
    return s_.substr(start, pos_ - start);
  }
  // One UTF-8 character of the source.
  char32_t decode_utf8() {
    const auto b0 = static_cast<unsigned char>(peek());
    const int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (len == 0) fail_at(pos_, "invalid UTF-8 in the grammar text");
    char32_t c = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(peek(static_cast<std::size_t>(i)));
      if ((b & 0xC0) != 0x80) fail_at(pos_, "invalid UTF-8 in the grammar text");
      c = (c << 6) | (b & 0x3F);
    }
    pos_ += static_cast<std::size_t>(len);
    return c;
  }
  char32_t parse_hex(int digits) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) expected(fmt::format("{} hex digits", digits));
      v = v * 16 + static_cast<char32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF) fail_at(pos_, "code point beyond U+10FFFF");
    return v;
  }
  // A character of a literal or class, escapes decoded.
  char32_t parse_char() {
    if (at_end()) expected("a character");
    if (peek() != '\\') return decode_utf8();
    const std::size_t at = pos_;
    ++pos_;
    switch (const char e = peek(); ++pos_, e) {
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      case 't': return '\t';
      case 'n': return '\n';
      case 'r': return '\r';
      case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<char32_t>(e);
      default: fail_at(at, "unknown escape (expected one of \\t \\n \\r \\\\ \\\" \\[ \\] \\- \\^ \\x \\u \\U)");
    }
  }

  // ---- rules --------------------------------------------------------------------------
  std::uint32_t rule_id(std::string_view name, std::size_t used_at) {
    auto [it, fresh] = ids_.try_emplace(std::string(name), static_cast<std::uint32_t>(names_.size()));
    if (fresh) {
      names_.emplace_back(name);
      defined_.push_back(false);
      first_use_.push_back(used_at);
      alts_.emplace_back();
    }
    return it->second;
  }
  std::uint32_t new_rule(std::string_view base, std::vector<Sequence> alts) {
    const std::string name = fmt::format("{}~{}", base, ++generated_);  // '~' is no user name's
    const std::uint32_t id = rule_id(name, pos_);
    defined_[id] = true;
    alts_[id] = std::move(alts);
    return id;
  }
  std::uint32_t charset(CharSet cs) {
    cs.finish();
    charsets_.push_back(std::move(cs));
    return static_cast<std::uint32_t>(charsets_.size() - 1);
  }

  void parse_rule() {
    const std::size_t at = pos_;
    const std::string_view name = parse_name();
    skip_space(false);
    if (s_.substr(pos_, 3) != "::=") expected("'::=' after the rule name");
    pos_ += 3;
    skip_space(true);
    const std::uint32_t id = rule_id(name, at);
    if (defined_[id]) fail_at(at, fmt::format("rule '{}' defined twice", name));
    defined_[id] = true;
    current_ = std::string(name);
    alts_[id] = parse_alternatives(false);
    if (!at_end() && peek() != '\n' && peek() != '\r') expected("a line break after the rule");
  }

  std::vector<Sequence> parse_alternatives(bool nested) {
    std::vector<Sequence> alts;
    alts.push_back(parse_sequence(nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }

  Sequence parse_sequence(bool nested) {
    Sequence seq;
    while (!at_end()) {
      const char c = peek();
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      const std::size_t at = pos_;
      Sequence item = parse_primary();
      skip_space(nested);
      parse_repetition(at, item, seq);
      skip_space(nested);
    }
    return seq;
  }

  Sequence parse_primary() {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      Sequence seq;
      while (peek() != '"') {
        if (at_end() || peek() == '\n') expected("'\"' to close the string");
        const char32_t ch = parse_char();
        seq.push_back({false, charset({.ranges = {{ch, ch}}})});
      }
      ++pos_;
      return seq;
    }
    if (c == '[') {
      ++pos_;
      CharSet cs;
      if (peek() == '^') cs.negated = true, ++pos_;
      while (peek() != ']') {
        if (at_end() || peek() == '\n') expected("']' to close the character class");
        const char32_t lo = parse_char();
        char32_t hi = lo;
        if (peek() == '-' && peek(1) != ']') {
          ++pos_;
          if (at_end()) expected("the end of a range");
          hi = parse_char();
          if (hi < lo) fail_at(pos_, "range end below its start");
        }
        cs.ranges.push_back({lo, hi});
      }
      ++pos_;
      return {{false, charset(std::move(cs))}};
    }
    if (c == '.') {
      ++pos_;
      return {{false, charset({.ranges = {}, .negated = true})}};
    }
    if (c == '(') {
      ++pos_;
      skip_space(true);
      auto alts = parse_alternatives(true);
      if (peek() != ')') expected("')' to close the group");
      ++pos_;
      if (alts.size() == 1) return std::move(alts[0]);
      return {{true, new_rule(current_, std::move(alts))}};
    }
    if (is_word(c)) {
      const std::size_t at = pos_;
      const std::string_view name = parse_name();
      return {{true, rule_id(name, at)}};
    }
    if (c == '<') fail_at(pos_, "token references (<...>) are not supported");
    expected("a string, a character class, '.', a rule name or '('");
  }

  std::optional<std::uint64_t> parse_int() {
    const std::size_t start = pos_;
    std::uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<std::uint64_t>(peek() - '0');
      if (v > 100000) fail_at(start, "repetition count above 100000");
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return v;
  }

  // Appends `item` repeated as the operator after it says.
  void parse_repetition(std::size_t at, const Sequence& item, Sequence& out) {
    std::uint64_t min = 1;
    std::optional<std::uint64_t> max = 1;
    const char c = peek();
    if (c == '*') min = 0, max.reset(), ++pos_;
    else if (c == '+') min = 1, max.reset(), ++pos_;
    else if (c == '?') min = 0, max = 1, ++pos_;
    else if (c == '{') {
      ++pos_;
      skip_space(false);
      const auto lo = parse_int();
      skip_space(false);
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        max = parse_int();
        skip_space(false);
      } else {
        if (!lo) expected("a repetition count");
        max = lo;
      }
      min = lo.value_or(0);
      if (peek() != '}') expected("'}' to close the repetition");
      ++pos_;
      if (max && *max < min) fail_at(at, "repetition maximum below its minimum");
      // llama.cpp's limit on the minimum (it copies the item that often); a maximum above it
      // stays exact here (llama.cpp turns it into "unbounded").
      if (min > 2000) fail_at(at, "repetition minimum above 2000");
    }
    if (min == 1 && max == 1) {
      out.insert(out.end(), item.begin(), item.end());
      return;
    }
    if (item.empty()) return;
    // A multi-symbol item is repeated through a rule of its own (one symbol to repeat).
    const Symbol unit = item.size() == 1 ? item[0] : Symbol{true, new_rule(current_, {item})};
    for (std::uint64_t i = 0; i < min; ++i) out.push_back(unit);
    if (!max) {  // star ::= unit star |
      const std::uint32_t star = rule_id(fmt::format("{}~{}", current_, ++generated_), at);
      defined_[star] = true;
      alts_[star] = {{unit, {true, star}}, {}};
      out.push_back({true, star});
      return;
    }
    // (unit (unit ...)?)? nested max - min deep: opt_k ::= unit opt_{k-1} |
    std::optional<Symbol> inner;
    for (std::uint64_t k = 0; k < *max - min; ++k) {
      Sequence more{unit};
      if (inner) more.push_back(*inner);
      inner = Symbol{true, new_rule(current_, {more, {}})};
    }
    if (inner) out.push_back(*inner);
  }

  // ---- output -------------------------------------------------------------------------
  Grammar flatten() {
    Grammar g;
    g.rule_names = names_;
    g.charsets = std::move(charsets_);
    g.rules.resize(names_.size());
    for (std::uint32_t id = 0; id < names_.size(); ++id)
      for (const auto& seq : alts_[id]) {
        g.rules[id].push_back(static_cast<std::uint32_t>(g.elements.size()));
        for (const auto& s : seq) g.elements.push_back({s.is_rule ? ElementKind::Rule : ElementKind::Chars, s.index});
        g.elements.push_back({ElementKind::End, 0});
      }
    return g;
  }

  // Left recursion that a top-down matcher cannot finish: a cycle of leftmost references
  // (after symbols that can derive the empty string) in which some reference has symbols
  // after it, so each round pushes one more continuation. A cycle of references that end
  // their alternatives (`x ::= y? x |`, from `(y*)*`) leaves the stack as it was: the
  // matcher stops it by skipping a stack it already expanded, as llama.cpp accepts it.
  void check_left_recursion(const Grammar& g) const {
    const std::size_t n = g.rules.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (std::uint32_t p : g.rules[r]) {
          while (g.elements[p].kind == ElementKind::Rule && nullable[g.elements[p].index]) ++p;
          if (g.elements[p].kind == ElementKind::End) {
            nullable[r] = 1, changed = true;
            break;
          }
        }
      }
    }
    struct Edge {
      std::uint32_t to;
      bool grows;  // symbols follow the reference
    };
    std::vector<std::vector<Edge>> left(n);
    for (std::size_t r = 0; r < n; ++r)
      for (std::uint32_t p : g.rules[r])
        for (; g.elements[p].kind == ElementKind::Rule; ++p) {
          left[r].push_back({g.elements[p].index, g.elements[p + 1].kind != ElementKind::End});
          if (!nullable[g.elements[p].index]) break;
        }
    std::vector<std::uint32_t> seen(n, 0), todo;
    std::uint32_t round = 0;
    for (std::uint32_t r = 0; r < n; ++r)
      for (const Edge& e : left[r]) {
        if (!e.grows) continue;
        // Does e.to lead back to r?
        ++round;
        todo.assign(1, e.to);
        while (!todo.empty()) {
          const std::uint32_t q = todo.back();
          todo.pop_back();
          if (q == r) fail(ErrorCode::InvalidArgument, fmt::format("grammar: rule '{}' is left-recursive", display_name(r)));
          if (seen[q] == round) continue;
          seen[q] = round;
          for (const Edge& f : left[q]) todo.push_back(f.to);
        }
      }
  }
  // A generated rule is named after the rule it came from: "name~N".
  std::string display_name(std::uint32_t id) const { return names_[id].substr(0, names_[id].find('~')); }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::string current_;
  std::uint64_t generated_ = 0;
  std::map<std::string, std::uint32_t, std::less<>> ids_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::vector<std::size_t> first_use_;
  std::vector<std::vector<Sequence>> alts_;
  std::vector<CharSet> charsets_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view start_rule) { return Parser(text).run(start_rule); }

}  // namespace fucina::grammar
