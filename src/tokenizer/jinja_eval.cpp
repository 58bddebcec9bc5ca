// Jinja evaluator and built-ins (Note [Jinja subset] in jinja.hpp).
#include <algorithm>
#include <cmath>
#include <cerrno>
#include <climits>
#include <ctime>
#include <optional>

#include "jinja_ast.hpp"

namespace fucina::tokenizer::jinja {

namespace detail {
namespace {

constexpr std::size_t max_output = std::size_t{1} << 28;
constexpr std::int64_t max_steps = 50'000'000;
constexpr std::int64_t max_range = 1'000'000;

class Scope {
 public:
  explicit Scope(const Scope* parent, const Object* globals = nullptr) : parent_(parent), globals_(globals) {}
  bool lookup(const std::string& name, Value* out) const {
    for (auto it = vars_.rbegin(); it != vars_.rend(); ++it)
      if (it->first == name) return *out = it->second, true;
    if (globals_)
      for (const auto& [k, v] : *globals_)
        if (k == name) return *out = v, true;
    return parent_ && parent_->lookup(name, out);
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars_)
      if (k == name) return void(old = std::move(v));
    vars_.emplace_back(name, std::move(v));
  }

 private:
  const Scope* parent_;
  const Object* globals_;
  Object vars_;
};

enum class Flow { Normal, Break, Continue };

class Evaluator {
 public:
  Evaluator(const Program& p, AccessProbe* probe) : p_(p), probe_(probe) {}

  Flow exec(const Body& body, Scope& scope, std::string& out) {
    for (const Stmt& s : body) {
      if (++steps_ > max_steps) fail(ErrorCode::InvalidArgument, s.pos, "template exceeds the evaluation budget");
      if (out.size() > max_output) fail(ErrorCode::InvalidArgument, s.pos, "template output too large");
      switch (s.kind) {
        case Stmt::Kind::Text: out += s.text; break;
        case Stmt::Kind::Output: {
          const Value v = eval(*s.expr, scope);
          if (v.is_array() || v.is_object()) watch_deep(v);
          output(out, v, 0);
          break;
        }
        case Stmt::Kind::If: {
          std::size_t i = 0;
          while (i < s.conds.size() && !eval(*s.conds[i], scope).truthy()) ++i;
          if (i < s.bodies.size()) {
            const Flow f = exec(s.bodies[i], scope, out);
            if (f != Flow::Normal) return f;
          }
          break;
        }
        case Stmt::Kind::For: exec_for(s, scope, out); break;
        case Stmt::Kind::Set: assign(s, eval(*s.expr, scope), scope); break;
        case Stmt::Kind::SetBlock: {
          std::string captured;
          exec(s.bodies[0], scope, captured);
          assign(s, Value(std::move(captured)), scope);
          break;
        }
        case Stmt::Kind::Break: return Flow::Break;
        case Stmt::Kind::Continue: return Flow::Continue;
      }
    }
    return Flow::Normal;
  }

 private:
  [[noreturn]] void fail(ErrorCode code, std::size_t pos, std::string_view msg) const {
    fucina::fail(code, fmt::format("[jinja] {}: {}", where(p_.source, pos), msg));
  }

  // What llama.cpp prints for {{ v }}: none -> "", a list -> its items back to back, a dict -> "".
  static void output(std::string& out, const Value& v, int depth) {
    if (v.is_none() || v.is_object() || depth > 64) return;
    if (!v.is_array()) return void(out += v.to_string());
    for (const Value& x : v.as_array()) output(out, x, depth + 1);
  }

  void assign(const Stmt& s, Value v, Scope& scope) {
    if (s.targets.size() == 1) return scope.set(s.targets[0], std::move(v));
    Value ns;
    if (!scope.lookup(s.targets[0], &ns) || !ns.is_object())
      fail(ErrorCode::InvalidArgument, s.pos, fmt::format("cannot set attribute of non-namespace '{}'", s.targets[0]));
    for (auto& [k, old] : ns.as_object())
      if (k == s.targets[1]) return void(old = std::move(v));
    ns.as_object().emplace_back(s.targets[1], std::move(v));
  }

  void watch(const Value& obj, std::string_view key) {
    if (probe_ && obj.identity() && obj.identity() == probe_->object && key == probe_->key) probe_->hit = true;
  }
  void watch_deep(const Value& v, int depth = 0) {
    if (!probe_ || depth > 64) return;
    if (v.identity() && v.identity() == probe_->object) probe_->hit = true;
    if (v.is_array())
      for (const auto& x : v.as_array()) watch_deep(x, depth + 1);
    if (v.is_object())
      for (const auto& [k, x] : v.as_object()) watch_deep(x, depth + 1);
  }

  std::vector<Value> iterate(const Value& v, std::size_t pos) const {
    if (v.is_undefined()) return {};
    if (v.is_array()) return v.as_array();
    if (v.is_object()) {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.as_object()) keys.emplace_back(k);
      return keys;
    }
    if (v.is_string()) {
      std::vector<Value> chars;
      for (auto& c : utf8_chars(v.as_string())) chars.emplace_back(std::move(c));
      return chars;
    }
    fail(ErrorCode::InvalidArgument, pos, fmt::format("cannot iterate over {}", type_name(v)));
  }

  void bind(const Stmt& s, const Value& item, Scope& scope) {
    if (s.targets.size() == 1) return scope.set(s.targets[0], item);
    if (!item.is_array() || item.as_array().size() != s.targets.size())
      fail(ErrorCode::InvalidArgument, s.pos, fmt::format("cannot unpack {} into {} loop variables", type_name(item), s.targets.size()));
    for (std::size_t i = 0; i < s.targets.size(); ++i) scope.set(s.targets[i], item.as_array()[i]);
  }

  void exec_for(const Stmt& s, Scope& scope, std::string& out) {
    const Value seq = eval(*s.expr, scope);
    if (seq.is_object() && probe_ && seq.identity() == probe_->object) watch_deep(seq);
    std::vector<Value> items = iterate(seq, s.expr->pos);
    if (s.filter) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        Scope inner(&scope);
        bind(s, item, inner);
        if (eval(*s.filter, inner).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto n = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < n; ++i) {
      Scope inner(&scope);
      bind(s, items[static_cast<std::size_t>(i)], inner);
      inner.set("loop", Value(Object{{"index", Value(i + 1)}, {"index0", Value(i)}, {"revindex", Value(n - i)},
                                     {"revindex0", Value(n - i - 1)}, {"first", Value(i == 0)},
                                     {"last", Value(i == n - 1)}, {"length", Value(n)},
                                     {"previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value()},
                                     {"nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value()}}));
      if (exec(s.bodies[0], inner, out) == Flow::Break) break;
    }
    if (n == 0 && s.bodies.size() > 1) {
      Scope inner(&scope);
      exec(s.bodies[1], inner, out);
    }
  }

  std::int64_t to_index(const Value& v, std::size_t pos) const {
    if (!v.is_int()) fail(ErrorCode::InvalidArgument, pos, fmt::format("index must be an int, got {}", type_name(v)));
    return v.as_int();
  }

  Value subscript(const Value& obj, const Value& key, std::size_t pos) {
    if (obj.is_object()) {
      if (!key.is_string()) return {};
      watch(obj, key.as_string());
      return obj.get(key.as_string());
    }
    if (obj.is_array() || obj.is_string()) {
      std::int64_t i = to_index(key, pos);
      const auto n = static_cast<std::int64_t>(obj.is_array() ? obj.as_array().size() : obj.as_string().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return {};
      if (obj.is_array()) return obj.as_array()[static_cast<std::size_t>(i)];
      return Value(std::string(1, obj.as_string()[static_cast<std::size_t>(i)]));
    }
    fail(ErrorCode::InvalidArgument, pos, fmt::format("cannot subscript {} with {}", type_name(obj), key.repr()));
  }

  Value slice(const Expr& e, Scope& scope) {
    const Value obj = eval(*e.kids[0], scope);
    if (!obj.is_array() && !obj.is_string()) fail(ErrorCode::InvalidArgument, e.pos, fmt::format("cannot slice {}", type_name(obj)));
    const auto n = static_cast<std::int64_t>(obj.is_array() ? obj.as_array().size() : obj.as_string().size());
    auto part = [&](int k) -> std::optional<std::int64_t> {
      if (!e.kids[static_cast<std::size_t>(k)]) return std::nullopt;
      const Value v = eval(*e.kids[static_cast<std::size_t>(k)], scope);
      if (v.is_none()) return std::nullopt;
      return to_index(v, e.pos);
    };
    const std::int64_t step = part(3).value_or(1);
    if (step == 0) fail(ErrorCode::InvalidArgument, e.pos, "slice step cannot be zero");
    auto clamp = [&](std::optional<std::int64_t> v, std::int64_t dflt) {
      if (!v) return dflt;
      std::int64_t x = *v < 0 ? std::max<std::int64_t>(*v, -n) + n : *v;  // Python's slice.indices
      return step > 0 ? std::min(x, n) : std::min(x, n - 1);
    };
    const std::int64_t start = clamp(part(1), step > 0 ? 0 : n - 1), stop = clamp(part(2), step > 0 ? n : -1);
    Array arr;
    std::string str;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (obj.is_array()) arr.push_back(obj.as_array()[static_cast<std::size_t>(i)]);
      else str += obj.as_string()[static_cast<std::size_t>(i)];
    }
    return obj.is_array() ? Value(std::move(arr)) : Value(std::move(str));
  }

  struct Args {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
    const Value& at(std::size_t i, std::string_view name, const Value& dflt) const {
      for (const auto& [k, v] : kw)
        if (k == name) return v;
      return i < pos.size() ? pos[i] : dflt;
    }
  };
  Args eval_args(const Expr& e, Scope& scope, std::size_t first) {
    Args a;
    for (std::size_t i = first; i < e.kids.size(); ++i) {
      Value v = eval(*e.kids[i], scope);
      if (e.arg_names[i].empty()) a.pos.push_back(std::move(v));
      else a.kw.emplace_back(e.arg_names[i], std::move(v));
    }
    return a;
  }
  const std::string& need_string(const Value& v, std::size_t pos, std::string_view what) const {
    if (!v.is_string()) fail(ErrorCode::InvalidArgument, pos, fmt::format("{} expects a string, got {}", what, type_name(v)));
    return v.as_string();
  }

  Value call(const Expr& e, Scope& scope);
  Value method(const Value& obj, const std::string& name, const Args& a, std::size_t pos);
  Value filter(const Expr& e, Scope& scope);
  bool test(const Expr& e, Scope& scope);
  Value binary(const Expr& e, Scope& scope);
  Value binary_values(const Expr& e, const Value& a, const Value& b);
  Value arith(const std::string& op, const Value& a, const Value& b, std::size_t pos) const;

  Value eval(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: {
        Value v;
        scope.lookup(e.name, &v);
        return v;
      }
      case Expr::Kind::Member: {
        const Value obj = eval(*e.kids[0], scope);
        if (obj.is_undefined() || obj.is_none())
          fail(ErrorCode::InvalidArgument, e.pos, fmt::format("'{}' has no attribute '{}'", type_name(obj), e.name));
        if (!obj.is_object()) return {};
        watch(obj, e.name);
        return obj.get(e.name);
      }
      case Expr::Kind::Index: {
        const Value obj = eval(*e.kids[0], scope);
        return subscript(obj, eval(*e.kids[1], scope), e.pos);
      }
      case Expr::Kind::Slice: return slice(e, scope);
      case Expr::Kind::Call: return call(e, scope);
      case Expr::Kind::Filter: return filter(e, scope);
      case Expr::Kind::Test: return Value(test(e, scope) != e.negate);
      case Expr::Kind::Unary: {
        const Value v = eval(*e.kids[0], scope);
        if (e.name == "not") return Value(!v.truthy());
        if (!v.is_number() && !v.is_bool()) fail(ErrorCode::InvalidArgument, e.pos, fmt::format("bad operand for unary {}: {}", e.name, type_name(v)));
        if (e.name == "+") return v.is_bool() ? Value(std::int64_t{v.as_bool()}) : v;
        return arith("-", Value(0), v, e.pos);
      }
      case Expr::Kind::Binary: return binary(e, scope);
      case Expr::Kind::Cond:
        if (eval(*e.kids[1], scope).truthy()) return eval(*e.kids[0], scope);
        return e.kids[2] ? eval(*e.kids[2], scope) : Value();
      case Expr::Kind::List: {
        Array a;
        for (const auto& k : e.kids) a.push_back(eval(*k, scope));
        return Value(std::move(a));
      }
      case Expr::Kind::Dict: {
        Object o;
        for (std::size_t i = 0; i + 1 < e.kids.size(); i += 2) {
          const Value k = eval(*e.kids[i], scope);
          const std::string key = need_string(k, e.kids[i]->pos, "dict key");
          Value v = eval(*e.kids[i + 1], scope);
          auto it = std::find_if(o.begin(), o.end(), [&](const auto& kv) { return kv.first == key; });
          if (it != o.end()) it->second = std::move(v);
          else o.emplace_back(key, std::move(v));
        }
        return Value(std::move(o));
      }
    }
    FUCINA_ASSERT(false);
    return {};
  }

  const Program& p_;
  AccessProbe* probe_;
  std::int64_t steps_ = 0;
};

Value Evaluator::call(const Expr& e, Scope& scope) {
  const Expr& callee = *e.kids[0];
  if (callee.kind == Expr::Kind::Member) {
    const Value obj = eval(*callee.kids[0], scope);
    return method(obj, callee.name, eval_args(e, scope, 1), e.pos);
  }
  if (callee.kind != Expr::Kind::Name) fail(ErrorCode::Unsupported, e.pos, "unsupported call of a non-name expression");
  const std::string& fn = callee.name;
  const Args a = eval_args(e, scope, 1);
  if (fn == "raise_exception") {
    const Value msg = a.at(0, "message", Value());
    fail(ErrorCode::InvalidArgument, e.pos, fmt::format("raise_exception: {}", msg.to_string()));
  }
  if (fn == "namespace" || fn == "dict") {
    Object o;
    for (const auto& [k, v] : a.kw) o.emplace_back(k, v);
    return Value(std::move(o));
  }
  if (fn == "range") {
    std::int64_t start = 0, stop = 0, step = 1;
    for (const auto& v : a.pos)
      if (!v.is_int()) fail(ErrorCode::InvalidArgument, e.pos, "range() expects ints");
    if (a.pos.size() == 1) stop = a.pos[0].as_int();
    else if (a.pos.size() == 2 || a.pos.size() == 3) {
      start = a.pos[0].as_int();
      stop = a.pos[1].as_int();
      if (a.pos.size() == 3) step = a.pos[2].as_int();
    } else fail(ErrorCode::InvalidArgument, e.pos, "range() takes 1 to 3 arguments");
    if (step == 0) fail(ErrorCode::InvalidArgument, e.pos, "range() step cannot be zero");
    Array out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (static_cast<std::int64_t>(out.size()) >= max_range) fail(ErrorCode::InvalidArgument, e.pos, "range() too long");
      out.emplace_back(i);
      if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
    }
    return Value(std::move(out));
  }
  if (fn == "strftime_now") {
    const std::string& f = need_string(a.at(0, "format", Value()), e.pos, "strftime_now");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const std::size_t n = std::strftime(buf, sizeof buf, f.c_str(), &tm);
    return Value(std::string(buf, n));
  }
  fail(ErrorCode::Unsupported, e.pos, fmt::format("unsupported function '{}'", fn));
}

Value Evaluator::method(const Value& obj, const std::string& name, const Args& a, std::size_t pos) {
  const Value none = Value(None{});
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (name == "strip" || name == "lstrip" || name == "rstrip")
      return Value(strip(s, name != "rstrip", name != "lstrip", a.at(0, "chars", none)));
    if (name == "upper") return Value(map_ascii(s, [](int c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }));
    if (name == "lower") return Value(map_ascii(s, [](int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }));
    if (name == "title") return Value(title(s));
    if (name == "capitalize") return Value(capitalize(s));
    if (name == "startswith" || name == "endswith") {
      const Value arg = a.at(0, "prefix", none);
      std::vector<Value> options = arg.is_array() ? arg.as_array() : std::vector<Value>{arg};
      for (const Value& o : options) {
        const std::string& p = need_string(o, pos, name);
        const bool hit = p.size() <= s.size() && (name == "startswith" ? s.compare(0, p.size(), p) == 0
                                                                       : s.compare(s.size() - p.size(), p.size(), p) == 0);
        if (hit) return Value(true);
      }
      return Value(false);
    }
    if (name == "replace") {
      const Value count = a.at(2, "count", Value(-1));
      return Value(replace(s, need_string(a.at(0, "old", none), pos, name), need_string(a.at(1, "new", none), pos, name),
                           count.is_int() ? count.as_int() : -1));
    }
    if (name == "find") {
      const std::size_t i = s.find(need_string(a.at(0, "sub", none), pos, name));
      return Value(i == std::string::npos ? std::int64_t{-1} : static_cast<std::int64_t>(i));
    }
    if (name == "split") {
      const Value sep = a.at(0, "sep", none);
      const Value maxv = a.at(1, "maxsplit", Value(-1));
      std::int64_t max_split = maxv.is_int() ? maxv.as_int() : -1;
      Array out;
      if (sep.is_none() || sep.is_undefined()) {  // runs of whitespace, no empty parts
        std::size_t i = 0;
        while (i < s.size()) {
          while (i < s.size() && is_ws(s[i])) ++i;
          if (i >= s.size()) break;
          if (max_split == 0) {
            out.emplace_back(strip(s.substr(i), false, true, none));
            break;
          }
          std::size_t j = i;
          while (j < s.size() && !is_ws(s[j])) ++j;
          out.emplace_back(s.substr(i, j - i));
          --max_split;
          i = j;
        }
        return Value(std::move(out));
      }
      const std::string& d = need_string(sep, pos, "split");
      if (d.empty()) fail(ErrorCode::InvalidArgument, pos, "split(): empty separator");
      std::size_t i = 0;
      for (std::size_t j; max_split-- != 0 && (j = s.find(d, i)) != std::string::npos; i = j + d.size())
        out.emplace_back(s.substr(i, j - i));
      out.emplace_back(s.substr(i));
      return Value(std::move(out));
    }
  } else if (obj.is_object()) {
    if (name == "items" || name == "keys" || name == "values") {
      watch_deep(obj);
      Array out;
      for (const auto& [k, v] : obj.as_object()) {
        if (name == "items") out.emplace_back(Array{Value(k), v});
        else out.push_back(name == "keys" ? Value(k) : v);
      }
      return Value(std::move(out));
    }
    if (name == "get") {
      const Value key = a.at(0, "key", none);
      const std::string& k = need_string(key, pos, "get");
      watch(obj, k);
      const Value v = obj.get(k);
      return v.is_undefined() ? a.at(1, "default", none) : v;
    }
  } else if (obj.is_array()) {
    if (name == "append") {
      if (a.pos.size() != 1) fail(ErrorCode::InvalidArgument, pos, "append() takes one argument");
      obj.as_array().push_back(a.pos[0]);
      return none;
    }
  } else if (obj.is_undefined() || obj.is_none()) {
    fail(ErrorCode::InvalidArgument, pos, fmt::format("'{}' has no method '{}'", type_name(obj), name));
  }
  fail(ErrorCode::Unsupported, pos, fmt::format("unsupported method '{}' on {}", name, type_name(obj)));
}

Value Evaluator::filter(const Expr& e, Scope& scope) {
  const std::string& f = e.name;
  const Value none = Value(None{});
  const Value in = eval(*e.kids[0], scope);
  const Args a = eval_args(e, scope, 1);
  if (f == "default" || f == "d") {
    const bool boolean = a.at(1, "boolean", Value(false)).truthy();
    return (in.is_undefined() || (boolean && !in.truthy())) ? a.at(0, "default_value", Value("")) : in;
  }
  if (f == "tojson") {
    watch_deep(in);
    const Value ind = a.at(0, "indent", none);
    std::string out;
    to_json(out, in, ind.is_int() ? static_cast<int>(std::clamp<std::int64_t>(ind.as_int(), 0, 64)) : -1);
    return Value(std::move(out));
  }
  if (f == "string") {
    watch_deep(in);
    return Value(in.to_string());
  }
  if (f == "safe") return in;
  if (f == "length" || f == "count") {
    if (in.is_string()) return Value(static_cast<std::int64_t>(utf8_chars(in.as_string()).size()));
    if (in.is_array()) return Value(static_cast<std::int64_t>(in.as_array().size()));
    if (in.is_object()) return Value(static_cast<std::int64_t>(in.as_object().size()));
    if (in.is_undefined()) return Value(0);
    fail(ErrorCode::InvalidArgument, e.pos, fmt::format("{} has no length", type_name(in)));
  }
  if (f == "int") {
    if (in.is_int()) return in;
    if (in.is_float()) {
      const double d = in.as_number();
      if (!(d > -9.2e18 && d < 9.2e18)) fail(ErrorCode::InvalidArgument, e.pos, "int(): out of range");
      return Value(static_cast<std::int64_t>(d));
    }
    if (in.is_bool()) return Value(std::int64_t{in.as_bool()});
    if (in.is_string()) {
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(in.as_string().c_str(), &end, 10);
      if (errno == 0 && end && *end == '\0' && !in.as_string().empty()) return Value(std::int64_t{v});
    }
    return a.at(0, "default", Value(0));
  }
  if (f == "float") {
    if (in.is_number()) return Value(in.as_number());
    if (in.is_string()) {
      char* end = nullptr;
      const double v = std::strtod(in.as_string().c_str(), &end);
      if (end && *end == '\0' && !in.as_string().empty()) return Value(v);
    }
    return a.at(0, "default", Value(0.0));
  }
  if (f == "list" || f == "first" || f == "last" || f == "reverse" || f == "join" || f == "items") {
    if (f == "items") {
      if (!in.is_object()) fail(ErrorCode::InvalidArgument, e.pos, fmt::format("items expects a dict, got {}", type_name(in)));
      return method(in, "items", {}, e.pos);
    }
    if (f == "reverse" && in.is_string()) {
      auto chars = utf8_chars(in.as_string());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value(std::move(out));
    }
    std::vector<Value> items = iterate(in, e.pos);
    if (f == "first") return items.empty() ? Value() : items.front();
    if (f == "last") return items.empty() ? Value() : items.back();
    if (f == "reverse") std::reverse(items.begin(), items.end());
    if (f == "join") {
      const Value sep = a.at(0, "d", Value(""));
      std::string out;
      for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep.to_string() : "") + items[i].to_string();
      return Value(std::move(out));
    }
    return Value(Array(std::move(items)));
  }
  if (f == "trim" || f == "upper" || f == "lower" || f == "capitalize" || f == "title" || f == "replace") {
    if (in.is_undefined()) return Value("");
    const Value s = in.is_string() ? in : Value(in.to_string());
    if (f == "trim") return method(s, "strip", Args{{a.at(0, "chars", none)}, {}}, e.pos);
    return method(s, f, a, e.pos);
  }
  fail(ErrorCode::Unsupported, e.pos, fmt::format("unsupported filter '{}'", f));
}

bool Evaluator::test(const Expr& e, Scope& scope) {
  const std::string& t = e.name;
  const Value v = eval(*e.kids[0], scope);
  const Args a = eval_args(e, scope, 1);
  if (t == "defined") return !v.is_undefined();
  if (t == "undefined") return v.is_undefined();
  if (t == "none") return v.is_none();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_int();
  if (t == "float") return v.is_float();
  if (t == "boolean") return v.is_bool();
  if (t == "true") return v.is_bool() && v.as_bool();
  if (t == "false") return v.is_bool() && !v.as_bool();
  if (t == "mapping") return v.is_object();
  if (t == "sequence" || t == "iterable") return v.is_array() || v.is_string() || v.is_object();
  if (t == "even" || t == "odd") {
    if (!v.is_int()) fail(ErrorCode::InvalidArgument, e.pos, fmt::format("'{}' test expects an int", t));
    return (v.as_int() % 2 == 0) == (t == "even");
  }
  if (t == "divisibleby") {
    const Value d = a.at(0, "num", Value());
    if (!v.is_int() || !d.is_int() || d.as_int() == 0) fail(ErrorCode::InvalidArgument, e.pos, "divisibleby expects nonzero ints");
    return d.as_int() == -1 || v.as_int() % d.as_int() == 0;
  }
  if (t == "eq" || t == "equalto" || t == "==") return equals(v, a.at(0, "other", Value()));
  if (t == "ne" || t == "!=") return !equals(v, a.at(0, "other", Value()));
  fail(ErrorCode::Unsupported, e.pos, fmt::format("unsupported test '{}'", t));
}

Value Evaluator::arith(const std::string& op, const Value& a, const Value& b, std::size_t pos) const {
  auto num = [](const Value& v) { return v.is_bool() ? Value(std::int64_t{v.as_bool()}) : v; };
  const Value x = num(a), y = num(b);
  if (!x.is_number() || !y.is_number())
    fail(ErrorCode::InvalidArgument, pos, fmt::format("unsupported operand types for {}: {} and {}", op, type_name(a), type_name(b)));
  if (x.is_int() && y.is_int() && op != "/" && op != "**") {
    const std::int64_t p = x.as_int(), q = y.as_int();
    std::int64_t r = 0;
    bool overflow = false;
    if (op == "+") overflow = __builtin_add_overflow(p, q, &r);
    else if (op == "-") overflow = __builtin_sub_overflow(p, q, &r);
    else if (op == "*") overflow = __builtin_mul_overflow(p, q, &r);
    else {
      if (q == 0) fail(ErrorCode::InvalidArgument, pos, "integer division or modulo by zero");
      if (p == INT64_MIN && q == -1) overflow = true;
      else if (op == "//") r = p / q - ((p % q != 0) && ((p < 0) != (q < 0)));  // floor, like Python
      else r = p % q + (((p % q != 0) && ((p < 0) != (q < 0))) ? q : 0);
    }
    if (overflow) fail(ErrorCode::InvalidArgument, pos, fmt::format("integer overflow in {}", op));
    return Value(r);
  }
  const double p = x.as_number(), q = y.as_number();
  if (op == "+") return Value(p + q);
  if (op == "-") return Value(p - q);
  if (op == "*") return Value(p * q);
  if (op == "**") {
    const double r = std::pow(p, q);
    if (x.is_int() && y.is_int() && q >= 0) {
      if (!(std::fabs(r) < 9.2e18)) fail(ErrorCode::InvalidArgument, pos, "integer overflow in **");
      std::int64_t out = 1;
      for (std::int64_t i = 0; i < y.as_int(); ++i) out *= x.as_int();
      return Value(out);
    }
    return Value(r);
  }
  if (q == 0) fail(ErrorCode::InvalidArgument, pos, "division by zero");
  if (op == "/") return Value(p / q);
  if (op == "//") return Value(std::floor(p / q));
  const double m = std::fmod(p, q);
  return Value(m != 0 && ((m < 0) != (q < 0)) ? m + q : m);
}

Value Evaluator::binary(const Expr& e, Scope& scope) {
  const Value a = eval(*e.kids[0], scope);
  if (e.name == "and") return a.truthy() ? eval(*e.kids[1], scope) : a;
  if (e.name == "or") return a.truthy() ? a : eval(*e.kids[1], scope);
  return binary_values(e, a, eval(*e.kids[1], scope));
}

Value Evaluator::binary_values(const Expr& e, const Value& a, const Value& b) {
  const std::string& op = e.name;
  if (op == "==") return Value(equals(a, b));
  if (op == "!=") return Value(!equals(a, b));
  if (op == "~") return Value((a.is_none() ? "" : a.to_string()) + (b.is_none() ? "" : b.to_string()));
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) found = b.as_string().find(need_string(a, e.pos, "'in <string>'")) != std::string::npos;
    else if (b.is_array()) found = std::any_of(b.as_array().begin(), b.as_array().end(), [&](const Value& x) { return equals(x, a); });
    else if (b.is_object()) found = a.is_string() && !b.get(a.as_string()).is_undefined();
    else if (!b.is_undefined()) fail(ErrorCode::InvalidArgument, e.pos, fmt::format("'in' needs a container, got {}", type_name(b)));
    return Value(found != (op == "not in"));
  }
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    int c = 0;
    if (a.is_string() && b.is_string()) c = a.as_string().compare(b.as_string());
    else if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
      const double x = a.is_bool() ? a.as_bool() : a.as_number(), y = b.is_bool() ? b.as_bool() : b.as_number();
      c = x < y ? -1 : (x > y ? 1 : 0);
    } else {
      fail(ErrorCode::InvalidArgument, e.pos, fmt::format("cannot compare {} {} {}", type_name(a), op, type_name(b)));
    }
    return Value(op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0);
  }
  if (op == "+" && a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
  if (op == "+" && a.is_array() && b.is_array()) {
    Array out = a.as_array();
    out.insert(out.end(), b.as_array().begin(), b.as_array().end());
    return Value(std::move(out));
  }
  if (op == "*" && a.is_int() && (b.is_string() || b.is_array())) return binary_values(e, b, a);
  if (op == "*" && (a.is_string() || a.is_array()) && b.is_int()) {
    const std::size_t unit = a.is_string() ? a.as_string().size() : a.as_array().size();
    const std::int64_t times = std::max<std::int64_t>(b.as_int(), 0);
    if (unit != 0 && static_cast<double>(unit) * static_cast<double>(times) > static_cast<double>(max_output))
      fail(ErrorCode::InvalidArgument, e.pos, "repetition result too large");
    if (a.is_string()) {
      std::string out;
      for (std::int64_t i = 0; i < times; ++i) out += a.as_string();
      return Value(std::move(out));
    }
    Array out;
    for (std::int64_t i = 0; i < times; ++i) out.insert(out.end(), a.as_array().begin(), a.as_array().end());
    return Value(std::move(out));
  }
  return arith(op, a, b, e.pos);
}

}  // namespace
}  // namespace detail

Template Template::parse(std::string_view source) {
  Template t;
  t.program_ = detail::parse_program(source);
  return t;
}

std::string Template::render(const Object& globals, AccessProbe* probe) const {
  FUCINA_CHECK(program_ != nullptr, InvalidArgument, "[jinja] render of an empty Template");
  detail::Scope root(nullptr, &globals);
  detail::Evaluator ev(*program_, probe);
  std::string out;
  ev.exec(program_->body, root, out);
  return out;
}

}  // namespace fucina::tokenizer::jinja
