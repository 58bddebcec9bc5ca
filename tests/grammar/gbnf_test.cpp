// GBNF parsing and matching: llama.cpp's parser and integration cases (tests/data/grammar,
// carried over by scripts/parity/extract_grammar_cases.py) with their verdicts, precise
// error positions, and token masks checked against token-by-token matching.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "fucina/core/error.hpp"
#include "fucina/grammar/grammar.hpp"
#include "fucina/grammar/matcher.hpp"
#include "grammar/grammar_cases.hpp"

namespace {

namespace g = fucina::grammar;
using fucina::test::load_grammar_cases;
using fucina::test::matches;
using nlohmann::json;

std::shared_ptr<const g::Grammar> grammar_of(std::string_view text, std::string_view root = "root") {
  return std::make_shared<const g::Grammar>(g::parse_gbnf(text, root));
}

std::string parse_error(std::string_view text) {
  try {
    g::parse_gbnf(text);
  } catch (const fucina::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A carried-over string: UTF-8 text, or raw bytes in hex.
std::string case_string(const json& s) {
  if (s.contains("text")) return s["text"].get<std::string>();
  std::string hex = s["hex"].get<std::string>(), out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

TEST(Gbnf, LlamaCppParserVerdicts) {
  // One deliberate difference: nested bounded repetitions that llama.cpp refuses because its
  // expansion copies the repeated item per count; ours references one rule, so the grammar
  // stays small and is accepted.
  const std::string nested = "(((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}";
  int n = 0;
  for (const auto& c : load_grammar_cases("parser.json")) {
    if (c.contains("skip")) continue;
    const std::string text = c["grammar"];
    const std::string root = c.value("root", "root");
    bool valid = c["valid"];
    if (text.find(nested) != std::string::npos) valid = true;
    bool parsed = true;
    std::string error;
    try {
      g::parse_gbnf(text, root);
    } catch (const fucina::Error& e) {
      parsed = false, error = e.what();
    }
    EXPECT_EQ(parsed, valid) << text << "\n" << error;
    ++n;
  }
  EXPECT_GE(n, 30);
}

TEST(Gbnf, LlamaCppIntegrationStrings) {
  int strings = 0;
  for (const auto& c : load_grammar_cases("integration.json")) {
    if (c["kind"] != "grammar" || c.contains("skip")) continue;
    const auto gr = grammar_of(c["grammar"].get<std::string>());
    for (const auto& s : c["pass"]) EXPECT_TRUE(matches(gr, case_string(s))) << c["name"] << ": " << s;
    for (const auto& s : c["fail"]) EXPECT_FALSE(matches(gr, case_string(s))) << c["name"] << ": " << s;
    strings += static_cast<int>(c["pass"].size() + c["fail"].size());
  }
  EXPECT_GE(strings, 100);
}

TEST(Gbnf, SyntaxCoverage) {
  const auto gr = grammar_of(R"(
    # a comment line
    root ::= greeting (" " name)? "!"{1,3} tail   # trailing comment
    greeting ::= "hi" | "h\x65llo" | [Hh] "ey"
    name ::= [a-z]+ | "\u00e9t\u00E9" | "\"q\""
    tail ::= ( [^a-z\n] . )*
  )");
  for (const char* ok : {"hi!", "hello bob!!!", "Hey été!", "hey \"q\"!!", "hi!1x", "hi!\xce\xb1\xce\xb2"})
    EXPECT_TRUE(matches(gr, ok)) << ok;
  for (const char* bad : {"hi", "hi!x", "hey Bob!", "hi!a1", "hi!1", "hello  bob!"}) EXPECT_FALSE(matches(gr, bad)) << bad;
}

TEST(Gbnf, Repetitions) {
  const auto gr = grammar_of(R"(root ::= "a"{2} "b"{,2} "c"{1,} ("d" "e"){0,2} "f"?)");
  for (const char* ok : {"aac", "aabbccc", "aacdede", "aacdef", "aabcf"}) EXPECT_TRUE(matches(gr, ok)) << ok;
  for (const char* bad : {"ac", "aabbbc", "aa", "aacdedede", "aacd", "aacff"}) EXPECT_FALSE(matches(gr, bad)) << bad;
}

TEST(Gbnf, ErrorsNameLineColumnAndWhatWasExpected) {
  EXPECT_EQ(parse_error("root ::= \"a\"\nfoo ::= [abc"),
            "grammar: line 2, column 13: expected ']' to close the character class (at end of input)");
  EXPECT_EQ(parse_error("root ::= \"a\" (\"b\" | \"c\"\n"),
            "grammar: line 2, column 1: expected ')' to close the group (at end of input)");
  EXPECT_EQ(parse_error("root = \"a\""), "grammar: line 1, column 6: expected '::=' after the rule name (at '= \"a\"')");
  EXPECT_EQ(parse_error("root ::= x\n"), "grammar: line 1, column 10: undefined rule 'x' (at 'x')");
  EXPECT_EQ(parse_error("foo ::= \"a\""), "grammar: no 'root' rule (the start rule)");
  EXPECT_EQ(parse_error("root ::= \"\\q\""), "grammar: line 1, column 11: unknown escape (expected one of \\t \\n \\r "
                                              "\\\\ \\\" \\[ \\] \\- \\^ \\x \\u \\U) (at '\\q\"')");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,1}"), "grammar: line 1, column 10: repetition maximum below its minimum (at '\"a\"{3,1}')");
  EXPECT_EQ(parse_error("root ::= a\na ::= \"x\" | a \"y\""), "grammar: rule 'a' is left-recursive");
  EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\""), "grammar: line 2, column 1: rule 'root' defined twice (at 'root ::= \"b\"')");
  EXPECT_EQ(parse_error("root ::= <[12]>"), "grammar: line 1, column 10: token references (<...>) are not supported (at '<[12]>')");
}

TEST(Gbnf, PartialUtf8IsAllowedOnlyWhenItCanComplete) {
  const auto gr = grammar_of(R"(root ::= "é" [α-γ])");  // é = C3 A9, α = CE B1
  g::Matcher m(gr);
  EXPECT_FALSE(m.accept("\xc3\xaa"));  // ê: complete but wrong
  EXPECT_TRUE(m.accept("\xc3"));       // may still become é
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.accept("\xa9"));
  EXPECT_FALSE(m.accept("\xcf"));      // U+03C0.. : above γ (U+03B3)
  EXPECT_TRUE(m.accept("\xce"));
  EXPECT_FALSE(m.accept("\xb4"));      // δ
  EXPECT_TRUE(m.accept("\xb3"));       // γ
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.accept("\xff"));      // never UTF-8
}

// Byte-level vocabularies have tokens for any byte: overlong forms of ASCII, surrogates and
// code points past U+10FFFF must not pass for characters.
TEST(Gbnf, NonUtf8FormsAreRefused) {
  const auto gr = grammar_of(R"(root ::= "{" [^x]* "}")");
  for (const char* bad : {"\xe0\x81\xbb", "\xf0\x80\x80\xa2", "\xc1\xbb", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    g::Matcher m(gr);
    EXPECT_FALSE(m.accept(bad)) << bad;
    g::Matcher inner(gr);
    ASSERT_TRUE(inner.accept("{"));
    EXPECT_FALSE(inner.accept(bad)) << bad;
  }
  g::Matcher m(gr);
  EXPECT_FALSE(m.accept("\xe0\x81"));  // can only become overlong
  EXPECT_FALSE(m.accept("\xed\xa0"));  // can only become a surrogate
  EXPECT_TRUE(m.accept("{\xe0\xa4\x85\xf0\x9f\x98\x80}"));
  EXPECT_TRUE(m.complete());
}

// A vocabulary of single bytes, ASCII words, multi-byte pieces that split characters, an
// empty piece and an end token.
struct TestVocab {
  std::vector<std::string> pieces;
  std::vector<bool> end;
  TestVocab() {
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
    for (const char* w : {"{", "}", "\"", "\":", "\"a", "ab", "abc", "true", "false", "null", "12", "1.5", " ", "\n",
                          "\xc3", "\xc3\xa9", "\xa9x", "\xce\xb1\xce", "\xb2\"", "é\"", "aé", "\"}", ""})
      pieces.push_back(w);
    end.assign(pieces.size(), false);
    pieces.push_back("");
    end.push_back(true);  // the end token
  }
};

// Reference mask: each token's bytes through a fresh copy of the state.
std::vector<bool> brute_force_mask(const std::shared_ptr<const g::Grammar>& gr, const std::shared_ptr<const g::Vocabulary>& v,
                                   const std::string& prefix) {
  std::vector<bool> ok(v->size());
  for (std::size_t t = 0; t < v->size(); ++t) {
    g::Matcher m(gr);
    EXPECT_TRUE(m.accept(prefix));
    if (v->is_end(static_cast<g::TokenId>(t))) ok[t] = m.complete();
    else ok[t] = !v->piece(static_cast<g::TokenId>(t)).empty() && m.accept(v->piece(static_cast<g::TokenId>(t)));
  }
  return ok;
}

TEST(Gbnf, TrieMaskEqualsTokenByTokenMatching) {
  const TestVocab tv;
  const auto v = std::make_shared<const g::Vocabulary>(tv.pieces, tv.end);
  const auto gr = grammar_of(R"(
    root ::= "{" ws ( "\"" key "\":" ws value ( "," ws "\"" key "\":" ws value )* )? "}"
    key ::= ( [a-z] | "é" | [α-ω] )+
    value ::= "true" | "false" | "null" | [0-9]+ ( "." [0-9]+ )? | "\"" ( [^"\\] )* "\""
    ws ::= [ \n]?
  )");
  for (const std::string prefix : {"", "{", "{\"", "{\"a", "{\"a\xc3", "{\"ab\": ", "{\"a\":\"x\xce", "{\"a\":1", "{\"a\":1}"}) {
    g::Matcher m(gr, v);
    ASSERT_TRUE(m.accept(prefix)) << prefix;
    const auto expected = brute_force_mask(gr, v, prefix);
    const auto bits = m.allowed();
    std::size_t n_allowed = 0;
    for (std::size_t t = 0; t < v->size(); ++t) {
      const bool got = (bits[t >> 6] >> (t & 63)) & 1;
      EXPECT_EQ(got, expected[t]) << "prefix '" << prefix << "' token " << t << " '" << v->piece(static_cast<g::TokenId>(t)) << "'";
      EXPECT_EQ(m.allows(static_cast<g::TokenId>(t)), expected[t]);
      n_allowed += got;
    }
    EXPECT_GT(n_allowed, 0u) << prefix;
    // The end token only once complete.
    EXPECT_EQ(m.allows(static_cast<g::TokenId>(v->size() - 1)), prefix == "{\"a\":1}");
    std::vector<float> logits(v->size() + 3, 1.f);  // a model's padded rows are never allowed
    EXPECT_EQ(m.mask(logits), n_allowed);
    for (std::size_t t = v->size(); t < logits.size(); ++t) EXPECT_TRUE(std::isinf(logits[t]));
  }
}

TEST(Gbnf, AcceptTokenAdvancesLikeBytes) {
  const TestVocab tv;
  const auto v = std::make_shared<const g::Vocabulary>(tv.pieces, tv.end);
  const auto gr = grammar_of(R"(root ::= "\"" [a-zé]* "\"")");
  g::Matcher m(gr, v);
  const auto id = [&](std::string_view p) {
    for (std::size_t t = 256; t < tv.pieces.size(); ++t)
      if (tv.pieces[t] == p) return static_cast<g::TokenId>(t);
    return static_cast<g::TokenId>(static_cast<unsigned char>(p[0]));
  };
  EXPECT_TRUE(m.accept_token(id("\"a")));
  EXPECT_TRUE(m.accept_token(id("\xc3")));   // half of é
  EXPECT_FALSE(m.accept_token(id("ab")));    // not a continuation byte
  EXPECT_TRUE(m.accept_token(id("\xa9x")));  // é completed, then x
  EXPECT_FALSE(m.complete());
  EXPECT_FALSE(m.accept_token(static_cast<g::TokenId>(v->size() - 1)));  // end: not yet
  EXPECT_TRUE(m.accept_token(id("\"")));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());
  EXPECT_TRUE(m.allows(static_cast<g::TokenId>(v->size() - 1)));
}

// Past 65,536 stack sets (every count of a bounded repetition is one) the automaton is
// rebuilt around the current state, and matching goes on exactly.
TEST(Gbnf, RebuildKeepsTheState) {
  const auto gr = grammar_of(R"(root ::= "x"{0,70000} "y")");
  g::Matcher m(gr);
  for (int i = 0; i < 69990; ++i) ASSERT_TRUE(m.accept("x")) << i;
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.accept("xxxxxxxxxx"));  // 70,000
  EXPECT_FALSE(m.accept("x"));
  EXPECT_TRUE(m.accept("y"));
  EXPECT_TRUE(m.complete());
}

// Long generations stay within bounds: the automaton rebuilds itself and keeps matching.
TEST(Gbnf, LongInputThroughManyStates) {
  const auto gr = grammar_of(R"g(root ::= ( "(" root ")" | [a-z] )*)g");
  g::Matcher m(gr);
  std::string deep;
  for (int i = 0; i < 3000; ++i) deep += "(a";
  for (int i = 0; i < 3000; ++i) deep += ")";
  EXPECT_TRUE(m.accept(deep));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.accept(")"));
}

}  // namespace
