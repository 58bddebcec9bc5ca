// Jinja lexer and parser (Note [Jinja subset] in jinja.hpp).
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "jinja_ast.hpp"

namespace fucina::tokenizer::jinja::detail {

std::string where(const std::string& source, std::size_t pos) {
  pos = std::min(pos, source.size());
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < pos; ++i) {
    if (source[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return fmt::format("line {}:{}", line, col);
}

namespace {

struct Token {
  enum class Kind { Text, ExprOpen, ExprClose, StmtOpen, StmtClose, Name, Str, Int, Float, Punct, End };
  Kind kind = Kind::End;
  std::string text;
  std::size_t pos = 0;
};
using TK = Token::Kind;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

void strip_left(std::string& s) {
  std::size_t k = 0;
  while (k < s.size() && is_space(s[k])) ++k;
  s.erase(0, k);
}
void strip_right(std::string& s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : s_(src) {}

  std::vector<Token> run() {
    bool strip_next = false, trim_newline = false;
    std::size_t i = 0;
    const std::size_t n = s_.size();
    while (i < n) {
      std::size_t tag = i;
      while (tag + 1 < n && !(s_[tag] == '{' && (s_[tag + 1] == '{' || s_[tag + 1] == '%' || s_[tag + 1] == '#'))) ++tag;
      const bool found = tag + 1 < n;
      if (!found) tag = n;
      std::string text = s_.substr(i, tag - i);
      const char kind = found ? s_[tag + 1] : 0;
      const char mod = found && tag + 2 < n ? s_[tag + 2] : 0;
      if (found && (kind == '%' || kind == '#') && mod != '+') {  // lstrip_blocks
        std::size_t k = text.size();
        while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t')) --k;
        if (k == 0 ? i == 0 : text[k - 1] == '\n') text.resize(k);
      }
      if (strip_next) strip_left(text);
      else if (trim_newline && !text.empty() && text[0] == '\n') text.erase(0, 1);
      if (found && mod == '-') strip_right(text);
      if (!text.empty()) toks_.push_back({TK::Text, std::move(text), i});
      if (!found) break;
      i = tag + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      if (kind == '#') {
        const std::size_t close = s_.find("#}", i);
        if (close == std::string::npos) fail(tag, "unclosed comment");
        strip_next = close > i && s_[close - 1] == '-';
        trim_newline = true;
        i = close + 2;
        continue;
      }
      i = lex_tag(tag, kind, i, &strip_next);
      trim_newline = kind == '%';
    }
    toks_.push_back({TK::End, "", n});
    return std::move(toks_);
  }

 private:
  [[noreturn]] void fail(std::size_t pos, std::string_view msg) const {
    fucina::fail(ErrorCode::InvalidArgument, fmt::format("[jinja] {}: {}", where(s_, pos), msg));
  }

  // Tokens of one {{ }} / {% %} tag starting after its opener; returns the offset after it.
  std::size_t lex_tag(std::size_t tag, char kind, std::size_t i, bool* strip_next) {
    const char closer = kind == '{' ? '}' : '%';
    toks_.push_back({kind == '{' ? TK::ExprOpen : TK::StmtOpen, "", tag});
    int depth = 0;
    const std::size_t n = s_.size();
    for (;;) {
      while (i < n && is_space(s_[i])) ++i;
      if (i >= n) fail(tag, kind == '{' ? "unclosed '{{'" : "unclosed '{%'");
      const char c = s_[i];
      const bool closes_here = i + 1 < n && s_[i] == closer && s_[i + 1] == '}' && (kind == '%' || depth == 0);
      const bool closes_strip = c == '-' && i + 2 < n && s_[i + 1] == closer && s_[i + 2] == '}' && (kind == '%' || depth == 0);
      if (closes_here || closes_strip) {
        toks_.push_back({kind == '{' ? TK::ExprClose : TK::StmtClose, "", i});
        *strip_next = closes_strip;
        return i + (closes_strip ? 3 : 2);
      }
      const std::size_t start = i;
      if (c == '\'' || c == '"') {
        toks_.push_back({TK::Str, lex_string(i), start});
      } else if (is_digit(c)) {
        while (i < n && is_digit(s_[i])) ++i;
        bool is_float = false;
        if (i + 1 < n && s_[i] == '.' && is_digit(s_[i + 1])) {
          is_float = true;
          ++i;
          while (i < n && is_digit(s_[i])) ++i;
        }
        toks_.push_back({is_float ? TK::Float : TK::Int, s_.substr(start, i - start), start});
      } else if (is_name_start(c)) {
        while (i < n && is_name_char(s_[i])) ++i;
        toks_.push_back({TK::Name, s_.substr(start, i - start), start});
      } else {
        static constexpr std::string_view two[] = {"==", "!=", "<=", ">=", "//", "**"};
        std::string op(1, c);
        for (auto t : two)
          if (s_.compare(i, 2, t) == 0) op = std::string(t);
        if (op.size() == 1 && std::string_view("()[]{},:.|+-*/%~<>=").find(c) == std::string_view::npos)
          fail(i, fmt::format("unexpected character '{}'", c));
        if (c == '{') ++depth;
        if (c == '}') --depth;
        i += op.size();
        toks_.push_back({TK::Punct, std::move(op), start});
      }
    }
  }

  std::string lex_string(std::size_t& i) {
    const char quote = s_[i];
    const std::size_t start = i++;
    std::string out;
    while (i < s_.size() && s_[i] != quote) {
      char c = s_[i++];
      if (c == '\\' && i < s_.size()) {
        const char e = s_[i++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'v': c = '\v'; break;
          case '0': c = '\0'; break;
          case '\\': case '\'': case '"': c = e; break;
          default: out += '\\'; c = e;  // Python keeps unknown escapes verbatim
        }
      }
      out += c;
    }
    if (i >= s_.size()) fail(start, "unterminated string literal");
    ++i;
    return out;
  }

  const std::string& s_;
  std::vector<Token> toks_;
};

constexpr int max_depth = 200;
constexpr int max_height = 400;

class Parser {
 public:
  Parser(const std::string& src, std::vector<Token> toks) : s_(src), t_(std::move(toks)) {}

  Body parse_template() {
    std::string ender;
    Body body = parse_body({}, &ender, 0);
    return body;
  }

 private:
  [[noreturn]] void fail(std::size_t pos, std::string_view msg) const {
    fucina::fail(ErrorCode::InvalidArgument, fmt::format("[jinja] {}: {}", where(s_, pos), msg));
  }
  [[noreturn]] void unsupported(std::size_t pos, std::string_view what) const {
    fucina::fail(ErrorCode::Unsupported, fmt::format("[jinja] {}: unsupported {}", where(s_, pos), what));
  }

  const Token& peek(std::size_t ahead = 0) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[k_];
    if (k_ + 1 < t_.size()) ++k_;
    return t;
  }
  bool at_punct(std::string_view p, std::size_t ahead = 0) const {
    return peek(ahead).kind == TK::Punct && peek(ahead).text == p;
  }
  bool at_name(std::string_view w, std::size_t ahead = 0) const {
    return peek(ahead).kind == TK::Name && peek(ahead).text == w;
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case TK::End: return "end of template";
      case TK::Text: return "text";
      case TK::ExprClose: return "'}}'";
      case TK::StmtClose: return "'%}'";
      case TK::ExprOpen: return "'{{'";
      case TK::StmtOpen: return "'{%'";
      default: return fmt::format("'{}'", t.text);
    }
  }
  void expect_punct(std::string_view p) {
    if (!at_punct(p)) fail(peek().pos, fmt::format("expected '{}', got {}", p, describe(peek())));
    next();
  }
  void expect_kind(TK kind, std::string_view what) {
    if (peek().kind != kind) fail(peek().pos, fmt::format("expected {}, got {}", what, describe(peek())));
    next();
  }
  std::string expect_name() {
    if (peek().kind != TK::Name) fail(peek().pos, fmt::format("expected a name, got {}", describe(peek())));
    return next().text;
  }
  void expect_word(std::string_view w) {
    if (!at_name(w)) fail(peek().pos, fmt::format("expected '{}', got {}", w, describe(peek())));
    next();
  }
  void guard(int depth) const {
    if (depth > max_depth) fail(peek().pos, "template nested too deeply");
  }

  // Statements up to one of `enders` (left unconsumed after the `{%` and the name).
  Body parse_body(std::initializer_list<std::string_view> enders, std::string* found, int depth) {
    guard(depth);
    Body body;
    for (;;) {
      const Token& t = peek();
      if (t.kind == TK::End) {
        if (enders.size() == 0) return body;
        fail(t.pos, fmt::format("unexpected end of template, missing '{{% {} %}}'", *std::prev(enders.end())));
      }
      if (t.kind == TK::Text) {
        Stmt s;
        s.kind = Stmt::Kind::Text;
        s.pos = t.pos;
        s.text = next().text;
        body.push_back(std::move(s));
      } else if (t.kind == TK::ExprOpen) {
        Stmt s;
        s.kind = Stmt::Kind::Output;
        s.pos = next().pos;
        s.expr = parse_expr(depth + 1);
        expect_kind(TK::ExprClose, "'}}'");
        body.push_back(std::move(s));
      } else if (t.kind == TK::StmtOpen) {
        const std::size_t pos = next().pos;
        if (peek().kind != TK::Name) fail(peek().pos, fmt::format("expected a tag name, got {}", describe(peek())));
        const std::string kw = peek().text;
        if (std::find(enders.begin(), enders.end(), kw) != enders.end()) {
          next();
          *found = kw;
          return body;
        }
        body.push_back(parse_statement(kw, pos, depth + 1));
      } else {
        fail(t.pos, fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  Stmt parse_statement(const std::string& kw, std::size_t pos, int depth) {
    Stmt s;
    s.pos = pos;
    const std::size_t kw_pos = next().pos;
    std::string ender;
    if (kw == "if") {
      s.kind = Stmt::Kind::If;
      s.conds.push_back(parse_expr(depth));
      expect_kind(TK::StmtClose, "'%}'");
      for (;;) {
        s.bodies.push_back(parse_body({"elif", "else", "endif"}, &ender, depth));
        if (ender == "elif") {
          s.conds.push_back(parse_expr(depth));
          expect_kind(TK::StmtClose, "'%}'");
          continue;
        }
        expect_kind(TK::StmtClose, "'%}'");
        if (ender == "else") {
          s.bodies.push_back(parse_body({"endif"}, &ender, depth));
          expect_kind(TK::StmtClose, "'%}'");
        }
        return s;
      }
    }
    if (kw == "for") {
      s.kind = Stmt::Kind::For;
      s.targets.push_back(expect_name());
      while (at_punct(",")) {
        next();
        s.targets.push_back(expect_name());
      }
      expect_word("in");
      s.expr = parse_or(depth);
      if (at_name("if")) {
        next();
        s.filter = parse_or(depth);
      }
      if (at_name("recursive")) unsupported(peek().pos, "recursive for loop");
      expect_kind(TK::StmtClose, "'%}'");
      s.bodies.push_back(parse_body({"else", "endfor"}, &ender, depth));
      expect_kind(TK::StmtClose, "'%}'");
      if (ender == "else") {
        s.bodies.push_back(parse_body({"endfor"}, &ender, depth));
        expect_kind(TK::StmtClose, "'%}'");
      }
      return s;
    }
    if (kw == "set") {
      s.targets.push_back(expect_name());
      if (at_punct(".")) {
        next();
        s.targets.push_back(expect_name());
      }
      if (at_punct(",")) unsupported(peek().pos, "tuple assignment in set");
      if (peek().kind == TK::StmtClose) {
        next();
        s.kind = Stmt::Kind::SetBlock;
        s.bodies.push_back(parse_body({"endset"}, &ender, depth));
        expect_kind(TK::StmtClose, "'%}'");
        return s;
      }
      s.kind = Stmt::Kind::Set;
      expect_punct("=");
      s.expr = parse_expr(depth);
      expect_kind(TK::StmtClose, "'%}'");
      return s;
    }
    if (kw == "break" || kw == "continue") {
      s.kind = kw == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect_kind(TK::StmtClose, "'%}'");
      return s;
    }
    static constexpr std::string_view unsupported_tags[] = {
        "macro", "call", "filter", "raw", "include", "import", "from", "extends", "block",
        "with", "generation", "autoescape", "do", "trans", "pluralize"};
    if (std::find(std::begin(unsupported_tags), std::end(unsupported_tags), kw) != std::end(unsupported_tags))
      unsupported(kw_pos, fmt::format("tag '{{% {} %}}'", kw));
    fail(kw_pos, fmt::format("unexpected tag '{}'", kw));
  }

  ExprPtr make(Expr::Kind kind, std::size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  ExprPtr binary(std::string op, std::size_t pos, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::Binary, pos);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return measured(std::move(e));
  }
  // Sets e's height from its children; long operator or postfix chains are rejected here.
  ExprPtr measured(ExprPtr e) {
    for (const auto& k : e->kids)
      if (k) e->height = std::max(e->height, k->height + 1);
    if (e->height > max_height) fail(e->pos, "expression nested too deeply");
    return e;
  }

  ExprPtr parse_expr(int depth) {
    guard(depth);
    ExprPtr e = parse_or(depth + 1);
    if (at_name("if")) {
      auto c = make(Expr::Kind::Cond, next().pos);
      c->kids.push_back(std::move(e));
      c->kids.push_back(parse_or(depth + 1));
      if (at_name("else")) {
        next();
        c->kids.push_back(parse_expr(depth + 1));
      } else {
        c->kids.push_back(nullptr);
      }
      return measured(std::move(c));
    }
    return e;
  }
  ExprPtr parse_or(int depth) {
    ExprPtr e = parse_and(depth);
    while (at_name("or")) {
      const std::size_t pos = next().pos;
      e = binary("or", pos, std::move(e), parse_and(depth));
    }
    return e;
  }
  ExprPtr parse_and(int depth) {
    ExprPtr e = parse_not(depth);
    while (at_name("and")) {
      const std::size_t pos = next().pos;
      e = binary("and", pos, std::move(e), parse_not(depth));
    }
    return e;
  }
  ExprPtr parse_not(int depth) {
    guard(depth);
    if (at_name("not")) {
      auto e = make(Expr::Kind::Unary, next().pos);
      e->name = "not";
      e->kids.push_back(parse_not(depth + 1));
      return measured(std::move(e));
    }
    return parse_compare(depth);
  }
  ExprPtr parse_compare(int depth) {
    ExprPtr e = parse_math1(depth);
    for (;;) {
      const Token& t = peek();
      if (t.kind == TK::Punct && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
                                  t.text == ">" || t.text == ">=")) {
        std::string op = next().text;
        e = binary(std::move(op), t.pos, std::move(e), parse_math1(depth));
      } else if (at_name("in")) {
        const std::size_t pos = next().pos;
        e = binary("in", pos, std::move(e), parse_math1(depth));
      } else if (at_name("not") && at_name("in", 1)) {
        const std::size_t pos = next().pos;
        next();
        e = binary("not in", pos, std::move(e), parse_math1(depth));
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_math1(int depth) {
    ExprPtr e = parse_concat(depth);
    while (at_punct("+") || at_punct("-")) {
      const Token& t = next();
      e = binary(t.text, t.pos, std::move(e), parse_concat(depth));
    }
    return e;
  }
  ExprPtr parse_concat(int depth) {
    ExprPtr e = parse_math2(depth);
    while (at_punct("~")) {
      const std::size_t pos = next().pos;
      e = binary("~", pos, std::move(e), parse_math2(depth));
    }
    return e;
  }
  ExprPtr parse_math2(int depth) {
    ExprPtr e = parse_pow(depth);
    while (at_punct("*") || at_punct("/") || at_punct("//") || at_punct("%")) {
      const Token& t = next();
      e = binary(t.text, t.pos, std::move(e), parse_pow(depth));
    }
    return e;
  }
  ExprPtr parse_pow(int depth) {
    ExprPtr e = parse_unary(depth);
    while (at_punct("**")) {
      const std::size_t pos = next().pos;
      e = binary("**", pos, std::move(e), parse_unary(depth));
    }
    return e;
  }
  ExprPtr parse_unary(int depth) {
    guard(depth);
    if (at_punct("-") || at_punct("+")) {
      const Token& t = next();
      auto e = make(Expr::Kind::Unary, t.pos);
      e->name = t.text;
      e->kids.push_back(parse_unary(depth + 1));
      return measured(std::move(e));
    }
    return parse_postfix(parse_primary(depth + 1), depth + 1);
  }

  // Call/filter/test arguments after '(' up to ')'.
  void parse_args(Expr& e, int depth) {
    while (!at_punct(")")) {
      if (peek().kind == TK::Name && at_punct("=", 1)) {
        e.arg_names.push_back(next().text);
        next();
      } else {
        e.arg_names.emplace_back();
      }
      e.kids.push_back(parse_expr(depth + 1));
      if (!at_punct(",")) break;
      next();
    }
    expect_punct(")");
  }

  ExprPtr parse_postfix(ExprPtr e, int depth) {
    for (;;) {
      guard(depth);
      if (at_punct(".")) {
        const std::size_t pos = next().pos;
        auto m = make(Expr::Kind::Member, pos);
        if (peek().kind == TK::Int) {  // `a.0` is a[0] in Jinja
          m->kind = Expr::Kind::Index;
          auto idx = make(Expr::Kind::Literal, peek().pos);
          idx->value = Value(std::int64_t(std::strtoll(next().text.c_str(), nullptr, 10)));
          m->kids.push_back(std::move(e));
          m->kids.push_back(std::move(idx));
        } else {
          m->name = expect_name();
          m->kids.push_back(std::move(e));
        }
        e = measured(std::move(m));
      } else if (at_punct("[")) {
        const std::size_t pos = next().pos;
        e = measured(parse_subscript(std::move(e), pos, depth + 1));
      } else if (at_punct("(")) {
        auto c = make(Expr::Kind::Call, next().pos);
        c->kids.push_back(std::move(e));
        c->arg_names.emplace_back();
        parse_args(*c, depth + 1);
        e = measured(std::move(c));
      } else if (at_punct("|")) {
        auto f = make(Expr::Kind::Filter, next().pos);
        f->name = expect_name();
        f->kids.push_back(std::move(e));
        f->arg_names.emplace_back();
        if (at_punct("(")) {
          next();
          parse_args(*f, depth + 1);
        }
        e = measured(std::move(f));
      } else if (at_name("is")) {
        auto t = make(Expr::Kind::Test, next().pos);
        if (at_name("not")) {
          next();
          t->negate = true;
        }
        t->name = expect_name();
        t->kids.push_back(std::move(e));
        t->arg_names.emplace_back();
        if (at_punct("(")) {
          next();
          parse_args(*t, depth + 1);
        } else if (peek().kind == TK::Str || peek().kind == TK::Int || peek().kind == TK::Float) {
          t->kids.push_back(parse_primary(depth + 1));  // `x is eq 'y'`, `n is divisibleby 3`
          t->arg_names.emplace_back();
        }
        e = measured(std::move(t));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, std::size_t pos, int depth) {
    ExprPtr parts[3];
    int colons = 0;
    for (;;) {
      if (at_punct("]")) break;
      if (at_punct(":")) {
        next();
        if (++colons > 2) fail(peek().pos, "too many ':' in slice");
        continue;
      }
      if (parts[colons]) fail(peek().pos, fmt::format("expected ']', got {}", describe(peek())));
      parts[colons] = parse_expr(depth + 1);
    }
    expect_punct("]");
    if (colons == 0) {
      if (!parts[0]) fail(pos, "empty subscript");
      auto e = make(Expr::Kind::Index, pos);
      e->kids.push_back(std::move(obj));
      e->kids.push_back(std::move(parts[0]));
      return e;
    }
    auto e = make(Expr::Kind::Slice, pos);
    e->kids.push_back(std::move(obj));
    for (auto& p : parts) e->kids.push_back(std::move(p));
    return e;
  }

  ExprPtr parse_primary(int depth) {
    guard(depth);
    const Token& t = peek();
    switch (t.kind) {
      case TK::Name: {
        next();
        auto e = make(Expr::Kind::Literal, t.pos);
        if (t.text == "true" || t.text == "True") e->value = Value(true);
        else if (t.text == "false" || t.text == "False") e->value = Value(false);
        else if (t.text == "none" || t.text == "None") e->value = Value(None{});
        else {
          e->kind = Expr::Kind::Name;
          e->name = t.text;
        }
        return e;
      }
      case TK::Str: {
        auto e = make(Expr::Kind::Literal, t.pos);
        std::string s;
        while (peek().kind == TK::Str) s += next().text;  // adjacent literals concatenate
        e->value = Value(std::move(s));
        return e;
      }
      case TK::Int: {
        auto e = make(Expr::Kind::Literal, t.pos);
        errno = 0;
        const long long v = std::strtoll(t.text.c_str(), nullptr, 10);
        if (errno == ERANGE) fail(t.pos, "integer literal out of range");
        e->value = Value(std::int64_t{v});
        next();
        return e;
      }
      case TK::Float: {
        auto e = make(Expr::Kind::Literal, t.pos);
        e->value = Value(std::strtod(t.text.c_str(), nullptr));
        next();
        return e;
      }
      case TK::Punct:
        if (t.text == "(") {
          next();
          ExprPtr e = parse_expr(depth + 1);
          if (at_punct(",")) {  // a tuple; represented as a list
            auto l = make(Expr::Kind::List, t.pos);
            l->kids.push_back(std::move(e));
            while (at_punct(",")) {
              next();
              if (at_punct(")")) break;
              l->kids.push_back(parse_expr(depth + 1));
            }
            e = measured(std::move(l));
          }
          expect_punct(")");
          return e;
        }
        if (t.text == "[" || t.text == "{") {
          const bool dict = t.text == "{";
          auto e = make(dict ? Expr::Kind::Dict : Expr::Kind::List, next().pos);
          const std::string_view close = dict ? "}" : "]";
          while (!at_punct(close)) {
            e->kids.push_back(parse_expr(depth + 1));
            if (dict) {
              expect_punct(":");
              e->kids.push_back(parse_expr(depth + 1));
            }
            if (!at_punct(",")) break;
            next();
          }
          expect_punct(close);
          return measured(std::move(e));
        }
        break;
      default: break;
    }
    fail(t.pos, fmt::format("unexpected {}", describe(t)));
  }

  const std::string& s_;
  std::vector<Token> t_;
  std::size_t k_ = 0;
};

}  // namespace

std::shared_ptr<const Program> parse_program(std::string_view source) {
  auto p = std::make_shared<Program>();
  p->source.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {  // "\r\n" and lone "\r" read as "\n"
    if (source[i] == '\r') {
      p->source += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      p->source += source[i];
    }
  }
  if (!p->source.empty() && p->source.back() == '\n') p->source.pop_back();  // keep_trailing_newline=False
  Lexer lexer(p->source);
  Parser parser(p->source, lexer.run());
  p->body = parser.parse_template();
  return p;
}

}  // namespace fucina::tokenizer::jinja::detail
