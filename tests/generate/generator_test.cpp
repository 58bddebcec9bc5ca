// The generation API (generate/generator.hpp) on a small synthetic model: every sampled
// token reaches the callback and the texts add up to the result; each stop reason
// (length, EOS, stop string, full context, cancellation) ends the loop where it should;
// a chat turn fed over a reused cache continues exactly as the full render fed afresh;
// `fucina run` prints exactly what the API returns; a grammar holds the text to its language.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "fucina/generate/chat.hpp"
#include "fucina/generate/generator.hpp"
#include "fucina/grammar/grammar.hpp"
#include "fucina/model/synth.hpp"
#include "fucina/tokenizer/utf8.hpp"
#include "support/run_cli.hpp"
#include "support/tiny_model_test.hpp"

namespace fucina::generate {
void PrintTo(StopReason reason, std::ostream* os) { *os << to_string(reason); }  // gtest messages
}  // namespace fucina::generate

namespace {

using namespace fucina;
using generate::Generator;
using generate::Request;
using generate::Result;
using generate::StopReason;

class GeneratorTest : public test::TinyModelTest {
 protected:
  Generator make(sample::SamplerConfig sampling = greedy(), std::int64_t n_ctx = 0) {
    return Generator(*model_, *tok_, ctx_, {.n_ctx = n_ctx, .sampling = sampling});
  }
  // Feeds `prompt` to a fresh generator and generates.
  Result run(const std::string& prompt, Request request, sample::SamplerConfig sampling = greedy(), std::int64_t n_ctx = 0) {
    Generator g = make(sampling, n_ctx);
    g.feed_prompt(ids(prompt));
    return g.generate(request);
  }
};

TEST_F(GeneratorTest, CallbackSeesEveryToken) {
  struct Seen {
    tokenizer::TokenId token, argmax;
    std::size_t n_logits;
    std::string text;
  };
  std::vector<Seen> steps;  // the logits are valid during the call only: keep what they say
  const Result r = run("Hello", {.max_tokens = 12, .on_step = [&](const generate::Step& s) {
                                   steps.push_back({s.token, s.logits.empty() ? -1 : sample::argmax(s.logits), s.logits.size(),
                                                    std::string(s.text)});
                                 }});
  ASSERT_EQ(generate::to_string(r.reason), "length");
  ASSERT_EQ(r.tokens.size(), 12u);
  ASSERT_EQ(steps.size(), 13u);  // 12 tokens, then the flush
  std::string joined;
  int held = 0;  // tokens whose bytes wait for the rest of their UTF-8 character
  for (std::size_t i = 0; i < steps.size(); ++i) {
    joined += steps[i].text;
    if (i < 12) {
      EXPECT_EQ(tokenizer::utf8_complete_prefix(steps[i].text), steps[i].text.size()) << "step " << i;
      held += steps[i].text.empty() && !tok_->piece(steps[i].token, false).empty();
      EXPECT_EQ(steps[i].token, r.tokens[i]);
      EXPECT_EQ(steps[i].n_logits, static_cast<std::size_t>(model_->config().n_vocab));
      EXPECT_EQ(steps[i].argmax, r.tokens[i]);  // greedy: the row's argmax
    }
  }
  EXPECT_GT(held, 0) << "this completion no longer splits a character across byte tokens";
  EXPECT_EQ(steps.back().token, tokenizer::null_token);
  EXPECT_EQ(steps.back().n_logits, 0u);
  EXPECT_EQ(joined, r.text);
  // The text is the tokens' pieces, the first one's SPM space included.
  EXPECT_EQ(r.text, tok_->decode(r.tokens, {.continues_text = true}));
  EXPECT_EQ(r.timings.gen_tokens, 12);
  EXPECT_EQ(r.timings.prompt_tokens, static_cast<std::int64_t>(ids("Hello").size()));
}

TEST_F(GeneratorTest, LengthStopsAtMaxTokens) {
  const Result five = run("abc", {.max_tokens = 5});
  EXPECT_EQ(five.reason, StopReason::Length);
  EXPECT_EQ(five.tokens.size(), 5u);
  const Result none = run("abc", {.max_tokens = 0});
  EXPECT_EQ(none.reason, StopReason::Length);
  EXPECT_TRUE(none.tokens.empty());
  EXPECT_EQ(none.text, "");
  // Greedy is a pure function of the prompt: the longer run starts with the shorter one.
  const Result ten = run("abc", {.max_tokens = 10});
  EXPECT_TRUE(std::equal(five.tokens.begin(), five.tokens.end(), ten.tokens.begin()));
  EXPECT_EQ(generate::to_string(StopReason::Length), "length");
}

TEST_F(GeneratorTest, GeneratingAgainContinuesTheText) {
  const Result whole = run("abc", {.max_tokens = 10});
  ASSERT_EQ(whole.reason, StopReason::Length);
  Generator g = make();
  g.feed_prompt(ids("abc"));
  const Result a = g.generate({.max_tokens = 4});
  const Result b = g.generate({.max_tokens = 6});
  std::vector<tokenizer::TokenId> joined = a.tokens;
  joined.insert(joined.end(), b.tokens.begin(), b.tokens.end());
  EXPECT_EQ(joined, whole.tokens);
  EXPECT_EQ(a.text + b.text, whole.text);
}

TEST_F(GeneratorTest, CancellationStopsWithinOneToken) {
  std::atomic<bool> cancel{false};
  std::size_t seen = 0;
  const Result r = run("abc", {.max_tokens = 50, .cancel = &cancel, .on_step = [&](const generate::Step& s) {
                                 if (s.token == tokenizer::null_token) return;
                                 if (++seen == 3) cancel = true;
                               }});
  EXPECT_EQ(r.reason, StopReason::Cancelled);
  EXPECT_EQ(r.tokens.size(), 3u);  // no token after the one whose callback set the flag
  EXPECT_EQ(seen, 3u);
  EXPECT_EQ(generate::to_string(r.reason), "cancelled");
  // Set before generation: nothing is sampled.
  const Result none = run("abc", {.max_tokens = 50, .cancel = &cancel});
  EXPECT_EQ(none.reason, StopReason::Cancelled);
  EXPECT_TRUE(none.tokens.empty());
}

TEST_F(GeneratorTest, StopStringEndsTheTextBeforeIt) {
  const Result free = run("Hello", {.max_tokens = 24});
  ASSERT_GE(free.text.size(), 12u) << free.text;
  // A stop string taken from the middle of the free text: the text ends right before its
  // first occurrence and the stop string itself is never released to the callback.
  const std::string stop = free.text.substr(8, 3);
  const std::size_t at = free.text.find(stop);
  std::string streamed;
  const Result r = run("Hello", {.max_tokens = 24, .stops = {stop}, .on_step = [&](const generate::Step& s) { streamed += s.text; }});
  EXPECT_EQ(r.reason, StopReason::StopString);
  EXPECT_EQ(r.text, free.text.substr(0, at));
  EXPECT_EQ(streamed, r.text);
  EXPECT_LT(r.tokens.size(), free.tokens.size());
  EXPECT_EQ(generate::to_string(r.reason), "stop string");
}

TEST_F(GeneratorTest, EosEndsGenerationAndIsNotPrinted) {
  // Near-uniform sampling over the whole vocabulary reaches </s> long before 2000 tokens
  // (p = 1/354 a token); the seed makes the run reproducible.
  const sample::SamplerConfig flat{.temperature = 100.f, .top_k = 0, .top_p = 1.f, .min_p = 0.f, .seed = 11};
  const Result r = run("abc", {.max_tokens = -1}, flat);
  ASSERT_EQ(r.reason, StopReason::Eos) << r.tokens.size() << " tokens";
  EXPECT_TRUE(tok_->is_eog(r.tokens.back()));
  EXPECT_EQ(std::count_if(r.tokens.begin(), r.tokens.end(), [&](auto t) { return tok_->is_eog(t); }), 1);
  std::vector<tokenizer::TokenId> body(r.tokens.begin(), r.tokens.end() - 1);
  EXPECT_EQ(r.text, tok_->decode(body, {.continues_text = true}));
  // ignore_eos: the same draws go on past it.
  const Result on = run("abc", {.max_tokens = static_cast<std::int64_t>(r.tokens.size()) + 3, .ignore_eos = true}, flat);
  EXPECT_EQ(on.reason, StopReason::Length);
  EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), on.tokens.begin()));
  EXPECT_EQ(generate::to_string(r.reason), "eos");
}

TEST_F(GeneratorTest, RequestSamplingIsItsOwn) {
  const sample::SamplerConfig seeded{.repeat_penalty = 1.3f, .seed = 21};
  const Result alone = run("Hello", {.max_tokens = 16}, seeded);
  // A generator made for greedy decoding, its sampler used once already, then given the
  // seeded config by the request: the same tokens as a generator made with it.
  Generator g = make();
  g.feed_prompt(ids("Hello"));
  (void)g.generate({.max_tokens = 4});
  g.feed_prompt(ids("Hello"));
  const Result own = g.generate({.max_tokens = 16, .sampling = seeded});
  EXPECT_EQ(own.tokens, alone.tokens);
  EXPECT_NE(own.tokens, run("Hello", {.max_tokens = 16}).tokens);  // not greedy
}

TEST_F(GeneratorTest, ContextFullStopsAtTheCacheEnd) {
  const auto prompt = ids("abc");
  Generator g = make(greedy(), 16);
  g.feed_prompt(prompt);
  const Result r = g.generate({.max_tokens = -1});
  EXPECT_EQ(r.reason, StopReason::ContextFull);
  // Every token but the last went into the cache, which is now full.
  EXPECT_EQ(r.tokens.size(), 16 - prompt.size() + 1);
  EXPECT_EQ(g.cache().size(), 16);
  EXPECT_EQ(generate::to_string(r.reason), "context full");
  // A prompt that leaves no room is refused with the cache untouched.
  Generator small = make(greedy(), 4);
  EXPECT_THROW(small.feed_prompt(ids("abcdefgh")), Error);
  EXPECT_EQ(small.cache().size(), 0);
}

TEST_F(GeneratorTest, ChatTurnOverReusedCacheEqualsFreshRender) {
  std::vector<tokenizer::ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hello"}};
  const auto render = [&] {
    return tok_->encode(generate::render_chat(model_->file(), *tok_, messages, true), {.add_special = true, .parse_special = true});
  };
  // The cache now holds `prompt`; what follows is what a fresh generator makes of it.
  const auto expect_as_fresh = [&](Generator& g, const std::vector<tokenizer::TokenId>& prompt) {
    EXPECT_TRUE(std::equal(g.cached_tokens().begin(), g.cached_tokens().end(), prompt.begin(), prompt.end()));
    const Result reused = g.generate({.max_tokens = 12});
    Generator fresh = make();
    fresh.feed_prompt(prompt);
    const Result whole = fresh.generate({.max_tokens = 12});
    EXPECT_EQ(reused.tokens, whole.tokens);
    EXPECT_EQ(reused.text, whole.text);
    return reused;
  };
  Generator chat = make();
  const auto turn1 = render();
  EXPECT_EQ(chat.feed_prompt(turn1), static_cast<std::int64_t>(turn1.size()));
  messages.push_back({"assistant", expect_as_fresh(chat, turn1).text});
  messages.push_back({"user", "And then?"});
  // The next turn runs only what the cache does not share: at most the answer and the new
  // message (less when the answer's tokens are how its text encodes).
  const auto turn2 = render();
  const std::int64_t fed = chat.feed_prompt(turn2);
  EXPECT_LE(fed, static_cast<std::int64_t>(turn2.size() - turn1.size()));
  expect_as_fresh(chat, turn2);
  // An edited history: the part before the edit stays, the rest runs again.
  messages[1].content = "Goodbye";
  const auto edited = render();
  const std::int64_t refed = chat.feed_prompt(edited);
  EXPECT_LT(refed, static_cast<std::int64_t>(edited.size()));
  EXPECT_GT(refed, static_cast<std::int64_t>(edited.size() - turn1.size()));
  expect_as_fresh(chat, edited);
  // The same prompt again: only its last token runs (its logits are needed).
  EXPECT_EQ(chat.feed_prompt(edited), 1);
  expect_as_fresh(chat, edited);
}

TEST_F(GeneratorTest, CliPrintsWhatTheApiReturns) {
  FUCINA_REQUIRE_CLI();
  const sample::SamplerConfig sampling{.seed = 7};  // the CLI's defaults, seeded
  for (const bool echo : {false, true}) {
    const auto cli = test::run_fucina(fmt::format("run '{}' -p 'Once upon a time' -n 20 --seed 7 -t 2 --stop 'zz'{}",
                                                  path().string(), echo ? " --echo" : ""),
                                      test::Capture::Stdout);
    ASSERT_EQ(cli.status, 0);
    const Result r = run("Once upon a time", {.max_tokens = 20, .stops = {"zz"}}, sampling);
    EXPECT_EQ(cli.output, (echo ? "Once upon a time" : "") + r.text) << "echo " << echo;
  }
}

// Note [Constrained sampling]: at temperature 1 the text is a sentence of the grammar and
// ends with an end token; the streamed pieces add up to it.
TEST_F(GeneratorTest, GrammarHoldsTheTextToItsLanguage) {
  const auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= [a-c]{2,4} ("!" | "é"))"));
  const sample::SamplerConfig hot{.temperature = 1.f, .top_k = 0, .top_p = 1.f, .min_p = 0.f, .seed = 0};
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    std::string streamed;
    auto sampling = hot;
    sampling.seed = seed;
    const Result r = run("x", {.max_tokens = 30, .grammar = g, .on_step = [&](const generate::Step& st) { streamed += st.text; }},
                         sampling);
    EXPECT_EQ(r.reason, StopReason::Eos) << r.text;
    EXPECT_EQ(streamed, r.text);
    ASSERT_GE(r.text.size(), 3u) << r.text;
    const std::string tail = r.text.back() == '!' ? "!" : "é";
    const std::string body = r.text.substr(0, r.text.size() - tail.size());
    EXPECT_TRUE(r.text.ends_with(tail)) << r.text;
    EXPECT_TRUE(body.size() >= 2 && body.size() <= 4 && body.find_first_not_of("abc") == std::string::npos) << r.text;
    EXPECT_TRUE(tok_->is_eog(r.tokens.back()));
  }
}

// Greedy under a grammar picks the highest logit among the tokens the grammar allows.
TEST_F(GeneratorTest, GrammarGreedyTakesTheBestAllowedToken) {
  const auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= "q" [0-9]+)"));
  Generator gen = make();
  gen.feed_prompt(ids("Once upon a time"));
  std::vector<float> masked(gen.logits().begin(), gen.logits().end());
  grammar::Matcher m(g, generate::grammar_vocabulary(*tok_));
  ASSERT_GT(m.mask(masked), 0u);
  const Result r = gen.generate({.max_tokens = 1, .grammar = g});
  ASSERT_EQ(r.tokens.size(), 1u);
  EXPECT_EQ(r.tokens[0], sample::argmax(masked));
  EXPECT_EQ(r.reason, StopReason::Length);  // cut: "q" alone is not a sentence
  EXPECT_EQ(r.text, "q");
}

}  // namespace
