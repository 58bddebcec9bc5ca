// JSON Schema -> GBNF (Note [JSON Schema subset]). Each schema node becomes a rule named
// after its path (root, root-name, root-items, ...); shared pieces are built-in rules
// added on first use. Every value rule ends with `space`, so a value may be followed by
// whitespace wherever JSON allows it.
// GCC 12 at -O3 reports false -Wrestrict overlaps inside std::string's operator+ once it
// is inlined (GCC bug 105329); this file builds grammar text with it throughout. Set before
// the includes: the warning is located in <string>'s own code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "fucina/grammar/json_schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "fucina/core/error.hpp"
#include "gbnf_text.hpp"
#include "json_pattern.hpp"

namespace fucina::grammar {

namespace {

using namespace detail;
using json = nlohmann::ordered_json;

struct Builtin {
  std::string_view body;
  std::vector<std::string_view> deps;
};

// The shared rules; a user rule never takes one of these names.
const std::map<std::string_view, Builtin, std::less<>>& builtins() {
  static const std::map<std::string_view, Builtin, std::less<>> table = {
      {"space", {R"(| " " | "\n"{1,2} [ \t]{0,20})", {}}},
      {"char", {R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))", {}}},
      // `.` of a pattern: a string character other than a line break.
      {"dot", {R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfrt] | "u" [0-9a-fA-F]{4}))", {}}},
      {"string", {R"("\"" char* "\"" space)", {"char", "space"}}},
      {"boolean", {R"(("true" | "false") space)", {"space"}}},
      {"null", {R"("null" space)", {"space"}}},
      {"integral-part", {R"([0] | [1-9] [0-9]{0,15})", {}}},
      {"decimal-part", {R"([0-9]{1,16})", {}}},
      {"number",
       {R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space)",
        {"integral-part", "decimal-part", "space"}}},
      {"integer", {R"(("-"? integral-part) space)", {"integral-part", "space"}}},
      {"value", {"object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}}},
      {"object",
       {R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)", {"string", "value", "space"}}},
      {"array", {R"("[" space ( value ("," space value)* )? "]" space)", {"value", "space"}}},
      {"uuid",
       {R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space)",
        {"space"}}},
      // Exact calendar dates (llama.cpp's rule allows 02-31 and year 0000): month lengths,
      // and 02-29 only in leap years.
      {"date",
       {R"(year "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) ) | leap-year "-02-29")",
        {"year", "leap-year"}}},
      {"year", {R"([1-9] [0-9]{3} | "0" [1-9] [0-9]{2} | "00" [1-9] [0-9] | "000" [1-9])", {}}},
      {"leap-year",
       {R"([0-9]{2} ( "0" [48] | [2468] [048] | [13579] [26] ) | ( "0" [48] | [2468] [048] | [13579] [26] ) "00")", {}}},
      {"time",
       {R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
        {}}},
      {"date-time", {R"(date "T" time)", {"date", "time"}}},
      {"date-string", {R"("\"" date "\"" space)", {"date", "space"}}},
      {"time-string", {R"("\"" time "\"" space)", {"time", "space"}}},
      {"date-time-string", {R"("\"" date-time "\"" space)", {"date-time", "space"}}},
  };
  return table;
}

// A JSON Pointer token with ~1 (/) and ~0 (~) decoded.
std::string unescape_pointer(std::string_view token) {
  std::string out;
  for (std::size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out += token[++i] == '1' ? '/' : '~';
    } else {
      out += token[i];
    }
  }
  return out;
}

// ---- integer ranges -------------------------------------------------------------------
// Decimal strings of [lo, hi] (both with the same number of digits) as GBNF.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return literal(lo);
  std::size_t k = 0;
  while (lo[k] == hi[k]) ++k;
  const std::string prefix = k ? literal(lo.substr(0, k)) + " " : "";
  const char a = lo[k], b = hi[k];
  const std::string los = lo.substr(k + 1), his = hi.substr(k + 1);
  const std::size_t n = los.size();
  const auto any_digits = [n] { return n == 0 ? std::string() : n == 1 ? " [0-9]" : fmt::format(" [0-9]{{{}}}", n); };
  const auto digit_class = [](char x, char y) { return x == y ? literal(std::string(1, x)) : fmt::format("[{}-{}]", x, y); };
  const bool lo_all_zero = los.find_first_not_of('0') == std::string::npos;
  const bool hi_all_nine = his.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alts;
  char first = a, last = b;
  if (!lo_all_zero) alts.push_back(literal(std::string(1, a)) + " " + same_length_range(los, std::string(n, '9'))), ++first;
  if (!hi_all_nine) --last;
  if (first <= last) alts.push_back(digit_class(first, last) + any_digits());
  if (!hi_all_nine) alts.push_back(literal(std::string(1, b)) + " " + same_length_range(std::string(n, '0'), his));
  return prefix + (group(alts));
}

// Non-negative integers in [lo, hi] written without leading zeros.
std::string natural_range(std::uint64_t lo, std::uint64_t hi) {
  std::vector<std::string> alts;
  const auto digits = [](std::uint64_t v) { return static_cast<int>(std::to_string(v).size()); };
  const auto pow10 = [](int d) {
    std::uint64_t p = 1;
    for (int i = 0; i < d; ++i) p *= 10;
    return p;
  };
  int d = digits(lo);
  while (d <= digits(hi)) {
    const std::uint64_t a = d == digits(lo) ? lo : pow10(d - 1);
    const std::uint64_t full_hi = pow10(d) - 1;
    if (a == pow10(d - 1) && d > 1 && hi >= full_hi) {
      // Every number of d .. e digits: one repetition.
      int e = d;
      while (e + 1 <= digits(hi) && hi >= pow10(e + 1) - 1) ++e;
      alts.push_back(e == d ? fmt::format("[1-9] [0-9]{{{}}}", d - 1) : fmt::format("[1-9] [0-9]{{{},{}}}", d - 1, e - 1));
      d = e + 1;
      continue;
    }
    alts.push_back(same_length_range(std::to_string(a), std::to_string(std::min(hi, full_hi))));
    ++d;
  }
  return join(alts, " | ");
}

// Integers in [lo, hi]; an absent bound is 16 digits (llama.cpp's integral-part).
std::string integer_range(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  constexpr std::uint64_t unbounded = 9999999999999999ULL;
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negatives: "-" magnitude, magnitude in [max(1, -hi), -lo]
    const std::uint64_t mag_lo = hi && *hi < 0 ? static_cast<std::uint64_t>(-(*hi + 1)) + 1 : 1;
    const std::uint64_t mag_hi = lo ? static_cast<std::uint64_t>(-(*lo + 1)) + 1 : std::max(unbounded, mag_lo);
    alts.push_back("\"-\" (" + natural_range(mag_lo, mag_hi) + ")");
  }
  if (!hi || *hi >= 0) {
    const std::uint64_t nat_lo = lo && *lo > 0 ? static_cast<std::uint64_t>(*lo) : 0;
    const std::uint64_t nat_hi = hi ? static_cast<std::uint64_t>(*hi) : std::max(unbounded, nat_lo);
    alts.push_back(natural_range(nat_lo, nat_hi));
  }
  return join(alts, " | ");
}

// ---- the converter ---------------------------------------------------------------------
class Converter {
 public:
  Converter(const json& root, std::vector<std::string>* warnings) : root_(root), warnings_(warnings) {}

  std::string run() {
    builtin("space");
    const std::string name = visit(root_, "root", "#");
    if (name != "root") add_rule("root", name);
    std::string out;
    for (const auto& [n, body] : rules_) out += fmt::format("{} ::= {}\n", n, body);
    return out;
  }

 private:
  [[noreturn]] static void fail_at(const std::string& path, const std::string& what) {
    fail(ErrorCode::InvalidArgument, fmt::format("JSON schema: {}: {}", path, what));
  }

  // Adds `name ::= body`, renaming on a clash with a different body; returns the name used.
  std::string add_rule(const std::string& wanted, const std::string& body) {
    std::string name;
    for (const char c : wanted) name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '-';
    if (builtins().count(name) && !(body == builtins().at(name).body)) name += "-";
    for (int i = 0;; ++i) {
      const std::string candidate = i == 0 ? name : fmt::format("{}{}", name, i);
      const auto it = std::find_if(rules_.begin(), rules_.end(), [&](const auto& r) { return r.first == candidate; });
      if (it == rules_.end()) {
        rules_.emplace_back(candidate, body);
        return candidate;
      }
      if (it->second == body) return candidate;
    }
  }
  std::string builtin(std::string_view name) {
    const Builtin& b = builtins().at(name);
    const bool have = std::any_of(rules_.begin(), rules_.end(), [&](const auto& r) { return r.first == name; });
    if (!have) {  // the rule first: value -> object -> value
      rules_.emplace_back(std::string(name), std::string(b.body));
      for (const auto dep : b.deps) builtin(dep);
    }
    return std::string(name);
  }

  static std::string constant(const json& value) { return literal(value.dump()) + " space"; }

  // A non-negative count keyword, or `fallback` when absent.
  static std::int64_t count(const json& s, const char* key, std::int64_t fallback, const std::string& path) {
    if (!s.contains(key)) return fallback;
    const json& v = s.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) fail_at(path, fmt::format("{} must be a non-negative integer", key));
    return v.get<std::int64_t>();
  }

  // `item` repeated min..max (max < 0: unbounded) times, `sep` between.
  static std::string repetition(const std::string& item, std::int64_t min, std::int64_t max, const std::string& sep) {
    if (max == 0) return "";
    const std::string more = "(" + sep + " " + item + ")";
    std::string rest;
    if (max < 0) rest = more + (min <= 1 ? "*" : fmt::format("{{{},}}", min - 1));
    else if (max > 1) rest = more + fmt::format("{{{},{}}}", std::max<std::int64_t>(min - 1, 0), max - 1);
    else if (min > 1) rest = more + fmt::format("{{{}}}", min - 1);
    const std::string one = item + (rest.empty() ? "" : " " + rest);
    return min == 0 ? "(" + one + ")?" : one;
  }

  const json& resolve(const std::string& ref, const std::string& path) {
    if (ref.rfind("#", 0) != 0 || (ref.size() > 1 && ref[1] != '/'))
      fail_at(path, fmt::format("$ref '{}': only references into the same document (#/...) are supported", ref));
    const json* at = &root_;
    std::size_t i = 2;
    while (i <= ref.size() && ref.size() > 1) {
      const std::size_t next = std::min(ref.find('/', i), ref.size());
      std::string key(ref.substr(i, next - i));  // decoded below
      key = unescape_pointer(key);
      if (at->is_object() && at->contains(key)) at = &at->at(key);
      else if (at->is_array() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
               std::stoull(key) < at->size())
        at = &at->at(std::stoull(key));
      else fail_at(path, fmt::format("$ref '{}' does not resolve ('{}' not found)", ref, key));
      i = next + 1;
    }
    return *at;
  }

  std::string visit_ref(const std::string& ref, const std::string& path) {
    const auto it = refs_.find(ref);
    if (it != refs_.end()) return it->second;
    std::string name = "ref" + ref.substr(1);  // "#/$defs/foo" -> "ref-defs-foo" after sanitizing
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
    // Reserve the name first: a recursive schema refers back to it.
    name = add_rule(name, fmt::format("\"\" # {} (pending)", ref));
    refs_[ref] = name;
    const std::string body = visit(resolve(ref, path), name + "-body", ref);
    for (auto& r : rules_)
      if (r.first == name) r.second = body;
    return name;
  }

  std::string visit(const json& s, const std::string& name, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail_at(path, "the schema false admits no value");
      return add_rule(name, builtin("value"));
    }
    if (!s.is_object()) fail_at(path, "a schema must be an object or a boolean");
    if (s.contains("$ref")) {
      if (!s.at("$ref").is_string()) fail_at(path, "$ref must be a string");
      return add_rule(name, visit_ref(s.at("$ref").get<std::string>(), path));
    }
    for (const char* key : {"oneOf", "anyOf"})
      if (s.contains(key)) {
        const json& alts = s.at(key);
        if (!alts.is_array() || alts.empty()) fail_at(path, fmt::format("{} must be a non-empty array", key));
        std::vector<std::string> parts;
        for (std::size_t i = 0; i < alts.size(); ++i)
          parts.push_back(visit(alts[i], fmt::format("{}-{}", name, i), fmt::format("{}/{}/{}", path, key, i)));
        return add_rule(name, join(parts, " | "));
      }
    const json type = s.value("type", json());
    if (type.is_array()) {
      if (type.empty()) fail_at(path, "type must not be empty");
      std::vector<std::string> parts;
      for (std::size_t i = 0; i < type.size(); ++i) {
        json alt = s;
        alt["type"] = type[i];
        parts.push_back(visit(alt, fmt::format("{}-{}", name, type[i].is_string() ? type[i].get<std::string>() : "t"),
                              fmt::format("{}/type/{}", path, i)));
      }
      return add_rule(name, join(parts, " | "));
    }
    if (s.contains("const")) return add_rule(name, constant(s.at("const")));
    if (s.contains("enum")) {
      const json& values = s.at("enum");
      if (!values.is_array() || values.empty()) fail_at(path, "enum must be a non-empty array");
      std::vector<std::string> parts;
      for (const auto& v : values) parts.push_back(literal(v.dump()));
      return add_rule(name, "(" + join(parts, " | ") + ") space");
    }
    if (!type.is_null() && !type.is_string()) fail_at(path, "type must be a string or an array of strings");
    const std::string t = type.is_string() ? type.get<std::string>() : "";
    const bool objectish = s.contains("properties") || (s.contains("additionalProperties") && s.at("additionalProperties") != true);
    if (t.empty()) {
      if (objectish) return add_rule(name, object_rule(s, name, path));
      if (s.contains("allOf")) return add_rule(name, all_of(s.at("allOf"), name, path));
      if (s.contains("items") || s.contains("prefixItems")) return add_rule(name, array_rule(s, name, path));
      if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength") || s.contains("format"))
        return add_rule(name, string_rule(s, name, path));
      return add_rule(name, builtin("value"));
    }
    if (t == "object") {
      if (!objectish && s.contains("allOf")) return add_rule(name, all_of(s.at("allOf"), name, path));
      return add_rule(name, object_rule(s, name, path));
    }
    if (t == "string") {
      if (s.contains("allOf")) return add_rule(name, all_of(s.at("allOf"), name, path));
      return add_rule(name, string_rule(s, name, path));
    }
    if (t == "array") return add_rule(name, array_rule(s, name, path));
    if (t == "integer") return add_rule(name, integer_rule(s, path));
    if (t == "number") return add_rule(name, builtin("number"));
    if (t == "boolean") return add_rule(name, builtin("boolean"));
    if (t == "null") return add_rule(name, builtin("null"));
    fail_at(path, fmt::format("unknown type '{}'", t));
  }

  struct Property {
    std::string name;
    const json* schema;
    bool required;
  };

  std::string object_rule(const json& s, const std::string& name, const std::string& path) {
    std::set<std::string> required;
    if (s.contains("required") && s.at("required").is_array())
      for (const auto& r : s.at("required"))
        if (r.is_string()) required.insert(r.get<std::string>());
    std::vector<Property> props;
    if (s.contains("properties")) {
      if (!s.at("properties").is_object()) fail_at(path, "properties must be an object");
      for (const auto& [key, sub] : s.at("properties").items()) props.push_back({key, &sub, required.count(key) > 0});
    }
    const json* additional = nullptr;
    static const json any = json::object();
    if (s.contains("additionalProperties")) {
      const json& a = s.at("additionalProperties");
      if (a.is_boolean()) additional = a.get<bool>() ? &any : nullptr;
      else if (a.is_object()) additional = &a;
      else fail_at(path, "additionalProperties must be a boolean or a schema");
    } else if (!s.contains("properties")) {
      additional = &any;
    }
    if (props.empty() && additional == &any) return builtin("object");
    return properties_rule(props, additional, name, path);
  }

  std::string properties_rule(const std::vector<Property>& props, const json* additional, const std::string& name,
                          const std::string& path) {
    std::vector<std::string> required, optional;
    std::vector<std::string> names;
    for (const auto& p : props) {
      const std::string value = visit(*p.schema, name + "-" + p.name, path + "/properties/" + p.name);
      const std::string kv = add_rule(name + "-" + p.name + "-kv", literal(json(p.name).dump()) + " space \":\" space " + value);
      (p.required ? required : optional).push_back(kv);
      names.push_back(p.name);
    }
    std::string extra;  // the additional key/value rule
    if (additional) {
      const std::string value = additional->empty() ? builtin("value") : visit(*additional, name + "-additional-value", path + "/additionalProperties");
      const std::string key = names.empty() ? builtin("string") : add_rule(name + "-additional-k", not_strings(names));
      extra = add_rule(name + "-additional-kv", key + " \":\" space " + value);
    }
    const auto more = [](const std::string& kv) { return "(\",\" space " + kv + ")"; };
    std::string body = "\"{\" space ";
    if (!required.empty()) {
      body += join(required, " \",\" space ");
      for (const auto& kv : optional) body += fmt::format(" {}?", more(kv));
      if (!extra.empty()) body += " " + more(extra) + "*";
    } else if (!optional.empty() || !extra.empty()) {
      // No required key: whichever present key comes first has no comma before it.
      std::vector<std::string> firsts;
      for (std::size_t i = 0; i <= optional.size(); ++i) {
        if (i == optional.size() && extra.empty()) break;
        std::string alt = i < optional.size() ? optional[i] : extra;
        for (std::size_t j = i + 1; j < optional.size(); ++j) alt += fmt::format(" {}?", more(optional[j]));
        if (!extra.empty()) alt += " " + more(extra) + "*";
        firsts.push_back(alt);
      }
      body += "(" + join(firsts, " | ") + ")?";
    }
    return body + " \"}\" space";
  }

  // A JSON string key that is none of `names`: a trie over their characters, leaving it at
  // any point with a character no name continues with.
  std::string not_strings(const std::vector<std::string>& names) {
    struct Node {
      std::map<char32_t, std::size_t> next;
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const auto& n : names) {
      std::size_t at = 0;
      for (std::size_t i = 0; i < n.size();) {
        const char32_t c = next_code_point(n, i);
        auto it = trie[at].next.find(c);
        if (it == trie[at].next.end()) {
          trie.emplace_back();
          it = trie[at].next.emplace(c, trie.size() - 1).first;
        }
        at = it->second;
      }
      trie[at].end = true;
    }
    builtin("char");
    std::function<std::string(std::size_t)> rec = [&](std::size_t at) {
      std::vector<std::string> alts;
      std::string excluded;
      for (const auto& [c, child] : trie[at].next) {
        alts.push_back(fmt::format("[{}] {}", class_char(c), rec(child)));
        excluded += class_char(c);
      }
      alts.push_back("([^\"\\\\\\x7F\\x00-\\x1F" + excluded + "] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})) char*");
      if (!trie[at].end) alts.push_back("");
      return "(" + join(alts, " | ") + ")";
    };
    return "\"\\\"\" " + rec(0) + " \"\\\"\" space";
  }

  std::string all_of(const json& parts, const std::string& name, const std::string& path) {
    if (!parts.is_array() || parts.empty()) fail_at(path, "allOf must be a non-empty array");
    std::vector<Property> props;
    std::map<std::string, std::size_t> enum_count;  // literal -> components that list it
    const std::function<void(const json&, bool, const std::string&)> add = [&](const json& c, bool required,
                                                                               const std::string& at) {
      if (!c.is_object()) fail_at(at, "allOf must list schemas");
      if (c.contains("$ref")) return add(resolve(c.at("$ref").get<std::string>(), at), required, at);
      if (c.contains("properties")) {
        std::set<std::string> req;
        if (c.contains("required"))
          for (const auto& r : c.at("required")) req.insert(r.get<std::string>());
        for (const auto& [key, sub] : c.at("properties").items()) props.push_back({key, &sub, required && req.count(key)});
      }
      if (c.contains("enum"))
        for (const auto& v : c.at("enum")) ++enum_count[literal(v.dump())];
    };
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::string at = fmt::format("{}/allOf/{}", path, i);
      const json& c = parts[i];
      const char* alt_key = c.contains("anyOf") ? "anyOf" : c.contains("oneOf") ? "oneOf" : nullptr;
      if (alt_key)  // each alternative's properties become optional
        for (const auto& alt : c.at(alt_key)) add(alt, false, at);
      else add(c, true, at);
    }
    std::vector<std::string> common;
    for (const auto& [lit, n] : enum_count)
      if (n == parts.size()) common.push_back(lit);
    if (!common.empty()) return "(" + join(common, " | ") + ") space";
    return properties_rule(props, nullptr, name, path);
  }

  std::string array_rule(const json& s, const std::string& name, const std::string& path) {
    const char* key = s.contains("items") ? "items" : s.contains("prefixItems") ? "prefixItems" : nullptr;
    if (key && s.at(key).is_array()) {  // a tuple
      std::vector<std::string> items;
      for (std::size_t i = 0; i < s.at(key).size(); ++i)
        items.push_back(visit(s.at(key)[i], fmt::format("{}-tuple-{}", name, i), fmt::format("{}/{}/{}", path, key, i)));
      return "\"[\" space " + join(items, " \",\" space ") + " \"]\" space";
    }
    const std::int64_t min = count(s, "minItems", 0, path), max = count(s, "maxItems", -1, path);
    if (max >= 0 && max < min) fail_at(path, fmt::format("maxItems {} below minItems {}", max, min));
    if (!key && min == 0 && max < 0) return builtin("array");
    const std::string item = key ? visit(s.at(key), name + "-item", path + "/" + key) : builtin("value");
    return "\"[\" space " + repetition(item, min, max, "\",\" space") + " \"]\" space";
  }

  std::string string_rule(const json& s, const std::string& name, const std::string& path) {
    if (s.contains("pattern")) {
      if (!s.at("pattern").is_string()) fail_at(path, "pattern must be a string");
      const std::string p = s.at("pattern").get<std::string>();
      try {
        if (p.size() < 2 || p.front() != '^' || p.back() != '$') throw UnsupportedPattern{"not anchored with ^ and $"};
        const std::string body = pattern_to_gbnf(std::string_view(p).substr(1, p.size() - 2));
        if (body.find("dot") != std::string::npos) builtin("dot");
        return "\"\\\"\" " + add_rule(name + "-pattern", body) + " \"\\\"\" space";
      } catch (const UnsupportedPattern& u) {
        if (warnings_) warnings_->push_back(fmt::format("{}: pattern {} is not supported ({}); any string allowed", path, p, u.why));
        return builtin("string");
      } catch (const InvalidPattern& e) {
        fail_at(path, fmt::format("invalid pattern {}: {}", p, e.why));
      }
    }
    const std::string format = s.contains("format") && s.at("format").is_string() ? s.at("format").get<std::string>() : "";
    if (format == "uuid" || (format.size() == 5 && format.rfind("uuid", 0) == 0 && format[4] >= '1' && format[4] <= '5'))
      return builtin("uuid");
    if (format == "date" || format == "time" || format == "date-time") return builtin(format + "-string");
    const std::int64_t min = count(s, "minLength", 0, path), max = count(s, "maxLength", -1, path);
    if (max >= 0 && max < min) fail_at(path, fmt::format("maxLength {} below minLength {}", max, min));
    if (min == 0 && max < 0) return builtin("string");
    builtin("char");
    builtin("space");
    const std::string reps = max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    return "\"\\\"\" char" + reps + " \"\\\"\" space";
  }

  std::string integer_rule(const json& s, const std::string& path) {
    std::optional<std::int64_t> lo, hi;
    const auto bound = [&](const char* key, bool up) -> std::int64_t {
      const json& v = s.at(key);
      if (!v.is_number()) fail_at(path, fmt::format("{} must be a number", key));
      const double d = v.get<double>();
      const double r = up ? std::ceil(d) : std::floor(d);
      if (!(std::fabs(r) < 9.2e18)) fail_at(path, fmt::format("{} {} is out of range", key, d));
      return static_cast<std::int64_t>(r);
    };
    if (s.contains("minimum")) lo = bound("minimum", true);
    else if (s.contains("exclusiveMinimum") && s.at("exclusiveMinimum").is_number())
      lo = static_cast<std::int64_t>(std::floor(s.at("exclusiveMinimum").get<double>())) + 1;
    if (s.contains("maximum")) hi = bound("maximum", false);
    else if (s.contains("exclusiveMaximum") && s.at("exclusiveMaximum").is_number())
      hi = static_cast<std::int64_t>(std::ceil(s.at("exclusiveMaximum").get<double>())) - 1;
    if (!lo && !hi) return builtin("integer");
    if (lo && hi && *lo > *hi) fail_at(path, fmt::format("no integer lies in [{}, {}]", *lo, *hi));
    builtin("space");
    return "(" + integer_range(lo, hi) + ") space";
  }

  const json& root_;
  std::vector<std::string>* warnings_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in order of creation
  std::map<std::string, std::string> refs_;                  // $ref -> rule
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, std::vector<std::string>* warnings) {
  return Converter(schema, warnings).run();
}

Grammar from_json_schema(const nlohmann::ordered_json& schema, std::vector<std::string>* warnings) {
  return parse_gbnf(json_schema_to_gbnf(schema, warnings));
}

Grammar from_json_schema_text(std::string_view schema_text, std::vector<std::string>* warnings) {
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(schema_text);
  } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers past double's range (1e900)
    fail(ErrorCode::InvalidArgument, fmt::format("JSON schema: not valid JSON ({})", e.what()));
  }
  return from_json_schema(schema, warnings);
}

std::string any_json_gbnf(bool object_only) {
  return Converter(object_only ? nlohmann::ordered_json{{"type", "object"}} : nlohmann::ordered_json::object(), nullptr).run();
}

}  // namespace fucina::grammar
