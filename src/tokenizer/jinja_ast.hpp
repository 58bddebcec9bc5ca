#pragma once
// Private AST of the Jinja interpreter (parsed by jinja_parse.cpp, run by jinja_eval.cpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/tokenizer/jinja.hpp"

namespace fucina::tokenizer::jinja::detail {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,  // value
    Name,     // name
    Member,   // kids[0].name
    Index,    // kids[0][kids[1]]
    Slice,    // kids[0][kids[1]:kids[2]:kids[3]] (missing parts are null)
    Call,     // kids[0](kids[1..]); arg_names[i] names kids[i + 1] ("" = positional)
    Filter,   // kids[0] | name(kids[1..])
    Test,     // kids[0] is [not] name(kids[1..])
    Unary,    // op kids[0]: "not", "-", "+"
    Binary,   // kids[0] op kids[1]
    Cond,     // kids[0] if kids[1] else kids[2] (kids[2] may be null)
    List,     // [kids...]
    Dict,     // {kids[0]: kids[1], ...}
  };
  Kind kind = Kind::Literal;
  std::size_t pos = 0;  // byte offset in the (normalized) source
  Value value;
  std::string name;  // identifier / member / filter / test name, or the operator
  bool negate = false;
  int height = 1;  // of the subtree; bounded so evaluation cannot exhaust the stack
  std::vector<ExprPtr> kids;
  std::vector<std::string> arg_names;
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Stmt {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Break, Continue };
  Kind kind = Kind::Text;
  std::size_t pos = 0;
  std::string text;                  // Text
  ExprPtr expr;                      // Output, Set value, For iterable
  std::vector<ExprPtr> conds;        // If: one per branch (elif included)
  std::vector<Body> bodies;          // If: one per cond, plus a trailing else; For: body, else
  std::vector<std::string> targets;  // For loop variables; Set: name [, attribute]
  ExprPtr filter;                    // For: `if` clause
};

struct Program {
  std::string source;  // normalized source, for line:col
  Body body;
};

// Normalizes newlines and parses; throws as Template::parse documents.
std::shared_ptr<const Program> parse_program(std::string_view source);

// json.dumps(v, ensure_ascii=False, indent=indent or None), as HF's tojson filter.
void to_json(std::string& out, const Value& v, int indent);
std::string type_name(const Value& v);
bool is_ws(char c);
// Python str.strip/lstrip/rstrip; `chars` is a string or none (= whitespace).
std::string strip(const std::string& s, bool left, bool right, const Value& chars);
std::vector<std::string> utf8_chars(const std::string& s);  // one string per code point
std::string map_ascii(std::string s, int (*f)(int));
std::string capitalize(const std::string& s);
std::string title(const std::string& s);
std::string replace(const std::string& s, const std::string& from, const std::string& to, std::int64_t count);

// "line L:C" of a byte offset.
std::string where(const std::string& source, std::size_t pos);

}  // namespace fucina::tokenizer::jinja::detail
