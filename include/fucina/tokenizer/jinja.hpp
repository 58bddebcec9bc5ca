#pragma once
// A small Jinja interpreter (lexer -> AST -> evaluator) for chat templates.
//
// Note [Jinja subset]
// Whitespace follows the configuration HF transformers and llama.cpp use for chat templates:
// trim_blocks (one newline after `%}`/`#}` is dropped), lstrip_blocks (spaces/tabs before a
// `{%`/`{#` at the start of a line are dropped), `-` on either side of a tag strips all
// whitespace on that side, "\r\n" is read as "\n" and one trailing newline of the template is
// dropped. Supported: {{ }}, {# #}, if/elif/else, for (tuple targets, `else`, `if` filter,
// loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem), set (also
// `ns.attr` and {% set x %}..{% endset %}), break/continue; literals (str, int, float,
// true/false/none in either case, lists, dicts); . and [] access, slices, calls with keyword
// arguments; or/and/not, ==/!=/</<=/>/>=, in/not in, + - * / // % ~, `x if c else y`;
// filters (trim upper lower capitalize title length count default/d tojson string int float
// first last join list reverse replace safe items); tests (defined undefined none string
// number integer float boolean mapping iterable sequence true false even odd eq); globals
// raise_exception, range, namespace, strftime_now; str/dict/list methods (strip, lstrip,
// rstrip, startswith, endswith, split, upper, lower, title, capitalize, replace, find, items,
// keys, values, get, append). Anything else throws Error(Unsupported) naming the construct
// and its line:col; malformed templates and runtime type errors throw InvalidArgument with
// line:col; raise_exception(msg) throws InvalidArgument carrying msg.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace fucina::tokenizer::jinja {

class Value;
using Array = std::vector<Value>;
// Insertion-ordered, like a Python dict (templates iterate messages' keys in order).
using Object = std::vector<std::pair<std::string, Value>>;

struct Undefined {};
struct None {};

// A Jinja value. Arrays and objects are shared (reference semantics, as in Python), which is
// what lets `ns.x = ...` and `list.append()` mutate them.
class Value {
 public:
  using Storage = std::variant<Undefined, None, bool, std::int64_t, double, std::string,
                               std::shared_ptr<Array>, std::shared_ptr<Object>>;

  Value() = default;
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(std::int64_t{i}) {}
  Value(std::int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : v_(std::make_shared<Object>(std::move(o))) {}

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<std::int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(v_); }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(v_); }

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  double as_number() const { return is_int() ? static_cast<double>(as_int()) : std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  Array& as_array() const { return *std::get<std::shared_ptr<Array>>(v_); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(v_); }
  // Identity of an array/object (nullptr otherwise), for "is this the same message" checks.
  const void* identity() const;

  bool truthy() const;  // Python truthiness; undefined is false
  // Python str(): None -> "None", True -> "True", lists/dicts as their repr; undefined -> "".
  std::string to_string() const;
  std::string repr() const;  // Python repr()
  // Looks a key up in an object; undefined when absent or not an object.
  Value get(std::string_view key) const;

  const Storage& storage() const { return v_; }

 private:
  Storage v_;
};

// Python-style equality (1 == 1.0, 'a' != 1, containers element-wise).
bool equals(const Value& a, const Value& b);

// Observer the chat layer uses to learn whether a template reads a message's content.
struct AccessProbe {
  const void* object = nullptr;  // identity() of the watched object
  std::string key;               // the watched key
  bool hit = false;              // set when object[key] (or the whole object) was read
};

namespace detail {
struct Program;
}

class Template {
 public:
  // Parses `source`; throws Error(InvalidArgument) with line:col for malformed input and
  // Error(Unsupported) for constructs outside Note [Jinja subset].
  static Template parse(std::string_view source);
  // Renders with `globals` as the top-level variables.
  std::string render(const Object& globals, AccessProbe* probe = nullptr) const;

 private:
  std::shared_ptr<const detail::Program> program_;
};

}  // namespace fucina::tokenizer::jinja
