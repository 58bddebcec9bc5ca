// Jinja values: truthiness, str()/repr(), JSON, equality, and string helpers.
#include <cerrno>
#include <cmath>

#include "jinja_ast.hpp"

namespace fucina::tokenizer::jinja {

const void* Value::identity() const {
  if (is_array()) return std::get<std::shared_ptr<Array>>(v_).get();
  if (is_object()) return std::get<std::shared_ptr<Object>>(v_).get();
  return nullptr;
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return as_number() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_array()) return !as_array().empty();
  return !as_object().empty();
}

Value Value::get(std::string_view key) const {
  if (!is_object()) return {};
  for (const auto& [k, v] : as_object())
    if (k == key) return v;
  return {};
}

namespace {

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quote_repr(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == '\\' || c == q) out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out + q;
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
}

// json.dumps(v, ensure_ascii=False, indent=indent) as HF's tojson filter calls it.
void json_dump(std::string& out, const Value& v, int indent, int level) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent * lvl), ' ');
  };
  const std::string_view item_sep = indent < 0 ? ", " : ",";
  if (v.is_undefined() || v.is_none()) out += "null";
  else if (v.is_bool()) out += v.as_bool() ? "true" : "false";
  else if (v.is_int()) out += std::to_string(v.as_int());
  else if (v.is_float()) out += std::isfinite(v.as_number()) ? float_repr(v.as_number()) : "null";
  else if (v.is_string()) json_string(out, v.as_string());
  else if (v.is_array()) {
    const Array& a = v.as_array();
    out += '[';
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (i) out += item_sep;
      newline(level + 1);
      json_dump(out, a[i], indent, level + 1);
    }
    if (!a.empty()) newline(level);
    out += ']';
  } else {
    const Object& o = v.as_object();
    out += '{';
    for (std::size_t i = 0; i < o.size(); ++i) {
      if (i) out += item_sep;
      newline(level + 1);
      json_string(out, o[i].first);
      out += ": ";
      json_dump(out, o[i].second, indent, level + 1);
    }
    if (!o.empty()) newline(level);
    out += '}';
  }
}

}  // namespace

std::string Value::repr() const {
  if (is_string()) return quote_repr(as_string());
  if (is_array()) {
    std::string s = "[";
    for (std::size_t i = 0; i < as_array().size(); ++i) s += (i ? ", " : "") + as_array()[i].repr();
    return s + "]";
  }
  if (is_object()) {
    std::string s = "{";
    bool first = true;
    for (const auto& [k, v] : as_object()) {
      s += (first ? "" : ", ") + quote_repr(k) + ": " + v.repr();
      first = false;
    }
    return s + "}";
  }
  return to_string();
}

std::string Value::to_string() const {
  if (is_undefined()) return "";
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return float_repr(as_number());
  if (is_string()) return as_string();
  return repr();
}

bool equals(const Value& a, const Value& b) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
    if (a.is_bool() != b.is_bool()) {  // Python: True == 1, but Jinja templates compare bools to bools
      const double x = a.is_bool() ? a.as_bool() : a.as_number(), y = b.is_bool() ? b.as_bool() : b.as_number();
      return x == y;
    }
    if (a.is_bool()) return a.as_bool() == b.as_bool();
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_number() == b.as_number();
  }
  if (a.storage().index() != b.storage().index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_string()) return a.as_string() == b.as_string();
  if (a.is_array()) {
    const Array &x = a.as_array(), &y = b.as_array();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!equals(x[i], y[i])) return false;
    return true;
  }
  const Object &x = a.as_object(), &y = b.as_object();
  if (x.size() != y.size()) return false;
  for (const auto& [k, v] : x)
    if (!equals(v, b.get(k)) || b.get(k).is_undefined()) return false;
  return true;
}

namespace detail {

void to_json(std::string& out, const Value& v, int indent) { json_dump(out, v, indent, 0); }

std::string type_name(const Value& v) {
  if (v.is_undefined()) return "undefined";
  if (v.is_none()) return "none";
  if (v.is_bool()) return "bool";
  if (v.is_int()) return "int";
  if (v.is_float()) return "float";
  if (v.is_string()) return "string";
  if (v.is_array()) return "list";
  return "dict";
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string strip(const std::string& s, bool left, bool right, const Value& chars) {
  auto drop = [&](char c) {
    return chars.is_string() ? chars.as_string().find(c) != std::string::npos : is_ws(c);
  };
  std::size_t b = 0, e = s.size();
  if (left)
    while (b < e && drop(s[b])) ++b;
  if (right)
    while (e > b && drop(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = 1;
    while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string map_ascii(std::string s, int (*f)(int)) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(c));
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = map_ascii(s, [](int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; });
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alpha) c = static_cast<char>(start ? (c >= 'a' ? c - 32 : c) : (c <= 'Z' ? c + 32 : c));
    start = !alpha && !(c >= '0' && c <= '9') && static_cast<unsigned char>(c) < 0x80;
  }
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  if (from.empty()) return s;
  std::string out;
  std::size_t i = 0;
  for (std::int64_t done = 0; count < 0 || done < count; ++done) {
    const std::size_t j = s.find(from, i);
    if (j == std::string::npos) break;
    out.append(s, i, j - i).append(to);
    i = j + from.size();
  }
  return out.append(s, i);
}

}  // namespace detail
}  // namespace fucina::tokenizer::jinja
