// `fucina run --moe-stream` end to end: under an address-space limit (RLIMIT_AS, via
// prlimit) smaller than the model file, the resident run cannot map the model and fails,
// the streamed run prints the resident run's greedy text byte for byte. Bad flags are one
// line and a non-zero exit. Skips when the CLI has not been built.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "fucina/model/synth.hpp"
#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"

// A sanitized build's CLI reserves terabytes of shadow address space: RLIMIT_AS cannot hold it.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FUCINA_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FUCINA_TEST_SANITIZED 1
#endif

namespace {

using fucina::test::expect_one_line_error;
using fucina::test::run_cli;

class MoeStreamCli : public fucina::test::TempDirTest {
 protected:
  MoeStreamCli() : TempDirTest("moe_stream_cli") {}
  void SetUp() override {
    TempDirTest::SetUp();
    if (!std::filesystem::exists(fucina::test::cli_path())) GTEST_SKIP() << "CLI not built at " << fucina::test::cli_path();
  }
  // `fucina ARGS` under `limit` (empty: none), stdout only.
  fucina::test::CliResult run(const std::string& args, const std::string& limit = "", bool with_stderr = false) const {
    return run_cli(fmt::format("(MALLOC_ARENA_MAX=1 {} '{}' {}{})", limit, fucina::test::cli_path().string(), args,
                               with_stderr ? "" : " 2>/dev/null"));
  }
  std::string model(const char* name) const { return fmt::format("'{}'", (dir_ / name).string()); }
};

TEST_F(MoeStreamCli, StreamedRunFitsWhereTheResidentOneCannot) {
#ifdef FUCINA_TEST_SANITIZED
  GTEST_SKIP() << "an address-space limit cannot hold a sanitizer's shadow memory";
#endif
  // 2 layers x 64 experts of 3 x 256 x 2048 f16: 384 MiB of experts, everything else < 2 MiB.
  fucina::model::SynthSpec s;
  s.arch = "qwen3moe", s.n_embd = 256, s.n_head = 4, s.n_head_kv = 1, s.n_layer = 2;
  s.n_expert = 64, s.n_expert_used = 4, s.n_ff_exp = 2048, s.dtype = fucina::DType::f16;
  fucina::model::write_synthetic_model(dir_ / "big.gguf", s);
  ASSERT_GT(std::filesystem::file_size(dir_ / "big.gguf"), std::uintmax_t{384} << 20);

  const std::string gen = " -p 'The expert cache' -n 12 --temp 0 -t 1 --ctx 128";
  const auto resident = run("run " + model("big.gguf") + gen);
  ASSERT_EQ(resident.status, 0) << resident.output;
  ASSERT_FALSE(resident.output.empty());

  const std::string limit = fmt::format("prlimit --as={}", std::uint64_t{256} << 20);
  const auto resident_limited = run("run " + model("big.gguf") + gen, limit, true);
  EXPECT_NE(resident_limited.status, 0) << "the resident path must not fit under the limit: " << resident_limited.output;

  const auto streamed = run("run " + model("big.gguf") + gen + " --moe-stream --moe-cache 32", limit);
  EXPECT_EQ(streamed.status, 0);
  EXPECT_EQ(streamed.output, resident.output);
}

TEST_F(MoeStreamCli, BadFlagsAreOneLineErrors) {
  fucina::model::SynthSpec s;
  s.arch = "qwen3moe";
  fucina::model::write_synthetic_model(dir_ / "moe.gguf", s);
  s.arch = "qwen3";
  fucina::model::write_synthetic_model(dir_ / "dense.gguf", s);
  for (const char* cmd : {"run", "bench"}) {
    SCOPED_TRACE(cmd);
    const std::string tail = std::string(cmd) == "run" ? " -p hi -n 1" : " -p 1 -n 1 -r 1";
    expect_one_line_error(run(fmt::format("{} {}{} --moe-cache 0", cmd, model("moe.gguf"), tail), "", true), 2, "--moe-cache");
    expect_one_line_error(run(fmt::format("{} {}{} --moe-cache lots", cmd, model("moe.gguf"), tail), "", true), 2, "--moe-cache");
    expect_one_line_error(run(fmt::format("{} {}{} --moe-cache", cmd, model("moe.gguf"), tail), "", true), 2, "--moe-cache");
    expect_one_line_error(run(fmt::format("{} {}{} --moe-stream", cmd, model("dense.gguf"), tail), "", true), 1,
                          "not a mixture-of-experts model");
  }
  // One expert of the default synth (3 x 64 x 64 f32, 48 KiB) fits 1 MiB; a model with
  // 1.5 MiB experts does not.
  s.arch = "qwen3moe", s.n_embd = 256, s.n_head = 4, s.n_ff_exp = 512;
  fucina::model::write_synthetic_model(dir_ / "wide.gguf", s);
  expect_one_line_error(run("run " + model("wide.gguf") + " -p hi -n 1 --moe-cache 1", "", true), 1, "cannot hold one expert");
  const auto ok = run("run " + model("moe.gguf") + " -p hi -n 2 --temp 0 --moe-cache 1");
  EXPECT_EQ(ok.status, 0);
  EXPECT_EQ(ok.output, run("run " + model("moe.gguf") + " -p hi -n 2 --temp 0").output);
}

}  // namespace
