// Note [Continuous batching]: 8 prompts generated together at temperature 0 give exactly
// what each gives alone (Generator), with whole prompts in one step and with a small token
// budget that splits prompts across steps and queues requests behind fewer slots; each
// request keeps its own stop reason, stop strings and step callback; a full context ends
// only its sequence; finished sequences give their cache blocks back.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "fucina/generate/batch_generator.hpp"
#include "support/run_cli.hpp"
#include "support/tiny_model_test.hpp"

namespace {

using namespace fucina;
using generate::BatchGenerator;
using generate::Request;
using generate::Result;
using generate::StopReason;

class BatchGeneratorTest : public test::TinyModelTest {
 protected:
  Result solo(const std::string& prompt, const Request& request, std::int64_t n_ctx = 256) {
    generate::Generator g(*model_, *tok_, ctx_, {.n_ctx = n_ctx, .sampling = greedy()});
    g.feed_prompt(ids(prompt));
    return g.generate(request);
  }
};

// Prompts of 2 to ~90 tokens, each with its own length so they finish at different steps.
const std::vector<std::string> kPrompts = {
    "Hi",
    "The quick brown fox",
    "Once upon a time, in a land far away, there lived",
    "1, 2, 3, 4, 5,",
    "A much longer prompt that runs over sixty-four tokens so that its rows take the tiled attention path of the prefill "
    "kernel in one step",
    "Q: what is the capital of France?\nA:",
    "zzz",
    "def fib(n):\n    return",
};
// This random model ends most texts within a few tokens: all but one ignore that.
Request request_for(std::size_t i) { return {.max_tokens = static_cast<std::int64_t>(6 + 5 * i), .ignore_eos = i != 1}; }

void expect_same(const Result& got, const Result& want, std::size_t i) {
  EXPECT_EQ(got.tokens, want.tokens) << "prompt " << i;
  EXPECT_EQ(got.text, want.text) << "prompt " << i;
  EXPECT_EQ(got.reason, want.reason) << "prompt " << i;
}

TEST_F(BatchGeneratorTest, EightPromptsPrintWhatEachPrintsAlone) {
  std::vector<Result> alone;
  for (std::size_t i = 0; i < kPrompts.size(); ++i) alone.push_back(solo(kPrompts[i], request_for(i)));
  EXPECT_EQ(alone[1].reason, StopReason::Eos);  // one of them ends on its own
  std::int64_t total = 0;  // tokens generated: the steps a serial run would take
  for (const Result& r : alone) total += static_cast<std::int64_t>(r.tokens.size());
  struct Setting {
    std::int64_t parallel, batch;
  };
  // Whole prompts in one step; a budget of 16 tokens behind 3 slots (prompts split across
  // steps, requests queued, slots reused).
  for (const Setting s : {Setting{8, 512}, Setting{3, 16}}) {
    BatchGenerator b(*model_, *tok_, ctx_, {.n_parallel = s.parallel, .n_ctx = 256, .n_batch = s.batch, .sampling = greedy()});
    std::vector<std::string> streamed(kPrompts.size());
    for (std::size_t i = 0; i < kPrompts.size(); ++i) {
      Request r = request_for(i);
      r.on_step = [&streamed, i](const generate::Step& step) { streamed[i] += step.text; };
      EXPECT_EQ(b.add(ids(kPrompts[i]), std::move(r)), i);
    }
    std::int64_t steps = 0, most_running = 0;
    while (b.step()) {
      ++steps;
      most_running = std::max(most_running, b.running());
    }
    const auto results = b.run();  // nothing left: the results
    for (std::size_t i = 0; i < kPrompts.size(); ++i) {
      SCOPED_TRACE("parallel " + std::to_string(s.parallel) + ", batch " + std::to_string(s.batch));
      ASSERT_TRUE(b.finished(i));
      expect_same(results[i], alone[i], i);
      EXPECT_EQ(streamed[i], results[i].text);
    }
    EXPECT_LE(most_running, s.parallel);
    EXPECT_LT(2 * steps, total) << "the sequences did not step together";
    EXPECT_EQ(b.cache().free_blocks(), b.cache().total_blocks());
  }
}

TEST_F(BatchGeneratorTest, EachRequestKeepsItsOwnStopReason) {
  const std::string text = solo("zzz", {.max_tokens = 12, .ignore_eos = true}).text;
  ASSERT_GE(text.size(), 6u);
  const std::string stop = text.substr(4, 2);
  std::atomic<bool> cancel{true};
  BatchGenerator b(*model_, *tok_, ctx_, {.n_parallel = 4, .n_ctx = 40, .sampling = greedy()});
  b.add(ids("zzz"), {.max_tokens = 12, .stops = {stop}, .ignore_eos = true});
  b.add(ids("Hi"), {.max_tokens = 5});
  b.add(ids("Hi"), {.max_tokens = 10, .cancel = &cancel});
  b.add(ids("Once upon a time"), {.max_tokens = -1, .ignore_eos = true});  // until the 40-token context is full
  const auto r = b.run();
  EXPECT_EQ(r[0].reason, StopReason::StopString);
  EXPECT_EQ(r[0].text, solo("zzz", {.max_tokens = 12, .stops = {stop}, .ignore_eos = true}).text);
  EXPECT_LT(r[0].text.size(), 4u + 1);
  EXPECT_EQ(r[1].reason, StopReason::Length);
  EXPECT_EQ(r[1].tokens.size(), 5u);
  EXPECT_EQ(r[2].reason, StopReason::Cancelled);
  EXPECT_TRUE(r[2].tokens.empty());
  EXPECT_EQ(r[3].reason, StopReason::ContextFull);
  expect_same(r[3], solo("Once upon a time", {.max_tokens = -1, .ignore_eos = true}, 40), 3);
}

// A request admitted while another sequence has run a prefix of its prompt forks that
// prefix instead of running it again, and still prints what it prints alone.
TEST_F(BatchGeneratorTest, SharedPromptPrefixIsForkedNotRunAgain) {
  const std::string system = kPrompts[4];  // ~100 tokens: three full blocks
  const std::string a = system + " Tell me more.", c = system + " Something else entirely";
  const Request req{.max_tokens = 12, .ignore_eos = true};
  BatchGenerator b(*model_, *tok_, ctx_, {.n_parallel = 4, .n_ctx = 256, .sampling = greedy()});
  b.add(ids(a), req);
  ASSERT_TRUE(b.step());  // a's whole prompt runs
  const std::int64_t free_before = b.cache().free_blocks();
  b.add(ids(c), req);
  ASSERT_TRUE(b.step());  // c is admitted: its shared prefix is forked
  const auto ia = ids(a), ic = ids(c);
  const std::int64_t shared = std::mismatch(ia.begin(), ia.end(), ic.begin(), ic.end()).first - ia.begin();
  ASSERT_GE(shared, 64);
  const std::int64_t own = (static_cast<std::int64_t>(ic.size()) + 31) / 32 - shared / 32;
  EXPECT_EQ(free_before - b.cache().free_blocks(), own) << "c holds only the blocks past the shared ones";
  const auto r = b.run();
  expect_same(r[1], solo(c, req), 1);
  EXPECT_EQ(r[1].timings.prompt_tokens, static_cast<std::int64_t>(ic.size()) - shared);
  expect_same(r[0], solo(a, req), 0);
}

// The choices of one request (the same prompt three times, admitted together): the first
// runs the prompt, the others wait for it and fork all of it but the last token, and all
// three print what the prompt prints alone.
TEST_F(BatchGeneratorTest, ChoicesOfOnePromptRunItOnce) {
  const std::string p = kPrompts[4];
  const auto n = static_cast<std::int64_t>(ids(p).size());
  ASSERT_GE(n, 64);
  const Request req{.max_tokens = 8, .ignore_eos = true};
  BatchGenerator b(*model_, *tok_, ctx_, {.n_parallel = 4, .n_ctx = 256, .sampling = greedy()});
  for (int i = 0; i < 3; ++i) b.add(ids(p), req);
  const auto r = b.run();
  const Result want = solo(p, req);
  for (std::size_t i = 0; i < 3; ++i) expect_same(r[i], want, i);
  EXPECT_EQ(r[0].timings.prompt_tokens, n);
  EXPECT_EQ(r[1].timings.prompt_tokens, 1);
  EXPECT_EQ(r[2].timings.prompt_tokens, 1);
}

// Note [Kept prefixes]: a finished sequence's KV serves a later request that shares its
// prefix (a system prompt sent again), which prints what it prints alone; a cancelled one is
// not kept; a kept sequence's blocks go back when a request needs them.
TEST_F(BatchGeneratorTest, KeptPrefixServesALaterRequest) {
  const std::string system = kPrompts[4];
  const std::string a = system + " Tell me more.", c = system + " Something else entirely";
  const Request req{.max_tokens = 12, .ignore_eos = true};
  const auto ia = ids(a), ic = ids(c);
  const auto shared = std::mismatch(ia.begin(), ia.end(), ic.begin(), ic.end()).first - ia.begin();
  ASSERT_GE(shared, 64);
  // The budget: a's blocks (its prompt and 11 generated tokens) and one more, which the last
  // request below needs two of.
  const auto blocks_a = (static_cast<std::int64_t>(ia.size()) + 11 + 31) / 32;
  BatchGenerator b(*model_, *tok_, ctx_,
                   {.n_parallel = 1, .n_ctx = 256, .n_kv = 32 * (blocks_a + 1), .sampling = greedy(), .keep_finished = 1});
  b.add(ia, req);
  while (b.step()) {
  }
  EXPECT_EQ(b.kept(), 1);
  EXPECT_EQ(b.cache().free_blocks(), 1);
  const std::size_t i = b.add(ic, req);
  while (b.step()) {
  }
  expect_same(b.result(i), solo(c, req), i);
  EXPECT_EQ(b.result(i).timings.prompt_tokens, static_cast<std::int64_t>(ic.size()) - shared);
  EXPECT_EQ(b.kept(), 1) << "c replaced a: one kept at most";

  std::atomic<bool> cancel{false};
  const std::size_t j = b.add(ids(a), {.max_tokens = 100, .ignore_eos = true, .cancel = &cancel});
  ASSERT_TRUE(b.step());
  cancel = true;
  EXPECT_FALSE(b.step());
  EXPECT_EQ(b.result(j).reason, StopReason::Cancelled);
  EXPECT_EQ(b.kept(), 1) << "a cancelled sequence is not kept";

  const std::string other = kPrompts[2];
  ASSERT_GT(static_cast<std::int64_t>(ids(other).size()) + 12, 32);
  ASSERT_LT(b.cache().free_blocks(), 2);
  const std::size_t k = b.add(ids(other), req);
  while (b.step()) {
  }
  expect_same(b.result(k), solo(other, req), k);  // not ContextFull: the kept blocks went back
  EXPECT_EQ(b.kept(), 1);
}

// Note [Long-running batches]: a cancel flag ends its request in the next step wherever it
// is (generating, reading its prompt, queued), its blocks free before that step's forward.
TEST_F(BatchGeneratorTest, CancelEndsARequestInTheNextStep) {
  std::atomic<bool> stop_generating{false}, stop_reading{false}, stop_queued{false};
  // A 16-token budget: the long prompt takes several steps; two slots: the third waits.
  BatchGenerator b(*model_, *tok_, ctx_, {.n_parallel = 2, .n_ctx = 256, .n_batch = 16, .sampling = greedy()});
  const auto generating = b.add(ids("Hi"), {.max_tokens = 100, .ignore_eos = true, .cancel = &stop_generating});
  const auto reading = b.add(ids(kPrompts[4]), {.max_tokens = 100, .ignore_eos = true, .cancel = &stop_reading});
  const auto queued = b.add(ids("zzz"), {.max_tokens = 100, .ignore_eos = true, .cancel = &stop_queued});
  ASSERT_TRUE(b.step());
  ASSERT_TRUE(b.step());
  EXPECT_EQ(b.running(), 2);
  const std::int64_t all = b.cache().total_blocks();
  ASSERT_LT(b.cache().free_blocks(), all - 1);  // the long prompt holds a block past the first's
  stop_reading = true;
  stop_queued = true;
  ASSERT_TRUE(b.step());
  ASSERT_TRUE(b.finished(reading));
  ASSERT_TRUE(b.finished(queued));
  for (const auto i : {reading, queued}) {
    EXPECT_EQ(b.result(i).reason, StopReason::Cancelled) << i;
    EXPECT_TRUE(b.result(i).tokens.empty()) << i;
  }
  EXPECT_EQ(b.running(), 1);
  EXPECT_EQ(b.cache().free_blocks(), all - 1) << "only the generating request's one block is held";
  stop_generating = true;
  EXPECT_FALSE(b.step());  // it ends before a forward: nothing left
  EXPECT_EQ(b.result(generating).reason, StopReason::Cancelled);
  EXPECT_EQ(b.result(generating).tokens.size(), 3u);  // one per step before the cancel
  EXPECT_EQ(b.cache().free_blocks(), all);
}

// release() hands a finished request's result out and its index to the next add(): a
// BatchGenerator that serves request after request holds only the unfinished ones.
TEST_F(BatchGeneratorTest, ReleasedRequestsAreForgotten) {
  BatchGenerator b(*model_, *tok_, ctx_, {.n_parallel = 2, .n_ctx = 64, .sampling = greedy()});
  const Request req{.max_tokens = 4, .ignore_eos = true};
  const std::string want = solo("zzz", req, 64).text;
  for (int round = 0; round < 20; ++round) {
    const std::size_t i = b.add(ids("zzz"), req), j = b.add(ids("Hi"), req);
    EXPECT_LT(std::max(i, j), 2u) << "round " << round << ": indices are reused";
    EXPECT_EQ(b.held(), 2);
    while (b.step()) {
    }
    EXPECT_EQ(b.release(i).text, want);
    EXPECT_EQ(b.release(j).tokens.size(), 4u);
    EXPECT_EQ(b.held(), 0);
    EXPECT_FALSE(b.finished(i));
    EXPECT_THROW(b.release(i), Error);
  }
}

TEST_F(BatchGeneratorTest, BadRequestsAreClearErrors) {
  BatchGenerator b(*model_, *tok_, ctx_, {.n_parallel = 2, .n_ctx = 8, .sampling = greedy()});
  EXPECT_THROW(b.add({}, {}), Error);
  EXPECT_THROW(b.add(ids("a prompt longer than eight tokens"), {}), Error);
  EXPECT_THROW(BatchGenerator(*model_, *tok_, ctx_, {.n_parallel = 4, .n_ctx = 8, .n_batch = 2}), Error);
}

// `fucina run -f FILE --parallel N` prints, labelled or as JSON lines in file order, what
// each prompt prints alone; bad flag combinations are one-line usage errors.
TEST_F(BatchGeneratorTest, CliParallelPrintsWhatEachPromptPrintsAlone) {
  FUCINA_REQUIRE_CLI();
  const std::vector<std::string> prompts = {kPrompts[0], kPrompts[1], kPrompts[2], kPrompts[6]};  // one line each
  const auto file = dir_ / "prompts.txt";
  {
    std::ofstream f(file);
    for (const auto& p : prompts) f << p << "\n\n";  // blank lines are skipped
  }
  std::vector<Result> alone;
  for (const auto& p : prompts) {
    alone.push_back(solo(p, {.max_tokens = 15, .ignore_eos = true}, 0));
    ASSERT_FALSE(alone.back().text.empty());
  }
  const std::string common = fmt::format("run '{}' -f '{}' -n 15 --temp 0 --ignore-eos -t 2 --parallel 3", path().string(),
                                         file.string());
  const auto jsonl = test::run_fucina(common + " --jsonl", test::Capture::Stdout);
  ASSERT_EQ(jsonl.status, 0) << jsonl.output;
  std::istringstream lines(jsonl.output);
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    ASSERT_LT(n, prompts.size());
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("index"), n);
    EXPECT_EQ(j.at("prompt"), prompts[n]);
    // JSON strings are UTF-8: this random model's invalid bytes print as U+FFFD.
    const auto text = nlohmann::json(alone[n].text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    EXPECT_EQ(j.at("text"), nlohmann::json::parse(text)) << n;
    EXPECT_EQ(j.at("tokens"), 15);
    EXPECT_EQ(j.at("stop"), "length");
  }
  EXPECT_EQ(n, prompts.size());

  const auto labelled = test::run_fucina(common, test::Capture::Stdout);
  ASSERT_EQ(labelled.status, 0) << labelled.output;
  std::string want;
  for (std::size_t i = 0; i < prompts.size(); ++i) want += fmt::format("--- [{}] {}\n{}\n", i + 1, prompts[i], alone[i].text);
  EXPECT_EQ(labelled.output, want);

  const std::string model = fmt::format("run '{}' ", path().string());
  const std::string f = " -f '" + file.string() + "'";
  for (const std::string& bad : std::vector<std::string>{"-p hi --parallel 2", f + " --parallel 0", f + " --jsonl"}) {
    const auto r = test::run_fucina(model + bad, test::Capture::Stderr);
    EXPECT_EQ(r.status, 2) << bad;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << bad << ": " << r.output;
  }
}

}  // namespace
