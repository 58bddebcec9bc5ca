// `fucina run` and `fucina bench` end to end on a small synthetic model: bad input is one
// line and a non-zero exit, --chat feeds exactly the library's template render, -i holds a
// conversation from stdin, the bench's JSON has llama-bench's fields (with --parallel,
// llama-batched-bench's). Skips when the CLI binary has not been built in this tree.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/model/synth.hpp"
#include "fucina/tokenizer/chat_template.hpp"
#include "support/run_cli.hpp"

namespace {

using fucina::test::CliResult;
using fucina::test::expect_one_line_error;
using fucina::test::run_cli;

class RunCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("fucina_run_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    fucina::model::SynthSpec spec;
    spec.arch = "qwen3";
    spec.n_embd = 64;
    spec.n_layer = 2;
    spec.n_ff = 128;
    spec.n_ctx = 256;
    spec.seed = 4;
    fucina::model::write_synthetic_model(dir_ / "m.gguf", spec);
    std::ofstream(dir_ / "corrupt.gguf", std::ios::binary) << "GGUF\x03\x00\x00\x00garbage";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  void SetUp() override {
    if (!std::filesystem::exists(fucina::test::cli_path())) GTEST_SKIP() << "CLI not built at " << fucina::test::cli_path();
  }
  // stdout only (stderr dropped) or both, in a subshell so redirections compose.
  static CliResult run(const std::string& args, bool with_stderr = true) {
    return run_cli(fmt::format("('{}' {}{})", fucina::test::cli_path().string(), args, with_stderr ? "" : " 2>/dev/null"));
  }
  static std::string model() { return fmt::format("'{}'", (dir_ / "m.gguf").string()); }
  static inline std::filesystem::path dir_;
};

TEST_F(RunCli, BadInputIsOneLineAndNonZero) {
  expect_one_line_error(run("run /nonexistent/x.gguf -p hi"), 1, "x.gguf");
  expect_one_line_error(run(fmt::format("run '{}' -p hi", (dir_ / "corrupt.gguf").string())), 1, "corrupt.gguf");
  expect_one_line_error(run("run " + model() + " -p hi --frobnicate"), 2, "--frobnicate");
  expect_one_line_error(run("run " + model() + " -p hi --threads 0"), 2, "--threads");
  expect_one_line_error(run("run " + model() + " -p hi --temp abc"), 2, "abc");
  expect_one_line_error(run("run " + model() + " -p hi --system x"), 2, "--system");
  // 256-token context, a prompt far longer.
  std::string longp;
  for (int i = 0; i < 100; ++i) longp += "word ";
  const CliResult r = run("run " + model() + " -p '" + longp + "' -n 4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("context"), std::string::npos) << r.output;
}

TEST_F(RunCli, StdoutCarriesExactlyTheCompletion) {
  const CliResult plain = run("run " + model() + " -p 'abc' -n 6 --temp 0", false);
  ASSERT_EQ(plain.status, 0) << plain.output;
  const CliResult echo = run("run " + model() + " -p 'abc' -n 6 --temp 0 --echo", false);
  ASSERT_EQ(echo.status, 0) << echo.output;
  EXPECT_EQ(echo.output, "abc" + plain.output);  // greedy: the same completion
}

TEST_F(RunCli, ChatFeedsTheTemplateRender) {
  // The synthetic model has no template: llama.cpp's ChatML default applies.
  const CliResult r = run("run " + model() + " --chat --system 'Be brief.' -p 'Hello' -n 0 --echo", false);
  ASSERT_EQ(r.status, 0) << r.output;
  const fucina::tokenizer::ChatMessage msgs[] = {{"system", "Be brief."}, {"user", "Hello"}};
  const std::string want =
      fucina::tokenizer::apply_chat_template(fucina::tokenizer::default_chat_template(), msgs, true, "", "");
  EXPECT_EQ(r.output, want);
  EXPECT_NE(want.find("<|im_start|>assistant\n"), std::string::npos);
}

TEST_F(RunCli, InteractiveChatReadsTurnsFromStdin) {
  const CliResult r = run_cli(fmt::format("(printf 'Hello\\nsecond \\\\\\nline\\n/exit\\nignored\\n' | '{}' run {} -i -n 3 --temp 0)",
                                          fucina::test::cli_path().string(), model()));
  ASSERT_EQ(r.status, 0) << r.output;
  // Two turns ran (two speed lines), the third line was never read as a turn.
  std::size_t turns = 0;
  for (std::size_t p = r.output.find("generated"); p != std::string::npos; p = r.output.find("generated", p + 1)) ++turns;
  EXPECT_EQ(turns, 2u) << r.output;
}

TEST_F(RunCli, BenchJsonHasLlamaBenchFields) {
  const CliResult r = run("bench " + model() + " -p 8 -n 4 -r 2 -t 1 -o json", false);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j.size(), 2u);
  for (const auto& rec : j) {
    for (const char* key : {"model_filename", "n_prompt", "n_gen", "n_threads", "avg_ts", "stddev_ts"})
      EXPECT_TRUE(rec.contains(key)) << key;
    EXPECT_EQ(rec["n_threads"], 1);
    EXPECT_GT(rec["avg_ts"].get<double>(), 0.0);
    EXPECT_EQ(rec["samples_ts"].size(), 2u);
  }
  EXPECT_EQ(j[0]["n_prompt"], 8);
  EXPECT_EQ(j[1]["n_gen"], 4);
  const CliResult md = run("bench " + model() + " -p 8 -n 0 -r 1 -t 1", false);
  EXPECT_NE(md.output.find("| pp8 |"), std::string::npos) << md.output;
}

// -d: one record per depth, carrying it as llama-bench's n_depth; md names it "tg4 @ d8".
TEST_F(RunCli, BenchDepthRecordsCarryTheDepth) {
  const CliResult r = run("bench " + model() + " -p 0 -n 4 -d 0,8 -r 1 -t 1 -o json", false);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["n_depth"], 0);
  EXPECT_EQ(j[1]["n_depth"], 8);
  for (const auto& rec : j) {
    EXPECT_EQ(rec["n_gen"], 4);
    EXPECT_GT(rec["avg_ts"].get<double>(), 0.0);
  }
  const CliResult md = run("bench " + model() + " -p 0 -n 4 -d 8 -r 1 -t 1", false);
  EXPECT_NE(md.output.find("| tg4 @ d8 |"), std::string::npos) << md.output;
  // The depth counts toward the context: 250 + 8 positions pass the 256-token model's.
  const CliResult deep = run("bench " + model() + " -p 250 -n 0 -d 8 -r 1 -t 1");
  EXPECT_EQ(deep.status, 0) << deep.output;
  EXPECT_NE(deep.output.find("258 tokens exceed"), std::string::npos) << deep.output;
}

// --parallel: one record per stream count, llama-batched-bench's names, its arithmetic.
TEST_F(RunCli, BenchParallelJsonHasBatchedBenchFields) {
  const CliResult r = run("bench " + model() + " --parallel 1,3 -p 8 -n 4 -r 1 -t 1 -o json", false);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& rec = j[i];
    const std::int64_t pl = i == 0 ? 1 : 3;
    EXPECT_EQ(rec["pp"], 8);
    EXPECT_EQ(rec["tg"], 4);
    EXPECT_EQ(rec["pl"], pl);
    EXPECT_EQ(rec["n_kv"], pl * 12);
    const double t_pp = rec["t_pp"], t_tg = rec["t_tg"];
    ASSERT_GT(t_pp, 0.0);
    ASSERT_GT(t_tg, 0.0);
    EXPECT_NEAR(rec["speed_pp"].get<double>(), static_cast<double>(pl * 8) / t_pp, 1e-6 * rec["speed_pp"].get<double>());
    EXPECT_NEAR(rec["speed_tg"].get<double>(), static_cast<double>(pl * 4) / t_tg, 1e-6 * rec["speed_tg"].get<double>());
    EXPECT_NEAR(rec["t"].get<double>(), t_pp + t_tg, 1e-12);
    EXPECT_NEAR(rec["speed"].get<double>(), static_cast<double>(pl * 12) / (t_pp + t_tg), 1e-6 * rec["speed"].get<double>());
  }
  const CliResult md = run("bench " + model() + " --parallel 2 -p 8 -n 4 -r 1 -t 1", false);
  EXPECT_NE(md.output.find("| S_TG t/s |"), std::string::npos) << md.output;
}

TEST_F(RunCli, BenchBadFlags) {
  expect_one_line_error(run("bench " + model() + " --parallel 0"), 2, "--parallel");
  expect_one_line_error(run("bench " + model() + " --parallel 2 -p 8,16"), 2, "--parallel");
  expect_one_line_error(run("bench " + model() + " -r 0"), 2, "--repetitions");
  expect_one_line_error(run("bench " + model() + " -d -1"), 2, "-d");
  expect_one_line_error(run("bench " + model() + " --parallel 2 -d 8"), 2, "-d");
  expect_one_line_error(run("bench " + model() + " --kv-type q4"), 2, "q4");
  expect_one_line_error(run("bench " + model() + " -ctk q8_0 -ctv f16"), 2, "must match");
  // The test model's heads are 16 wide: a q8_0 cache (blocks of 32 per head row) is refused.
  expect_one_line_error(run("bench " + model() + " -p 0 -n 2 -r 1 -ctk q8_0 -ctv q8_0"), 1, "multiple of 32");
  expect_one_line_error(run("bench " + model() + " -o xml"), 2, "xml");
  expect_one_line_error(run("bench " + model() + " -p 1,x"), 2, "x");
  expect_one_line_error(run("bench"), 2, "no model");
}

// Sampler options outside their range are refused, not clamped (as --min-p 5 always was).
TEST_F(RunCli, OutOfRangeSamplerOptionsAreRefused) {
  for (const char* flag : {"--temp -1", "--top-p 2", "--top-p 0", "--top-k -5", "--min-p 5"}) {
    const CliResult r = run("run " + model() + " -p hi -n 1 " + flag);
    expect_one_line_error(r, 1, "[sampler]");
  }
}

// Text inputs are bounded and a directory is named as one; neither reads without limit.
TEST_F(RunCli, PromptFilesAreBoundedAndDirectoriesRefused) {
  expect_one_line_error(run("run " + model() + " -f /dev/zero -n 1"), 1, "larger than 64 MiB");
  expect_one_line_error(run(fmt::format("run {} -f '{}' -n 1", model(), dir_.string())), 1, "is a directory");
  expect_one_line_error(run("tokenize " + model() + " -f /dev/zero"), 1, "larger than 64 MiB");
  expect_one_line_error(run("tokenize " + model() + " --stdin < /dev/zero"), 1, "standard input is larger");
}

// A context the machine cannot hold says so (it was a bare std::bad_alloc).
TEST_F(RunCli, HugeContextNamesWhatIsTooLarge) {
  expect_one_line_error(run("run " + model() + " -p hi -n 1 -c 1000000000"), 1, "1000000000-token context needs");
}

// -t far above the cores is capped with a warning (1000 threads used to hang under ulimit -v).
TEST_F(RunCli, ThreadsAboveTheCapWarnAndRun) {
  const CliResult r = run("run " + model() + " -p hi -n 2 --temp 0 -t 100000");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: -t 100000 is more than 4x"), std::string::npos) << r.output;
}

// --dump-logits to something that is not a regular file is refused before the model loads.
TEST_F(RunCli, DumpLogitsRefusesADirectoryAndKeepsIt) {
  std::filesystem::create_directories(dir_ / "logits_dir");
  expect_one_line_error(run(fmt::format("run {} -p hi -n 1 --dump-logits '{}'", model(), (dir_ / "logits_dir").string())), 1,
                        "is a directory");
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "logits_dir"));
  expect_one_line_error(run(fmt::format("run {} -p hi -n 1 --dump-logits {}", model(), model())), 1, "is the input file");
}

// Hostile metadata in an otherwise valid model: one clear line each, values printed as the
// file holds them (u32 unsigned), a NUL in a string shown rather than cutting the message.
TEST_F(RunCli, HostileMetadataIsOneClearLine) {
  const auto variant = [](const std::string& name, const std::function<void(fucina::gguf::Writer&)>& edit) {
    const auto src = fucina::gguf::Reader::open(dir_ / "m.gguf");
    fucina::gguf::Writer w = fucina::gguf::Writer::from_reader(src);
    edit(w);
    w.write_file(dir_ / name);
    return fmt::format("'{}'", (dir_ / name).string());
  };
  const auto layers = variant("layers.gguf", [](auto& w) { w.set_u32("qwen3.block_count", 0xffffffffu); });
  expect_one_line_error(run("run " + layers + " -p hi -n 1"), 1, "block_count 4294967295");
  expect_one_line_error(run("quantize " + layers + fmt::format(" '{}' Q8_0", (dir_ / "q.gguf").string())), 1,
                        "block_count 4294967295");
  const auto ctx = variant("ctx.gguf", [](auto& w) { w.set_u32("qwen3.context_length", 0xffffffffu); });
  expect_one_line_error(run("run " + ctx + " -p hi -n 1"), 1, "4294967295-token context needs");
  const auto arch = variant("arch.gguf", [](auto& w) { w.set_string("general.architecture", std::string("qw\0en3", 6)); });
  expect_one_line_error(run("run " + arch + " -p hi -n 1"), 1, "architecture 'qw?en3' is not supported");
  const auto bos = variant("bos.gguf", [](auto& w) { w.set_u32("tokenizer.ggml.bos_token_id", 99999); });
  expect_one_line_error(run("run " + bos + " -p hi -n 1"), 1, "bos_token_id = 99999 is outside the vocabulary");
}

}  // namespace
