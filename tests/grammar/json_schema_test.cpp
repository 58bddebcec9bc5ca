// JSON Schema -> grammar: llama.cpp's conversion verdicts and its schema integration cases
// (strings each schema must accept or refuse), integer ranges checked exhaustively, error
// and warning messages.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "fucina/core/error.hpp"
#include "fucina/grammar/json_schema.hpp"
#include "fucina/grammar/matcher.hpp"
#include "grammar/grammar_cases.hpp"

namespace {

namespace g = fucina::grammar;
using fucina::test::load_grammar_cases;
using fucina::test::matches;
using nlohmann::json;
using ojson = nlohmann::ordered_json;

std::shared_ptr<const g::Grammar> schema_grammar(std::string_view schema) {
  return std::make_shared<const g::Grammar>(g::from_json_schema_text(schema));
}

std::string conversion_error(std::string_view schema) {
  try {
    g::from_json_schema_text(schema);
  } catch (const fucina::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonSchema, LlamaCppConversionVerdicts) {
  int n = 0;
  for (const auto& c : load_grammar_cases("json_schema.json")) {
    const std::string schema = c["schema"];
    bool converted = true;
    std::string error;
    try {
      g::from_json_schema_text(schema);
    } catch (const fucina::Error& e) {
      converted = false, error = e.what();
    }
    EXPECT_EQ(converted, c["status"] == "success") << c["name"] << "\n" << schema << "\n" << error;
    ++n;
  }
  EXPECT_GE(n, 80);
}

// llama.cpp's expected grammars are GBNF our parser must read.
TEST(JsonSchema, LlamaCppExpectedGrammarsParse) {
  for (const auto& c : load_grammar_cases("json_schema.json")) {
    if (c["status"] != "success") continue;
    EXPECT_NO_THROW(g::parse_gbnf(c["llama_grammar"].get<std::string>())) << c["name"];
  }
}

TEST(JsonSchema, LlamaCppSchemaStrings) {
  int strings = 0;
  for (const auto& c : load_grammar_cases("integration.json")) {
    if (c["kind"] != "schema" || c.contains("skip")) continue;
    const auto gr = schema_grammar(c["schema"].get<std::string>());
    for (const auto& s : c["pass"]) EXPECT_TRUE(matches(gr, s["text"].get<std::string>())) << c["name"] << ": " << s;
    for (const auto& s : c["fail"]) EXPECT_FALSE(matches(gr, s["text"].get<std::string>())) << c["name"] << ": " << s;
    strings += static_cast<int>(c["pass"].size() + c["fail"].size());
  }
  EXPECT_GE(strings, 200);
}

// Every integer near the bounds, in range exactly when accepted; no leading zeros or "-0".
TEST(JsonSchema, IntegerRangesExhaustive) {
  const std::vector<std::pair<std::optional<long>, std::optional<long>>> ranges = {
      {0, std::nullopt}, {1, std::nullopt}, {37, std::nullopt}, {-123, std::nullopt}, {std::nullopt, 0},
      {std::nullopt, -5}, {std::nullopt, 999}, {-1, 1}, {5, 30}, {-123, 42}, {15, 300}, {-1000, -17},
      {100, 100}, {0, 0}, {-9999, 9999}, {8, 1042}};
  for (const auto& [lo, hi] : ranges) {
    ojson schema = {{"type", "integer"}};
    if (lo) schema["minimum"] = *lo;
    if (hi) schema["maximum"] = *hi;
    const auto gr = std::make_shared<const g::Grammar>(g::from_json_schema(schema));
    const long from = (lo ? *lo : (hi ? *hi : 0) - 2000) - 60, to = (hi ? *hi : (lo ? *lo : 0) + 2000) + 60;
    for (long v = from; v <= to; ++v) {
      const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
      EXPECT_EQ(matches(gr, std::to_string(v)), in) << schema.dump() << " value " << v;
    }
    EXPECT_FALSE(matches(gr, "-0")) << schema.dump();
    EXPECT_FALSE(matches(gr, "007")) << schema.dump();
  }
  // Exclusive bounds (fractional ones round inwards).
  const auto gr = schema_grammar(R"({"type": "integer", "exclusiveMinimum": 0.5, "exclusiveMaximum": 10})");
  EXPECT_FALSE(matches(gr, "0"));
  EXPECT_TRUE(matches(gr, "1"));
  EXPECT_TRUE(matches(gr, "9"));
  EXPECT_FALSE(matches(gr, "10"));
}

TEST(JsonSchema, ObjectsArraysStringsPatterns) {
  const auto gr = schema_grammar(R"({
    "type": "object",
    "properties": {
      "id": {"type": "string", "format": "uuid"},
      "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "minItems": 1, "maxItems": 2},
      "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}(x|\"y\")?$"},
      "when": {"type": "string", "format": "date"},
      "note": {"type": ["string", "null"], "maxLength": 3}
    },
    "required": ["id", "tags"]
  })");
  const std::string id = R"("id": "123e4567-e89b-12d3-a456-426614174000")";
  EXPECT_TRUE(matches(gr, "{" + id + R"(, "tags": ["a", 3]})"));
  EXPECT_TRUE(matches(gr, "{" + id + R"(, "tags": ["b"], "code": "AB-123", "note": null})"));
  EXPECT_TRUE(matches(gr, "{" + id + R"(, "tags": ["b"], "code": "AB-123\"y\"", "when": "2024-02-29"})"));
  EXPECT_TRUE(matches(gr, "{" + id + R"(, "tags": ["b"], "note": "abc"})"));
  EXPECT_FALSE(matches(gr, "{" + id + R"(, "tags": []})"));             // minItems
  EXPECT_FALSE(matches(gr, "{" + id + R"(, "tags": ["a", "b", 3]})"));  // maxItems
  EXPECT_FALSE(matches(gr, "{" + id + R"(, "tags": ["c"]})"));          // enum
  EXPECT_FALSE(matches(gr, "{" + id + R"(, "tags": ["a"], "code": "AB-12"})"));
  EXPECT_FALSE(matches(gr, "{" + id + R"(, "tags": ["a"], "note": "abcd"})"));
  EXPECT_FALSE(matches(gr, "{" + id + R"(, "tags": ["a"], "other": 1})"));  // no additional keys
  EXPECT_FALSE(matches(gr, R"({"tags": ["a"]})"));                          // id is required
  EXPECT_FALSE(matches(gr, "{" + id + R"(, "tags": ["a"], "when": "2024-13-01"})"));
  for (const char* bad : {"2023-02-29", "1900-02-29", "2023-04-31", "0000-01-01", "2023-00-10", "2023-01-32"})
    EXPECT_FALSE(matches(gr, "{" + id + R"(, "tags": ["a"], "when": ")" + bad + "\"}")) << bad;
  for (const char* ok : {"2024-02-29", "2000-02-29", "0400-02-29", "2023-12-31", "0001-01-01", "2023-06-30"})
    EXPECT_TRUE(matches(gr, "{" + id + R"(, "tags": ["a"], "when": ")" + ok + "\"}")) << ok;
}

TEST(JsonSchema, RefsAllOfAdditionalProperties) {
  const auto gr = schema_grammar(R"({
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
                       "required": ["v"]}},
    "allOf": [{"$ref": "#/$defs/node"}, {"properties": {"w": {"type": "boolean"}}, "required": ["w"]}]
  })");
  // Required keys first (schema order), then the optional ones, as llama.cpp orders them.
  EXPECT_TRUE(matches(gr, R"({"v": 1, "w": true, "next": {"v": 2, "next": {"v": 3}}})"));
  EXPECT_FALSE(matches(gr, R"({"v": 1, "next": {"v": 2}, "w": true})"));
  EXPECT_FALSE(matches(gr, R"({"v": 1, "w": true, "next": {"next": {"v": 3}}})"));
  EXPECT_FALSE(matches(gr, R"({"v": 1})"));
  const auto extra = schema_grammar(R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(matches(extra, R"({"a": 1, "ab": "x", "b": "y"})"));
  EXPECT_TRUE(matches(extra, R"({"b": "y"})"));
  EXPECT_FALSE(matches(extra, R"({"a": 1, "a": "x"})"));  // a declared key is not an additional one
  EXPECT_FALSE(matches(extra, R"({"b": 1})"));
}

TEST(JsonSchema, AnyJson) {
  const auto any = std::make_shared<const g::Grammar>(g::parse_gbnf(g::any_json_gbnf()));
  const auto obj = std::make_shared<const g::Grammar>(g::parse_gbnf(g::any_json_gbnf(true)));
  for (const char* ok : {"1", "-2.5e3", "\"a\\nb\"", "[1, [true, null], {}]", "{\"k\": {\"x\": []}}"}) EXPECT_TRUE(matches(any, ok)) << ok;
  for (const char* bad : {"01", "[1,]", "{\"k\" 1}", "'a'", "nul", "\"\x01\""}) EXPECT_FALSE(matches(any, bad)) << bad;
  EXPECT_TRUE(matches(obj, "{\"k\": [1]}"));
  EXPECT_FALSE(matches(obj, "[1]"));
}

TEST(JsonSchema, ErrorsNameThePath) {
  EXPECT_EQ(conversion_error(R"({"type": "object", "properties": {"a": {"type": "strin"}}})"),
            "JSON schema: #/properties/a: unknown type 'strin'");
  EXPECT_EQ(conversion_error(R"({"$ref": "https://example.com/s.json"})"),
            "JSON schema: #: $ref 'https://example.com/s.json': only references into the same document (#/...) are supported");
  EXPECT_EQ(conversion_error(R"({"$ref": "#/$defs/missing"})"),
            "JSON schema: #: $ref '#/$defs/missing' does not resolve ('$defs' not found)");
  EXPECT_EQ(conversion_error(R"({"type": "integer", "minimum": 5, "maximum": 4})"), "JSON schema: #: no integer lies in [5, 4]");
  EXPECT_EQ(conversion_error(R"({"type": "string", "pattern": "^(ab$"})"),
            "JSON schema: #: invalid pattern ^(ab$: unbalanced parentheses");
  EXPECT_NE(conversion_error(R"({"type": )").find("JSON schema: not valid JSON"), std::string::npos);
  std::vector<std::string> warnings;
  g::from_json_schema_text(R"({"type": "string", "pattern": "^(?=a)b$"})", &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "#: pattern ^(?=a)b$ is not supported (group syntax (?=)); any string allowed");
}

}  // namespace

// Found by grammar_fuzz: a number past double's range is nlohmann's out_of_range, not a
// parse_error; it must be the same clear error (it was an uncaught exception).
TEST(JsonSchemaText, NumberOverflowIsAClearError) {
  try {
    (void)fucina::grammar::from_json_schema_text(R"({"type": "integer", "maximum": 1e900})");
    FAIL() << "accepted a schema with 1e900";
  } catch (const fucina::Error& e) {
    EXPECT_EQ(e.code(), fucina::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}
