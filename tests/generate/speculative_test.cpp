// Note [Speculative decoding]: drafts from the context (Note [N-gram drafts]), their length
// and the cost gate (Note [Draft length]), and the lossless verification: greedy output
// byte-identical to plain decoding on every synth architecture and weight format and on
// the shared models, seeded sampling identical too, the sampled distribution exactly the
// model's (chi-square over seeds), grammars cutting the drafts they refuse, and `fucina run
// --spec` printing the same bytes either way. Note [Speculative batches]: concurrent
// sequences of a BatchGenerator, each speculating, print what plain decoding prints.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fucina/generate/batch_generator.hpp"
#include "fucina/generate/draft.hpp"
#include "fucina/generate/draft_length.hpp"
#include "fucina/generate/generator.hpp"
#include "fucina/grammar/matcher.hpp"
#include "support/run_cli.hpp"
#include "support/synth_model.hpp"
#include "support/tiny_model_test.hpp"

namespace {

using namespace fucina;
using generate::DraftLength;
using generate::Generator;
using generate::NgramDrafter;
using generate::Request;
using generate::Result;
using tokenizer::TokenId;

std::vector<TokenId> ids(std::initializer_list<int> v) { return {v.begin(), v.end()}; }

// ---- drafts ----

TEST(NgramDrafter, CopiesWhatFollowedTheLongestEarlierMatch) {
  NgramDrafter d;
  // "5 6 7" followed by 8 9 10 earlier, and "7" alone by 1 elsewhere: the 3-gram decides.
  d.reset(ids({5, 6, 7, 8, 9, 10, 11, 2, 7, 1, 3, 7, 1, 4, 5, 6, 7}));
  EXPECT_EQ(d.draft(4), ids({8, 9, 10, 11}));
  EXPECT_EQ(d.draft(2), ids({8, 9}));
  EXPECT_EQ(d.draft(0), ids({}));
}

TEST(NgramDrafter, ALoopContinuesPastTheContext) {
  NgramDrafter d;
  d.reset(ids({1, 2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(d.draft(7), ids({2, 3, 1, 2, 3, 1, 2}));  // drafted tokens extend the tip
}

TEST(NgramDrafter, NothingMatchesNothingIsDrafted) {
  NgramDrafter d;
  d.reset(ids({1, 2, 3, 4, 5}));
  EXPECT_TRUE(d.draft(4).empty());  // 5 never occurred before
  d.push(1);                        // "1" seen once before: too weak alone
  EXPECT_TRUE(d.draft(4).empty());
  d.reset(ids({1, 2, 9, 1, 2, 8, 1}));  // "1" twice followed by 2: a 1-gram vote
  EXPECT_EQ(d.draft(1), ids({2}));
}

TEST(NgramDrafter, TheMostFrequentFollowerWinsThenTheLatest) {
  NgramDrafter d;
  d.reset(ids({4, 1, 4, 2, 4, 1, 4, 3, 4}));  // after "4": 1 twice, 2 once, 3 once
  EXPECT_EQ(d.draft(1), ids({1}));
  d.reset(ids({4, 1, 9, 4, 2, 8, 4, 1, 7, 4, 2, 6, 4}));  // 1 and 2 twice each: the latest
  EXPECT_EQ(d.draft(1), ids({2}));
}

TEST(DraftLength, FollowsTheAcceptanceRateAndGatesWhenItIsLow) {
  DraftLength len({.draft_max = 16, .draft_min = 1});
  const auto start = len.next();
  EXPECT_GE(start, 1);
  for (int i = 0; i < 40; ++i) len.record(8, 8);  // every drafted token right
  EXPECT_EQ(len.next(), 16);
  for (int i = 0; i < 40; ++i) len.record(1, 0);  // every one wrong: the gate shuts
  EXPECT_EQ(len.next(), 0);
  for (int i = 0; i < 40; ++i) len.record(1, 1);  // the free guesses come right again
  EXPECT_GE(len.next(), 8);
  DraftLength capped({.draft_max = 3, .draft_min = 2});
  for (int i = 0; i < 40; ++i) capped.record(8, 8);
  EXPECT_EQ(capped.next(), 3);
}

// Note [Draft length]: the row cost follows the forwards' times (given here, not measured):
// rows that cost half a plain step each make drafts of a ~50% acceptance rate not pay, and
// shorten those of a high one; in a batch the plain step has a row per sequence.
TEST(DraftLength, TheRowCostFollowsTheTimedForwards) {
  DraftLength cheap({.draft_max = 16, .draft_min = 1}), dear({.draft_max = 16, .draft_min = 1});
  for (int i = 0; i < 60; ++i) {
    cheap.record(2, 1), dear.record(2, 1);      // a ~ 0.5
    dear.timed(1, 1, 1e-3), dear.timed(1, 9, 5e-3);  // 8 extra rows: 4 plain steps more
  }
  EXPECT_NEAR(cheap.row_cost(), DraftLength::kRowCost, 1e-12) << "untimed: the start value";
  EXPECT_NEAR(dear.row_cost(), 0.5, 0.01);
  EXPECT_GE(cheap.next(), 1);
  EXPECT_EQ(dear.next(), 0) << "rows at half a step do not pay at a ~ 0.5";
  for (int i = 0; i < 60; ++i) cheap.record(10, 9), dear.record(10, 9);  // a ~ 0.9
  EXPECT_GE(dear.next(), 1);
  EXPECT_LE(dear.next(), 6);
  EXPECT_GT(cheap.next(), dear.next() + 2);
  DraftLength batch({.draft_max = 16, .draft_min = 1});
  for (int i = 0; i < 60; ++i) batch.timed(4, 4, 2e-3), batch.timed(4, 12, 3e-3);  // 8 extra rows: half a step more
  EXPECT_NEAR(batch.row_cost(), 0.0625, 0.005);
  DraftLength untimed({.draft_max = 16, .draft_min = 1, .timed = false});  // the same forwards as `dear`
  for (int i = 0; i < 60; ++i) untimed.timed(1, 1, 1e-3), untimed.timed(1, 9, 5e-3);
  EXPECT_NEAR(untimed.row_cost(), DraftLength::kRowCost, 1e-12) << "timed = false keeps the start value";
  EXPECT_EQ(untimed.step_cost(), 0);
}

// Note [Draft length]: forwards timed at several draft lengths give the step's own cost c0
// beside the row cost c (here the default model's, 2 threads: c0 = 0.28, c = 0.46), and c0
// shuts the gate for short drafts that c alone would let through.
TEST(DraftLength, AStepCostIsFittedBesideTheRowCost) {
  DraftLength fitted({.draft_max = 16, .draft_min = 1}), per_row({.draft_max = 16, .draft_min = 1});
  for (int i = 0; i < 100; ++i) {
    fitted.timed(1, 1, 1e-3);
    fitted.timed(1, i % 2 == 0 ? 2 : 16, (1 + 0.28 + 0.46 * (i % 2 == 0 ? 1 : 15)) * 1e-3);
    per_row.timed(1, 1, 1e-3), per_row.timed(1, 9, (1 + 0.46 * 8) * 1e-3);  // one length only
    fitted.record(3, 2), per_row.record(3, 2);  // a ~ 0.65
  }
  EXPECT_NEAR(fitted.row_cost(), 0.46, 1e-3);
  EXPECT_NEAR(fitted.step_cost(), 0.28, 1e-3);
  EXPECT_NEAR(per_row.row_cost(), 0.46, 1e-3);
  EXPECT_EQ(per_row.step_cost(), 0.0) << "one draft length: no slope to fit";
  EXPECT_GE(per_row.next(), 1) << "1.65 tokens for 1.46 steps pays";
  EXPECT_EQ(fitted.next(), 0) << "1.65 tokens for 1.74 steps does not";
  for (int i = 0; i < 60; ++i) fitted.record(10, 10);  // every drafted token right
  EXPECT_EQ(fitted.next(), 16);
}

// Note [Draft length]: a forward slowed by a preempted thread counts as at most twice what
// the averages predict, so one such sample moves c by a tenth of that at most.
TEST(DraftLength, APreemptedForwardMovesTheRowCostALittle) {
  DraftLength len({.draft_max = 16, .draft_min = 1});
  const auto forward = [](double rows) { return (1 + 0.46 * (rows - 1)) * 1e-3; };  // c = 0.46, c0 = 0
  for (int i = 0; i < 40; ++i) len.timed(1, 1, forward(1)), len.timed(1, 17, forward(17)), len.record(10, 9);
  ASSERT_NEAR(len.row_cost(), 0.46, 0.01);
  len.timed(1, 17, 5 * forward(17));  // preempted: 5 times its time
  EXPECT_LT(len.row_cost(), 0.52) << "whole, the sample would fit c = 0.66";
  len.timed(1, 1, 19 * forward(1));  // a preempted plain step (19x seen), then drafts only
  for (int i = 0; i < 5; ++i) len.timed(1, 17, forward(17));
  EXPECT_GT(len.row_cost(), 0.40) << "whole, the plain step would make the rows look cheap (c = 0.32)";
}

// Note [Draft length]: forwards timed on a loaded machine (the plain step at 1068 us, then
// drafts of 10, 7 and 11 rows at 8384, 2717 and 8803 us: two of them slowed) once fitted a
// slope of c = 0.87 through draft lengths 3 rows apart, and the gate stayed shut for ~70
// tokens of a copy; lengths that close give the ratio per row instead.
TEST(DraftLength, CloseDraftLengthsDoNotFitASlopeToNoise) {
  DraftLength len({.draft_max = 16, .draft_min = 1});
  for (int i = 0; i < 20; ++i) len.record(10, 8);  // a ~ 0.85
  len.timed(1, 1, 1068e-6);
  len.timed(1, 11, 8384e-6), len.timed(1, 8, 2717e-6), len.timed(1, 12, 8803e-6);
  EXPECT_LT(len.row_cost(), 0.3);
  EXPECT_EQ(len.step_cost(), 0.0);
  EXPECT_GE(len.next(), 2) << "the gate stays open for drafts right 85% of the time";
}

TEST(DraftLength, BadLengthsAreClearErrors) {
  EXPECT_THROW(DraftLength({.draft_max = 4, .draft_min = 0}), Error);
  EXPECT_THROW(DraftLength({.draft_max = 2, .draft_min = 3}), Error);
}

// Note [Speculative decoding]: drafted tokens a grammar refuses are cut before verification.
TEST(GrammarDrafts, AllowedPrefixStopsAtTheFirstRefusedToken) {
  const auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= "ab" [0-9]+)"));
  const auto vocab = std::make_shared<const grammar::Vocabulary>(std::vector<std::string>{"a", "b", "1", "x", "", "2"},
                                                                 std::vector<bool>{false, false, false, false, true, false});
  grammar::Matcher m(g, vocab);
  EXPECT_EQ(m.allowed_prefix(ids({0, 1, 2, 5, 2})), 5u);
  EXPECT_EQ(m.allowed_prefix(ids({0, 1, 3, 2})), 2u);  // "x" refused
  EXPECT_EQ(m.allowed_prefix(ids({0, 1, 4})), 2u);     // the end token before the text is complete
  EXPECT_EQ(m.allowed_prefix(ids({0, 1, 2, 4, 2})), 4u);  // complete: the end token ends the run
  EXPECT_EQ(m.allowed_prefix(ids({1})), 0u);
  EXPECT_EQ(m.allowed_prefix(ids({0, 99})), 1u);  // outside the vocabulary
  EXPECT_TRUE(m.accept_token(0)) << "allowed_prefix consumed nothing";
  EXPECT_EQ(m.allowed_prefix(ids({1, 2})), 2u);
}

// ---- lossless verification ----

// The prompt of a copy task a random-weight model follows: a seed text, the model's own
// greedy continuation of it, and the seed again (so the continuation tends to come back,
// and its loops repeat).
std::vector<TokenId> copy_prompt(Generator& plain, std::vector<TokenId> seed, std::int64_t n) {
  plain.feed_prompt(seed);
  const Result first = plain.generate({.max_tokens = n});
  std::vector<TokenId> prompt = seed;
  prompt.insert(prompt.end(), first.tokens.begin(), first.tokens.end());
  prompt.insert(prompt.end(), seed.begin(), seed.end());
  return prompt;
}

struct Pair {
  Result plain, spec;
};

// The same request through plain decoding and speculative decoding, each from a fresh
// Generator over the same prompt.
Pair both(const model::Model& m, const tokenizer::Tokenizer& tok, Context& ctx, std::span<const TokenId> prompt,
          const Request& request, sample::SamplerConfig sampling, model::KvType kv = model::KvType::f16, std::int64_t n_ctx = 1024) {
  Pair p;
  for (const bool spec : {false, true}) {
    Generator g(m, tok, ctx, {.n_ctx = n_ctx, .kv_type = kv, .sampling = sampling, .speculative = {.enabled = spec, .timed = false}});
    g.feed_prompt(prompt);
    (spec ? p.spec : p.plain) = g.generate(request);
    if (spec) {
      EXPECT_EQ(g.cache().size(), static_cast<std::int64_t>(g.cached_tokens().size()));
    }
  }
  return p;
}

void expect_same(const Pair& p, const std::string& what) {
  EXPECT_EQ(p.spec.tokens, p.plain.tokens) << what;
  EXPECT_EQ(p.spec.text, p.plain.text) << what;
  EXPECT_EQ(p.spec.reason, p.plain.reason) << what;
}

const sample::SamplerConfig kGreedy{.temperature = 0.f};

// The case's synth model, loaded.
class SpeculativeFormats : public ::testing::TestWithParam<test::SynthCase> {
 protected:
  void SetUp() override {
    const auto path = test::make_synth_model(GetParam(), "spec");
    model_.emplace(model::Model::load(path));
    std::filesystem::remove(path);
    tok_.emplace(tokenizer::load_tokenizer_data(model_->file()));
  }
  Context ctx_{{.threads = 2}};
  std::optional<model::Model> model_;
  std::optional<tokenizer::Tokenizer> tok_;
};

TEST_P(SpeculativeFormats, GreedyIsPlainDecodingByteForByte) {
  const auto& c = GetParam();
  const model::Model& m = *model_;
  const tokenizer::Tokenizer& tok = *tok_;
  Context& ctx = ctx_;
  std::int64_t verified = 0, accepted = 0;
  for (const model::KvType kv : {model::KvType::f16, model::KvType::f32}) {
    // A 1024 context: past 256 cached positions the one-row forward splits (Note [split decode]).
    Generator plain(m, tok, ctx, {.n_ctx = 1024, .kv_type = kv, .sampling = kGreedy, .speculative = {.enabled = false}});
    const auto prompt = copy_prompt(plain, tok.encode("The quick brown fox jumps over the lazy dog.", {.add_special = true}), 140);
    const Pair p = both(m, tok, ctx, prompt, {.max_tokens = 160}, kGreedy, kv);
    expect_same(p, fmt::format("{}, {} KV", c.name, model::kv_type_name(kv)));
    verified += p.spec.timings.verify_steps;
    accepted += p.spec.timings.accepted;
    EXPECT_EQ(p.plain.timings.verify_steps, 0);
  }
  EXPECT_GT(verified, 0) << c.name << ": nothing was drafted; the test would not see a verification";
  EXPECT_GT(accepted, 0) << c.name << ": no drafted token was accepted";
  std::printf("[ measured ] %s: %lld verifications, %lld drafted tokens accepted\n", c.name,
              static_cast<long long>(verified), static_cast<long long>(accepted));
}

INSTANTIATE_TEST_SUITE_P(Models, SpeculativeFormats, ::testing::ValuesIn(test::every_format_cases()),
                         [](const ::testing::TestParamInfo<test::SynthCase>& i) { return std::string(i.param.name); });

// The shared test models (../shared/models), each in the format it is stored in.
TEST(SpeculativeSharedModels, GreedyIsPlainDecodingByteForByte) {
  const auto dir = std::filesystem::path(FUCINA_SOURCE_DIR) / ".." / "shared" / "models";
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(dir))
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".gguf") files.push_back(e.path());
  if (files.empty()) GTEST_SKIP() << "no models in " << dir;
  std::sort(files.begin(), files.end());
  Context ctx({.threads = 2});
  for (const auto& f : files) {
    const auto m = model::Model::load(f);
    const tokenizer::Tokenizer tok(tokenizer::load_tokenizer_data(m.file()));
    Generator plain(m, tok, ctx, {.n_ctx = 1024, .sampling = kGreedy, .speculative = {.enabled = false}});
    const auto prompt = copy_prompt(plain, tok.encode("Once upon a time, in a small village,", {.add_special = true}), 120);
    const Pair p = both(m, tok, ctx, prompt, {.max_tokens = 160}, kGreedy);
    expect_same(p, f.filename().string());
    EXPECT_GT(p.spec.timings.verify_steps, 0) << f.filename();
    std::printf("[ measured ] %s: %lld verifications, %lld of %lld drafted tokens accepted\n", f.filename().c_str(),
                static_cast<long long>(p.spec.timings.verify_steps), static_cast<long long>(p.spec.timings.accepted),
                static_cast<long long>(p.spec.timings.drafted));
  }
}

class SpeculativeTiny : public test::TinyModelTest {};

// Every token comes from the same sampler calls on the same logits: the same seed gives the
// same text, penalties and stop strings included.
TEST_F(SpeculativeTiny, SeededSamplingIsPlainDecodingToken) {
  Generator plain(*model_, *tok_, ctx_, {.sampling = greedy(), .speculative = {.enabled = false}});
  const auto prompt = copy_prompt(plain, ids("It was the best of times, it was the worst of times,"), 100);
  std::int64_t verified = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const sample::SamplerConfig s{.temperature = 0.7f, .repeat_penalty = seed % 2 ? 1.1f : 1.f, .seed = seed};
    const Pair p = both(*model_, *tok_, ctx_, prompt, {.max_tokens = 80, .stops = {"zq"}}, s);
    expect_same(p, fmt::format("seed {}", seed));
    verified += p.spec.timings.verify_steps;
  }
  EXPECT_GT(verified, 0);
}

// The speculative rule's output distribution is the model's. After t1 the token d that
// followed t1 in the prompt is drafted and t1, d run as two rows: t2 is drawn from row 0,
// d accepted when t2 = d (probability p(d)) and otherwise t2 is a draw from p without d,
// renormalised; t3 then comes from row 1 (accepted) or a plain step (rejected). Over many
// seeds (t1, t2, t3) must follow p(t1) p(t2 | t1) p(t3 | t1 t2), p the sampler's final
// distribution (top-3 at temperature 1, renormalised), by Pearson's chi-square. The prompt
// is a copy task, so d is often, not always, the token sampled.
TEST_F(SpeculativeTiny, SampledDistributionIsTheModels) {
  const std::int32_t vocab = model_->config().n_vocab;
  Generator plain(*model_, *tok_, ctx_, {.n_ctx = 512, .sampling = greedy(), .speculative = {.enabled = false}});
  const auto prompt = copy_prompt(plain, ids("It was the best of times, it was the worst of times,"), 60);
  constexpr int kTopK = 3;
  const sample::SamplerConfig hot{.temperature = 1.f, .top_k = kTopK, .top_p = 1.f, .min_p = 0.f};
  // The sampler's final distribution after `tokens` (following the prompt), by a plain forward.
  auto cache = model_->new_cache(512);
  model_->prefill(ctx_, cache, prompt);
  const auto n_prompt = static_cast<std::int64_t>(prompt.size());
  const auto dist = [&](std::vector<TokenId> tokens) {
    cache.truncate(n_prompt - 1);
    tokens.insert(tokens.begin(), prompt.back());
    const auto logits = model_->forward(ctx_, cache, tokens).to_vector();
    std::vector<std::pair<float, TokenId>> v;
    for (TokenId i = 0; i < vocab; ++i) v.push_back({logits[static_cast<std::size_t>(i)], i});
    std::partial_sort(v.begin(), v.begin() + kTopK, v.end(),
                      [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    std::map<TokenId, double> p;
    double z = 0;
    for (int i = 0; i < kTopK; ++i) z += std::exp(static_cast<double>(v[i].first - v[0].first));
    for (int i = 0; i < kTopK; ++i) p[v[i].second] = std::exp(static_cast<double>(v[i].first - v[0].first)) / z;
    return p;
  };

  constexpr int kSamples = 3000;
  std::map<std::vector<TokenId>, int> seen;
  std::int64_t accepted = 0, verified = 0;
  for (int s = 0; s < kSamples; ++s) {
    auto sampling = hot;
    sampling.seed = static_cast<std::uint64_t>(s) + 1;
    Generator g(*model_, *tok_, ctx_, {.n_ctx = 512, .sampling = sampling, .speculative = {.draft_max = 1, .timed = false}});
    g.feed_prompt(prompt);
    const Result r = g.generate({.max_tokens = 3});
    ASSERT_EQ(r.tokens.size(), 3u);
    ++seen[r.tokens];
    accepted += r.timings.accepted;
    verified += r.timings.verify_steps;
  }
  EXPECT_GT(verified, kSamples / 4) << "too few samples verify a drafted token";
  EXPECT_GT(accepted, kSamples / 20) << "the drafted token is accepted too rarely to test the accepting branch";
  EXPECT_LT(accepted, verified - kSamples / 20) << "the drafted token is rejected too rarely to test the rejecting branch";
  // Pearson's chi-square over the cells with an expected count of 5 or more, the rest pooled.
  double chi2 = 0, pooled_expected = 0;
  int cells = 0, total = 0, pooled_seen = 0;
  for (const auto& [t1, q1] : dist({}))
    for (const auto& [t2, q2] : dist({t1}))
      for (const auto& [t3, q3] : dist({t1, t2})) {
        const double expected = kSamples * q1 * q2 * q3;
        const auto it = seen.find({t1, t2, t3});
        const int got = it == seen.end() ? 0 : it->second;
        total += got;
        if (expected < 5) {
          pooled_expected += expected, pooled_seen += got;
          continue;
        }
        chi2 += (got - expected) * (got - expected) / expected;
        ++cells;
      }
  if (pooled_expected > 0) chi2 += (pooled_seen - pooled_expected) * (pooled_seen - pooled_expected) / pooled_expected, ++cells;
  EXPECT_EQ(total, kSamples) << "a sample outside the top-3 support";
  ASSERT_GE(cells, 4);
  // The 0.1% critical value of chi-square with cells - 1 degrees of freedom (Wilson-Hilferty).
  const double df = cells - 1, z = 3.09;
  const double critical = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  EXPECT_LT(chi2, critical) << cells << " cells";
  std::printf("[ measured ] chi-square %.2f over %d cells (0.1%% critical %.2f); %lld of %lld drafts accepted\n", chi2, cells,
              critical, static_cast<long long>(accepted), static_cast<long long>(verified));
}

// A grammar acts token by token as in plain decoding; drafts it refuses never reach a row.
TEST_F(SpeculativeTiny, GrammarOutputIsPlainDecodings) {
  const auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= ([a-e] | " ")+ "!")"));
  const auto prompt = ids("a b c d e a b c d e a b c d e a b c d e a b c d e a b c d e");
  std::int64_t verified = 0;
  for (const auto& s : {greedy(), sample::SamplerConfig{.temperature = 1.f, .seed = 3}}) {
    const Pair p = both(*model_, *tok_, ctx_, prompt, {.max_tokens = 60, .grammar = g}, s);
    expect_same(p, fmt::format("temperature {}", s.temperature));
    verified += p.spec.timings.verify_steps;
  }
  EXPECT_GT(verified, 0);
}

// The cache's end: verification never runs rows past it, and stops as plain decoding does.
TEST_F(SpeculativeTiny, ContextFullAndMaxTokensStopWherePlainDecodingStops) {
  Generator plain(*model_, *tok_, ctx_, {.sampling = greedy(), .speculative = {.enabled = false}});
  const auto prompt = copy_prompt(plain, ids("one two three four five"), 60);
  const auto n_ctx = static_cast<std::int64_t>(prompt.size()) + 23;
  const Pair full = both(*model_, *tok_, ctx_, prompt, {.max_tokens = -1, .ignore_eos = true}, greedy(), model::KvType::f16, n_ctx);
  expect_same(full, "context full");
  EXPECT_EQ(full.spec.reason, generate::StopReason::ContextFull);
  for (const std::int64_t n : {1, 2, 7, 33}) expect_same(both(*model_, *tok_, ctx_, prompt, {.max_tokens = n}, greedy()), fmt::format("max {}", n));
}

// ---- batches (Note [Speculative batches]) ----

// Copy-task prompts of different lengths over one model, each request with its own length.
struct BatchCase {
  std::vector<std::vector<TokenId>> prompts;
  std::vector<Request> requests;
};

BatchCase copy_batch(const model::Model& m, const tokenizer::Tokenizer& tok, Context& ctx) {
  Generator plain(m, tok, ctx, {.n_ctx = 512, .sampling = kGreedy, .speculative = {.enabled = false}});
  BatchCase c;
  const char* seeds[] = {"The quick brown fox jumps over the lazy dog.", "It was the best of times,", "one two three four five",
                         "Once upon a time, in a small village,", "zzz"};
  for (std::size_t i = 0; i < std::size(seeds); ++i) {
    c.prompts.push_back(copy_prompt(plain, tok.encode(seeds[i], {.add_special = true}), 30 + 20 * static_cast<std::int64_t>(i)));
    c.requests.push_back({.max_tokens = 50 + 15 * static_cast<std::int64_t>(i), .ignore_eos = i != 2});
  }
  return c;
}

// The requests run together, 3 at once (requests queued behind the slots, prompts sharing
// steps with other sequences' decode rows); a small n_batch splits prompts across steps.
std::vector<Result> run_batch(const model::Model& m, const tokenizer::Tokenizer& tok, Context& ctx, const BatchCase& c,
                              sample::SamplerConfig sampling, bool spec, std::int64_t n_batch,
                              model::KvType kv = model::KvType::f16) {
  generate::BatchGenerator b(m, tok, ctx,
                             {.n_parallel = 3, .n_ctx = 512, .n_batch = n_batch, .kv_type = kv, .sampling = sampling,
                              .speculative = {.enabled = spec, .timed = false}});
  for (std::size_t i = 0; i < c.prompts.size(); ++i) {
    Request r = c.requests[i];
    r.sampling = sampling;
    if (sampling.temperature > 0) r.sampling->seed = sampling.seed + i;
    b.add(c.prompts[i], std::move(r));
  }
  auto results = b.run();
  EXPECT_EQ(b.cache().free_blocks(), b.cache().total_blocks()) << "a sequence kept blocks after it finished";
  return results;
}

// Each sequence's greedy output equals its solo plain decoding (Generator, speculation
// off): its decode rows, drafted or not, are its one-token forwards whatever else the step
// runs (here: whole prompts of the requests admitted later). On every synth architecture
// and format, f16 and f32 KV. (A prompt split across steps runs in other chunks than a solo
// prefill, whose logits may move in the last bits: Note [Continuous batching].)
TEST_P(SpeculativeFormats, BatchedGreedyIsSoloPlainDecoding) {
  const auto& tc = GetParam();
  const model::Model& m = *model_;
  const tokenizer::Tokenizer& tok = *tok_;
  Context& ctx = ctx_;
  const BatchCase c = copy_batch(m, tok, ctx);
  std::int64_t verified = 0, accepted = 0;
  for (const model::KvType kv : {model::KvType::f16, model::KvType::f32}) {
    const auto batched = run_batch(m, tok, ctx, c, kGreedy, true, 512, kv);
    for (std::size_t i = 0; i < c.prompts.size(); ++i) {
      Generator solo(m, tok, ctx, {.n_ctx = 512, .kv_type = kv, .sampling = kGreedy, .speculative = {.enabled = false}});
      solo.feed_prompt(c.prompts[i]);
      const Result want = solo.generate(c.requests[i]);
      expect_same({.plain = want, .spec = batched[i]}, fmt::format("{}, {} KV, request {}", tc.name, model::kv_type_name(kv), i));
      verified += batched[i].timings.verify_steps;
      accepted += batched[i].timings.accepted;
    }
  }
  EXPECT_GT(verified, 0) << tc.name << ": nothing was drafted";
  EXPECT_GT(accepted, 0) << tc.name << ": no drafted token was accepted";
}

class SpeculativeBatch : public test::TinyModelTest {};

// Speculation on and off print the same bytes for concurrent sequences, greedy and seeded,
// with prompts split across steps (a 40-token budget).
TEST_F(SpeculativeBatch, OnAndOffPrintTheSameForConcurrentSequences) {
  const BatchCase c = copy_batch(*model_, *tok_, ctx_);
  for (const auto& sampling : {greedy(), sample::SamplerConfig{.temperature = 0.8f, .repeat_penalty = 1.1f, .seed = 7}}) {
    const auto off = run_batch(*model_, *tok_, ctx_, c, sampling, false, 40);
    const auto on = run_batch(*model_, *tok_, ctx_, c, sampling, true, 40);
    std::int64_t verified = 0, accepted = 0;
    for (std::size_t i = 0; i < c.prompts.size(); ++i) {
      expect_same({.plain = off[i], .spec = on[i]}, fmt::format("temperature {}, request {}", sampling.temperature, i));
      EXPECT_EQ(off[i].timings.verify_steps, 0);
      verified += on[i].timings.verify_steps;
      accepted += on[i].timings.accepted;
    }
    EXPECT_GT(verified, 0);
    EXPECT_GT(accepted, 0);
  }
}

// A grammar request among plain ones: its drafts are cut to what the grammar allows, and its
// text is plain decoding's. A grammar that allows none of the prompt's tokens leaves only
// drafts from its own text.
TEST_F(SpeculativeBatch, GrammarRequestsCutTheDraftsTheyRefuse) {
  const auto letters = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= ([a-e] | " ")+ "!")"));
  const auto prompt = ids("a b c d e a b c d e a b c d e a b c d e a b c d e a b c d e");
  BatchCase c = copy_batch(*model_, *tok_, ctx_);
  c.prompts.push_back(prompt);
  c.requests.push_back({.max_tokens = 60, .grammar = letters});
  const auto off = run_batch(*model_, *tok_, ctx_, c, greedy(), false, 40);
  const auto on = run_batch(*model_, *tok_, ctx_, c, greedy(), true, 40);
  for (std::size_t i = 0; i < c.prompts.size(); ++i) expect_same({.plain = off[i], .spec = on[i]}, fmt::format("request {}", i));
  EXPECT_GT(on.back().timings.verify_steps, 0) << "the grammar request drafted nothing";
  EXPECT_EQ(on.back().text.find_first_not_of("abcde !"), std::string::npos) << on.back().text;

  const auto digits = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= [0-9] [0-9] [0-9] "!")"));
  generate::BatchGenerator b(*model_, *tok_, ctx_, {.n_parallel = 2, .n_ctx = 512, .sampling = greedy(), .speculative = {.timed = false}});
  b.add(prompt, {.max_tokens = 8, .grammar = digits});
  const Result r = b.run()[0];
  EXPECT_EQ(r.timings.drafted, 0) << "a drafted letter reached a row under a digits-only grammar: " << r.text;
}

TEST_F(SpeculativeTiny, CliPrintsTheSameBytesWithAndWithoutSpec) {
  FUCINA_REQUIRE_CLI();
  const std::string prompt = "la la la la la la la la la la la la la la la la";
  std::string out[2];
  for (int spec = 0; spec < 2; ++spec) {
    const auto r = test::run_fucina(fmt::format("run '{}' -p '{}' -n 60 --temp 0 -t 2 --spec {} --draft-max 5", path().string(),
                                                prompt, spec ? "lookup" : "off"),
                                    test::Capture::Stdout);
    ASSERT_EQ(r.status, 0) << r.output;
    out[spec] = r.output;
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_FALSE(out[0].empty());
  const auto err = test::run_fucina(fmt::format("run '{}' -p '{}' -n 60 --temp 0 -t 2", path().string(), prompt), test::Capture::Stderr);
  EXPECT_NE(err.output.find("fucina run: speculative:"), std::string::npos) << err.output;
  test::expect_one_line_error(test::run_fucina(fmt::format("run '{}' -p x --spec maybe", path().string())), 2,
                              "--spec must be lookup or off");
  test::expect_one_line_error(test::run_fucina(fmt::format("run '{}' -p x --draft-max 2 --draft-min 3", path().string())), 2,
                              "--draft-max 2 must be at least --draft-min 3");
  test::expect_one_line_error(test::run_fucina(fmt::format("run '{}' -p x --draft-min 0", path().string())), 2,
                              "--draft-min must be at least 1");
}

}  // namespace
