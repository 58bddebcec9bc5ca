// Token masks that skip trie subtrees (Note [Loops] in fucina/grammar/matcher.hpp) against
// token-by-token matching, bit for bit, over the states of random generations through
// several grammars: bounded strings at every remaining length, escapes, control characters,
// tokens that split UTF-8 characters or are not UTF-8 at all, tokens longer than what is
// left, and the end token.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fucina/grammar/grammar.hpp"
#include "fucina/grammar/json_schema.hpp"
#include "fucina/grammar/matcher.hpp"

namespace {

namespace g = fucina::grammar;

// Every single byte, then random pieces over an alphabet of letters, digits, JSON
// punctuation, quotes and backslashes, control characters and pieces of 2-, 3- and 4-byte
// characters (whole or cut anywhere), long runs (deeper than a bounded string has room
// for; some longer than a plain token's most characters), a few pieces of one letter followed by control characters, an empty piece and an
// end token (the last id).
struct RandomVocab {
  std::vector<std::string> pieces;
  std::vector<bool> end;
  explicit RandomVocab(unsigned seed) {
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    const std::vector<std::string> atoms = {
        "a", "b", "e", "z", "Q", "0", "7", " ", " ", "-", "_", ".", ",", ":", "{", "}", "[", "]", "\"", "\\",
        "n", "u", "\n", "\t", "\x7f", "\x01", "é", "α", "ω", "中", "😀", "\xc3", "\xe4\xb8", "\xf0\x9f", "\x98\x80",
        "\xad", "\xe0\x81", "\xed\xa0\x80", "\xf4\x90", "\xff", "\xc0\xaf"};
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::size_t> atom(0, atoms.size() - 1);
    std::uniform_int_distribution<int> len(1, 12);
    for (int i = 0; i < 4000; ++i) {
      std::string p;
      // Mostly letters and spaces (long all-string subtrees), sometimes anything.
      for (int n = len(rng); n > 0; --n) p += rng() % 3 ? atoms[atom(rng) % 8] : atoms[atom(rng)];
      pieces.push_back(p);
    }
    for (const char* run : {" ", "a", "é", "-"})
      for (int n = 1; n <= 40; n += n < 12 ? 1 : 4) {
        std::string p;
        for (int k = 0; k < n; ++k) p += run;
        pieces.push_back(p);
        pieces.push_back(p + "\"");
        pieces.push_back(p + "\n");
      }
    // Plain runs around the most characters a plain token may have (Note [Plain tokens]).
    for (const int n : {253, 254, 255, 300})
      for (const char* run : {"a", "\xc3\xa9"}) {
        std::string p;
        for (int k = 0; k < n; ++k) p += run;
        pieces.push_back(p);
      }
    // A letter no random piece starts with: its subtree holds only these.
    for (const std::string p : {"k", "kk", "kkk"})
      for (const char* tail : {"", "\n", "\t"}) pieces.push_back(p + tail);
    pieces.emplace_back();
    end.assign(pieces.size(), false);
    pieces.emplace_back();
    end.push_back(true);
  }
};

// Walks random token sequences through the grammar; at every state the trie mask must
// equal each token's own check on a second matcher that never computes a mask (its steps
// are made byte by byte, none of them filled in by a skip).
void expect_masks_match(const std::shared_ptr<const g::Grammar>& grammar, const std::string& name, unsigned seed,
                        int walks, int steps) {
  const RandomVocab rv(seed);
  const auto vocab = std::make_shared<const g::Vocabulary>(rv.pieces, rv.end);
  const auto end_token = static_cast<g::TokenId>(vocab->size() - 1);
  std::mt19937 rng(seed);
  std::size_t states = 0, allowed_total = 0;
  for (int walk = 0; walk < walks; ++walk) {
    g::Matcher masked(grammar, vocab), reference(grammar, vocab);
    std::string text;
    for (int step = 0; step < steps; ++step) {
      const auto bits = masked.allowed();
      std::vector<g::TokenId> allowed;
      for (std::size_t t = 0; t < vocab->size(); ++t) {
        const auto id = static_cast<g::TokenId>(t);
        const bool got = (bits[t >> 6] >> (t & 63)) & 1;
        const bool want = reference.allows(id);
        ASSERT_EQ(got, want) << name << ": after '" << text << "', token " << t << " '" << vocab->piece(id) << "'";
        if (got) allowed.push_back(id);
      }
      ASSERT_EQ(((bits[static_cast<std::size_t>(end_token) >> 6] >> (end_token & 63)) & 1) != 0, reference.complete());
      ++states, allowed_total += allowed.size();
      if (allowed.empty() || (allowed.size() == 1 && allowed[0] == end_token)) break;
      // Half the time one byte (a bounded string then meets every remaining length), else
      // any allowed token.
      g::TokenId next = allowed[std::uniform_int_distribution<std::size_t>(0, allowed.size() - 1)(rng)];
      if (rng() % 2) {
        std::vector<g::TokenId> bytes;
        for (const g::TokenId id : allowed)
          if (id < 256) bytes.push_back(id);
        if (!bytes.empty()) next = bytes[std::uniform_int_distribution<std::size_t>(0, bytes.size() - 1)(rng)];
      }
      if (next == end_token) break;
      ASSERT_TRUE(masked.accept_token(next));
      ASSERT_TRUE(reference.accept_token(next));
      text += vocab->piece(next);
    }
  }
  EXPECT_GT(states, static_cast<std::size_t>(walks) * 5) << name;
  EXPECT_GT(allowed_total, states) << name;  // not only states that allow nothing
}

std::shared_ptr<const g::Grammar> gbnf(std::string_view text) { return std::make_shared<const g::Grammar>(g::parse_gbnf(text)); }
std::shared_ptr<const g::Grammar> schema(std::string_view text) {
  return std::make_shared<const g::Grammar>(g::from_json_schema_text(text));
}

TEST(GrammarMask, BoundedJsonStringsAtEveryLength) {
  expect_masks_match(schema(R"({"type": "object", "properties": {
      "s": {"type": "string", "maxLength": 9}, "t": {"type": "string", "minLength": 2, "maxLength": 30},
      "u": {"type": "string"}, "n": {"type": "integer"}}, "required": ["s", "t", "u", "n"]})"),
                     "bounded strings", 1, 40, 60);
}

TEST(GrammarMask, AnyJson) { expect_masks_match(gbnf(g::any_json_gbnf()), "any JSON", 2, 30, 40); }

TEST(GrammarMask, NonAsciiClassesAndControlCharacters) {
  // A loop that holds some characters beyond ASCII and not others; one that allows a tab
  // but not a line break; a bounded any-character run; a literal after a repetition.
  expect_masks_match(gbnf(R"(
    root ::= ( word | line | any )+ "."?
    word ::= "<" [a-zé-ü α-ω]{0,14} ">"
    line ::= "#" [^\n]* "\n"
    any ::= "'" [^']{1,25} "'"
  )"),
                     "classes", 3, 40, 50);
}

// A run whose sets refuse control characters, and right after it one that takes one: a
// token ending in "\n" fits only when the run is over.
TEST(GrammarMask, ControlCharacterRightAfterALoop) {
  expect_masks_match(gbnf(R"(root ::= ( "x" [a-z]{3} "\n" | "y" [a-z]{0,4} "\t" | " " )+)"), "loop then control", 5, 40, 30);
}

// Strings whose room is more than a plain token's most characters, and tokens longer than
// that (Note [Plain tokens]: those are walked).
TEST(GrammarMask, LongStringsAndLongTokens) {
  expect_masks_match(schema(R"({"type": "object", "properties": {
      "s": {"type": "string", "maxLength": 258}, "u": {"type": "string"}}, "required": ["s", "u"]})"),
                     "long strings", 6, 12, 30);
}

// A loop of every plain character whose depth is exact but whose end still takes plain
// text (a narrower class): a plain token longer than the depth may be allowed there, so
// its mask is not made from the plain tokens' lengths.
TEST(GrammarMask, PlainTextGoesOnAfterTheLoop) {
  expect_masks_match(gbnf(R"(root ::= ( "<" [^"\\\x00-\x1f\x7f]{2,3} [a-z ]* ">" | "(" [^"\\\x00-\x1f\x7f]{0,4} "\"" )+)"),
                     "plain text after the loop", 7, 40, 30);
}

// The same with an end that takes only characters beyond ASCII: "ééé" then "é" fits
// where "aaa" then "a" does not.
TEST(GrammarMask, PlainTextBeyondAsciiAfterTheLoop) {
  expect_masks_match(gbnf(R"(root ::= ( "<" [^"\\\x00-\x1f\x7f]{3} [é-ü] | " " )+)"), "non-ASCII after the loop", 9, 40, 30);
}

// Tokens of plain text then a control character (Note [Plain tokens]): refused along a
// loop that refuses control characters unless the set it ends in takes one; allowed along
// one that takes them.
TEST(GrammarMask, ControlCharacterAfterPlainText) {
  expect_masks_match(gbnf(R"(root ::= ( "(" [^"\\\x00-\x1f\x7f]{3} "\n" | "<" [^"\\]{1,6} "\"" | " " )+)"),
                     "control after plain text", 8, 40, 30);
}

TEST(GrammarMask, UnboundedLoopsAndEnd) {
  expect_masks_match(gbnf(R"(root ::= "\"" [^"\\]* "\"" ( " " [a-z]+ )*)"), "unbounded", 4, 30, 40);
}

}  // namespace
