// Tokenizer unit tests on small synthetic vocabularies; expected ids are worked out by hand
// from the merge rules (see the comments), not taken from our own output.
#include <gtest/gtest.h>

#include <random>

#include "fucina/core/error.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/tokenizer/bpe_model.hpp"
#include "fucina/tokenizer/pretokenizer.hpp"
#include "fucina/tokenizer/pretokenizer_spec.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "fucina/tokenizer/utf8.hpp"

namespace fucina::tokenizer {
namespace {

using Ids = std::vector<TokenId>;

std::string enc_byte(unsigned b) {
  std::string s;
  append_utf8(s, BpeModel::byte_to_cpt(static_cast<std::uint8_t>(b)));
  return s;
}
std::string enc(std::string_view raw) {
  std::string s;
  for (const char c : raw) s += enc_byte(static_cast<unsigned char>(c));
  return s;
}

// Byte-level BPE: ids 0..255 are the bytes themselves, then the merges' results in order.
TokenizerData bpe_data(std::string pre = "gpt-2") {
  TokenizerData d;
  d.model = "gpt2";
  d.pre = std::move(pre);
  for (unsigned b = 0; b < 256; ++b) d.tokens.push_back(enc_byte(b));
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"a", "a"}, {"b", "c"}, {"a", "b"}};
  for (const auto& [a, b] : merges) {
    d.merges.push_back(enc(a) + " " + enc(b));
    d.tokens.push_back(enc(a + b));
  }
  // 256 he, 257 ll, 258 hell, 259 hello, 260 " w", 261 aa, 262 bc, 263 ab
  d.tokens.push_back("<|end|>");  // 264, control
  d.token_types.assign(d.tokens.size(), static_cast<std::int32_t>(TokenType::Normal));
  d.token_types.back() = static_cast<std::int32_t>(TokenType::Control);
  d.eos_id = 264;
  return d;
}

// SPM: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0xXX>, then normal pieces with scores.
TokenizerData spm_data() {
  TokenizerData d;
  d.model = "llama";
  const auto add = [&](std::string t, float score, TokenType type) {
    d.tokens.push_back(std::move(t));
    d.scores.push_back(score);
    d.token_types.push_back(static_cast<std::int32_t>(type));
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::Byte);
  add("\xE2\x96\x81", -5, TokenType::Normal);              // 259 ▁
  add("a", -1, TokenType::Normal);                         // 260
  add("b", -1, TokenType::Normal);                         // 261
  add("c", -1, TokenType::Normal);                         // 262
  add("ab", -2, TokenType::Normal);                        // 263
  add("bc", -0.5f, TokenType::Normal);                     // 264
  add("\xE2\x96\x81" "a", -3, TokenType::Normal);          // 265 ▁a
  add("<|user|>", 0, TokenType::UserDefined);              // 266
  add("<ctl>", 0, TokenType::Control);                     // 267
  add("xy", 0, TokenType::UserDefined);                    // 268
  add("yzw", 0, TokenType::UserDefined);                   // 269
  return d;
}

constexpr EncodeOptions raw_opts{.add_special = false, .parse_special = false};

// ---------------------------------------------------------------- UTF-8

TEST(Utf8, LenientDecodeFollowsLlamaCpp) {
  const auto dec = [](std::string_view s, std::size_t expect_pos) {
    std::size_t pos = 0;
    const std::uint32_t c = decode_utf8_lenient(s, pos);
    EXPECT_EQ(pos, expect_pos) << s.size();
    return c;
  };
  EXPECT_EQ(dec("\xC3\xA9", 2), 0xE9u);
  EXPECT_EQ(dec("\xF0\x9F\xA6\x99", 4), 0x1F999u);
  EXPECT_EQ(dec("\xC3", 1), replacement_char);  // truncated: one byte consumed
  EXPECT_EQ(dec("\x80", 1), replacement_char);  // stray continuation
  EXPECT_EQ(dec("\xC0\x80", 2), 0u);            // overlong accepted
  EXPECT_EQ(dec("\xED\xA0\x80", 3), 0xD800u);   // surrogate accepted
  EXPECT_EQ(dec("\xF4\x90\x80\x80", 4), replacement_char);
  EXPECT_EQ(dec("\xFF", 1), replacement_char);
}

TEST(Utf8, CanonicalizeAndValidate) {
  std::string out;
  EXPECT_FALSE(canonicalize_utf8("plain \xC3\xA9", out));
  EXPECT_TRUE(canonicalize_utf8("a\xFF" "b", out));
  EXPECT_EQ(out, "a\xEF\xBF\xBD" "b");
  EXPECT_TRUE(canonicalize_utf8("\xC0\x80", out));
  EXPECT_EQ(out, std::string(1, '\0'));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));
  EXPECT_TRUE(is_valid_utf8("\xE2\x82\xAC"));
}

TEST(Utf8, CompletePrefixHoldsUnfinishedSequences) {
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\xA6\x99"), 6u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
}

// ---------------------------------------------------------------- pre-tokenizer

TEST(PreTokenizer, Gpt2SplitsWordsAndTrailingSpace) {
  const auto p = PreTokenizer::for_name("gpt-2");
  // "  !!" : \s+(?!\S) leaves the last space to join " !!".
  EXPECT_EQ(p.split_strings("Hello world  !!\n"),
            (std::vector<std::string>{"Hello", " world", " ", " !!", "\n"}));
  EXPECT_EQ(p.split_strings("it's 42"), (std::vector<std::string>{"it", "'s", " 42"}));
}

TEST(PreTokenizer, WhitespaceIsLlamaCppSetNotPcre2s) {
  // U+180E is not White_Space for llama.cpp (PCRE2's \s would take it): it is "other".
  const auto p = PreTokenizer::for_name("gpt-2");
  EXPECT_EQ(p.split_strings("a\xE1\xA0\x8E\xE1\xA0\x8E" "b"),
            (std::vector<std::string>{"a", "\xE1\xA0\x8E\xE1\xA0\x8E", "b"}));
  // U+3000 is whitespace, but " ?\p{L}+" only takes an ASCII space: the last one is a gap.
  EXPECT_EQ(p.split_strings("x\xE3\x80\x80\xE3\x80\x80y"),
            (std::vector<std::string>{"x", "\xE3\x80\x80", "\xE3\x80\x80", "y"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  const auto p = PreTokenizer::for_name("llama-bpe");
  EXPECT_EQ(p.split_strings("1234567"), (std::vector<std::string>{"123", "456", "7"}));
  const auto q = PreTokenizer::for_name("qwen2");
  EXPECT_EQ(q.split_strings("123"), (std::vector<std::string>{"1", "2", "3"}));
}

TEST(PreTokenizer, RegexesApplyInSequenceAndDollarIsPieceEnd) {
  const std::vector<std::string> pats = {"[0-9]+", "a$"};
  const PreTokenizer p(pats);
  // "xa\n" must not match a$ (no "before final newline"), "9a" piece ends in a.
  EXPECT_EQ(p.split_strings("xa\n1xa"), (std::vector<std::string>{"xa\n", "1", "x", "a"}));
}

TEST(PreTokenizer, EmptyMatchesDoNotLoop) {
  // std::regex_iterator (llama.cpp) reports an empty match at every position, which cuts
  // the gaps into single characters; the empty pieces themselves carry no text.
  const std::vector<std::string> pats = {"x*"};
  const PreTokenizer p(pats);
  EXPECT_EQ(p.split_strings("abxc"), (std::vector<std::string>{"a", "b", "x", "c"}));
}

TEST(PreTokenizer, BadNamesAndPatternsThrow) {
  EXPECT_THROW(PreTokenizer::for_name("no-such-pre"), Error);
  const std::vector<std::string> bad = {"("};
  EXPECT_THROW(PreTokenizer p(bad), Error);
  for (const auto& spec : pretokenizer_specs()) EXPECT_NO_THROW(PreTokenizer p(spec.patterns)) << spec.names[0];
}

// ---------------------------------------------------------------- BPE

TEST(Bpe, MergesLowestRankFirst) {
  const Tokenizer tok(bpe_data());
  // h e l l o -> he(0) -> ll(1) -> hell(2) -> hello(3)
  EXPECT_EQ(tok.encode("hello", raw_opts), (Ids{259}));
  // " world": " w"(4) then o r l d stay bytes
  EXPECT_EQ(tok.encode(" world", raw_opts), (Ids{260, 'o', 'r', 'l', 'd'}));
  // "abc": b c has rank 6 < a b rank 7, so bc wins: a + bc
  EXPECT_EQ(tok.encode("abc", raw_opts), (Ids{'a', 262}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  const Tokenizer tok(bpe_data());
  EXPECT_EQ(tok.encode("aaa", raw_opts), (Ids{261, 'a'}));
  EXPECT_EQ(tok.encode("aaaa", raw_opts), (Ids{261, 261}));
}

TEST(Bpe, InvalidUtf8BecomesReplacementCharacter) {
  const Tokenizer tok(bpe_data());
  EXPECT_EQ(tok.encode("\xFF", raw_opts), (Ids{0xEF, 0xBF, 0xBD}));
  EXPECT_EQ(tok.encode("\xC0\x80", raw_opts), (Ids{0}));  // overlong NUL -> NUL
}

TEST(Bpe, IgnoreMergesEmitsWholeWordTokens) {
  auto d = bpe_data("llama-bpe");  // ignore_merges family
  d.tokens.push_back(enc("xyz"));  // 265, reachable by no merge
  d.token_types.push_back(1);
  const Tokenizer tok(std::move(d));
  EXPECT_EQ(tok.encode("xyz", raw_opts), (Ids{265}));
  const Tokenizer plain(bpe_data());
  EXPECT_EQ(plain.encode("xyz", raw_opts), (Ids{'x', 'y', 'z'}));
}

TEST(Bpe, SpecialTokensOnlyWhenAsked) {
  const Tokenizer tok(bpe_data());
  EXPECT_EQ(tok.encode("a<|end|>", {.add_special = false, .parse_special = true}), (Ids{'a', 264}));
  const Ids plain = tok.encode("a<|end|>", raw_opts);
  EXPECT_EQ(plain.size(), 8u);  // a, <|, end, |> as single bytes (no merges for them)
  EXPECT_TRUE(tok.is_eog(264));
}

TEST(Bpe, HarmonyEndIsUserDefinedNotEog) {
  // llama.cpp: with <|return|> and <|call|> present, <|end|> is an ordinary user-defined
  // token (cut from text even without parse_special) and does not end generation.
  auto d = bpe_data();
  d.eos_id = std::nullopt;
  for (const char* t : {"<|return|>", "<|call|>"}) {
    d.tokens.push_back(t);
    d.token_types.push_back(static_cast<std::int32_t>(TokenType::Control));
  }
  const Tokenizer tok(std::move(d));
  EXPECT_FALSE(tok.is_eog(264));
  EXPECT_TRUE(tok.is_eog(265));
  EXPECT_EQ(tok.token_attr(264), static_cast<std::uint32_t>(attr_user_defined));
  EXPECT_EQ(tok.encode("a<|end|>", raw_opts), (Ids{'a', 264}));
}

TEST(Bpe, DecodeIsByteExactAndCleansSpacesOnRequest) {
  const Tokenizer tok(bpe_data());
  EXPECT_EQ(tok.decode(Ids{259, 260, 'o'}), "hello wo");
  EXPECT_EQ(tok.decode(Ids{'a', ' ', ','}), "a ,");
  EXPECT_EQ(tok.decode(Ids{'a', ' ', ','}, {.clean_spaces = true}), "a,");  // gpt-2 asks for it
  EXPECT_EQ(tok.decode(Ids{264}), "");
  EXPECT_EQ(tok.decode(Ids{264}, {.render_special = true}), "<|end|>");
}

TEST(Bpe, RoundTripsRandomUtf8) {
  const Tokenizer tok(bpe_data());
  std::mt19937 rng(7);
  const std::vector<std::uint32_t> pool = {'a', 'b', 'h', 'e', 'l', 'o', ' ', ' ', '\n', '\t', '1', '\'',
                                           0xE9, 0x4E16, 0x1F999, 0x3000, 0x0301, 0x05D0};
  for (int iter = 0; iter < 200; ++iter) {
    std::string s;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) append_utf8(s, pool[rng() % pool.size()]);
    EXPECT_EQ(tok.decode(tok.encode(s, raw_opts)), s);
  }
}

// ---------------------------------------------------------------- SPM

TEST(Spm, HighestScoreFirstWithSpacePrefix) {
  const Tokenizer tok(spm_data());
  // "▁abc": bc(-0.5) first, then ▁a(-3); ab is stale by then.
  EXPECT_EQ(tok.encode("abc", raw_opts), (Ids{265, 264}));
  EXPECT_EQ(tok.encode("abc"), (Ids{1, 265, 264}));  // add_bos defaults to true for llama
}

TEST(Spm, ByteFallbackForUnknownCharacters) {
  const Tokenizer tok(spm_data());
  // "▁é": no token for é -> <0xC3> <0xA9>
  EXPECT_EQ(tok.encode("\xC3\xA9", raw_opts), (Ids{259, 3 + 0xC3, 3 + 0xA9}));
}

TEST(Spm, SpecialPartitionIsLongestFirstAndPrefixesAfterSpecials) {
  const Tokenizer tok(spm_data());
  // User-defined tokens are cut even without parse_special; after one, "b" gets "▁b".
  EXPECT_EQ(tok.encode("a<|user|>b", raw_opts), (Ids{265, 266, 259, 261}));
  EXPECT_EQ(tok.encode("a<ctl>b", {.add_special = false, .parse_special = true}), (Ids{265, 267, 259, 261}));
  // "yzw" (longer) is cut before "xy", even though "xy" starts first.
  EXPECT_EQ(tok.encode("xyzw", raw_opts), (Ids{259, 3 + 'x', 269}));
}

TEST(Spm, Phi3NameTurnsOnRstripOfSpecials) {
  auto d = spm_data();
  d.model_name = "Phi-3 mini";
  const Tokenizer tok(std::move(d));
  EXPECT_TRUE(tok.token_attr(266) & attr_rstrip);
  EXPECT_FALSE(tok.token_attr(1) & attr_rstrip);
  // The spaces after <|user|> are stripped, then "b" gets the usual prefix.
  EXPECT_EQ(tok.encode("a<|user|>   b", raw_opts), (Ids{265, 266, 259, 261}));
}

TEST(Spm, DecodeStripsThePrefixSpaceLikeLlamaCpp) {
  const Tokenizer tok(spm_data());
  EXPECT_EQ(tok.decode(Ids{265, 264}), "abc");
  EXPECT_EQ(tok.decode(Ids{259, 3 + 0xC3, 3 + 0xA9}), "\xC3\xA9");
  // BOS (hidden) takes the strip, as in llama.cpp's detokenize.
  EXPECT_EQ(tok.decode(Ids{1, 265}), " a");
  EXPECT_EQ(tok.decode(Ids{1, 265}, {.render_special = true}), "<s> a");
}

TEST(Spm, RoundTripsRandomUtf8) {
  const Tokenizer tok(spm_data());
  std::mt19937 rng(11);
  const std::vector<std::uint32_t> pool = {'a', 'b', 'c', ' ', ' ', '\n', 'z', 0xE9, 0x4E16, 0x1F999, 0x0301};
  for (int iter = 0; iter < 200; ++iter) {
    std::string s;
    const int n = static_cast<int>(rng() % 20);
    for (int k = 0; k < n; ++k) append_utf8(s, pool[rng() % pool.size()]);
    EXPECT_EQ(tok.decode(tok.encode(s, raw_opts)), s);
  }
}

TEST(Spm, ChunkedFastPathEqualsWholeTextMerge) {
  // Vocab B has a token with "q▁" inside, which disables the cut-at-"▁" fast path; q never
  // occurs in the texts, so both vocabularies must give identical ids on long inputs.
  TokenizerData b = spm_data();
  b.tokens.push_back("q\xE2\x96\x81z");
  b.scores.push_back(0);
  b.token_types.push_back(1);
  const Tokenizer fast(spm_data());
  const Tokenizer whole(std::move(b));
  std::mt19937 rng(5);
  const std::vector<std::string> pool = {"a", "b", "c", "ab", " ", "  ", "\n", "\xC3\xA9", "\xE0", "\xE2\x96", "<|user|>", "\xE2\x96\x81"};
  for (int iter = 0; iter < 20; ++iter) {
    std::string s;
    while (s.size() < 2000) s += pool[rng() % pool.size()];
    EXPECT_EQ(fast.encode(s), whole.encode(s));
  }
}

TEST(StreamDecoder, HoldsIncompleteUtf8) {
  const Tokenizer tok(spm_data());
  StreamDecoder sd(tok);
  EXPECT_EQ(sd.push(265), "a");  // "▁a" with the prefix space stripped
  EXPECT_EQ(sd.push(3 + 0xF0), "");
  EXPECT_EQ(sd.push(3 + 0x9F), "");
  EXPECT_EQ(sd.push(3 + 0xA6), "");
  EXPECT_EQ(sd.push(3 + 0x99), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(sd.push(3 + 0xC3), "");
  EXPECT_EQ(sd.flush(), "\xC3");
}

// A completion continues its prompt: the first piece keeps its SPM space, as llama.cpp's
// token_to_piece prints it ("a little" + " Rey", not "a little" + "Rey").
TEST(StreamDecoder, ContinuingTextKeepsTheLeadingSpace) {
  const Tokenizer tok(spm_data());
  const std::vector<TokenId> ids = {265, 265};
  StreamDecoder start(tok);
  StreamDecoder cont(tok, {.continues_text = true});
  EXPECT_EQ(start.push(265), "a");
  EXPECT_EQ(start.push(265), " a");
  EXPECT_EQ(cont.push(265), " a");
  EXPECT_EQ(cont.push(265), " a");
  EXPECT_EQ(tok.decode(ids), "a a");
  EXPECT_EQ(tok.decode(ids, {.continues_text = true}), " a a");
  EXPECT_EQ(tok.decode(ids, {.continues_text = true}), std::string(tok.piece(265, false)) + std::string(tok.piece(265, false)));
}

// ---------------------------------------------------------------- errors and loading

TEST(TokenizerErrors, BadDataThrowsNotCrashes) {
  TokenizerData d = spm_data();
  d.model = "bert";
  EXPECT_THROW(Tokenizer t(d), Error);
  TokenizerData empty;
  empty.model = "llama";
  EXPECT_THROW(Tokenizer t(empty), Error);
  TokenizerData short_scores = spm_data();
  short_scores.scores.resize(3);
  EXPECT_THROW(Tokenizer t(short_scores), Error);
  EXPECT_THROW(Tokenizer t(bpe_data("nope")), Error);
  const Tokenizer tok(spm_data());
  EXPECT_THROW((void)tok.piece(-1), Error);
  EXPECT_THROW((void)tok.decode(Ids{100000}), Error);
  TokenizerData no_bos = bpe_data();
  no_bos.add_bos = true;
  no_bos.bos_id = 99999;  // out of range: falls back to the default 11
  EXPECT_EQ(Tokenizer(no_bos).bos_id(), 11);
}

TEST(LoadGguf, ReadsTokenizerKeys) {
  const TokenizerData src = spm_data();
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "tiny");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(src.tokens));
  w.set_array<float>("tokenizer.ggml.scores", src.scores);
  w.set_array<std::int32_t>("tokenizer.ggml.token_type", src.token_types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.chat_template", "{{ messages }}");
  const auto file = gguf::Reader::parse(w.to_bytes());
  const TokenizerData d = load_tokenizer_data(file);
  EXPECT_EQ(d.tokens, src.tokens);
  EXPECT_EQ(d.model_name, "tiny");
  ASSERT_TRUE(d.add_bos.has_value());
  EXPECT_FALSE(*d.add_bos);
  const Tokenizer tok(d);
  EXPECT_EQ(tok.encode("abc"), (Ids{265, 264}));  // add_bos=false from the file
  EXPECT_EQ(tok.chat_template(), "{{ messages }}");

  // A special id past the vocabulary is a broken file, not silently replaced.
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(src.tokens.size()));
  try {
    (void)load_tokenizer_data(gguf::Reader::parse(w.to_bytes()));
    ADD_FAILURE() << "an out-of-vocabulary BOS id was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bos_token_id"), std::string::npos) << e.what();
  }

  gguf::Writer bad;
  bad.set_string("tokenizer.ggml.model", "llama");
  EXPECT_THROW(load_tokenizer_data(gguf::Reader::parse(bad.to_bytes())), Error);
  bad.set_string("tokenizer.ggml.tokens", "not an array");
  EXPECT_THROW(load_tokenizer_data(gguf::Reader::parse(bad.to_bytes())), Error);
}

}  // namespace
}  // namespace fucina::tokenizer
