// `fucina synth` end to end: the file it writes is the library's, `fucina run` generates from
// it (the same greedy text as llama.cpp), bad flags are one line with exit 2. Skips when
// the CLI binary has not been built in this tree.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fucina/model/synth.hpp"
#include "support/run_cli.hpp"

namespace {

using fucina::test::CliResult;
using fucina::test::run_cli;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

class SynthCli : public ::testing::Test {
 protected:
  void SetUp() override {
    cli_ = fucina::test::cli_path();
    if (!std::filesystem::exists(cli_)) GTEST_SKIP() << "CLI not built at " << cli_;
    dir_ = std::filesystem::temp_directory_path() / ("fucina_synth_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // In a subshell, so an args-level 2>/dev/null wins over run_cli's 2>&1.
  CliResult fucina(const std::string& args) const { return run_cli("('" + cli_.string() + "' " + args + ")"); }
  std::string path(const std::string& name) const { return fmt::format("'{}'", (dir_ / name).string()); }
  std::filesystem::path cli_, dir_;
};

TEST_F(SynthCli, WritesTheLibrarysFileAndRunGeneratesFromIt) {
  const CliResult r = fucina("synth " + path("t.gguf") + " --arch llama --dtype f16 --seed 1 -t 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("llama"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("params"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("MiB"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "summary is one line: " << r.output;

  fucina::model::SynthSpec s;
  s.arch = "llama";
  s.dtype = fucina::DType::f16;
  s.seed = 1;
  fucina::model::write_synthetic_model(dir_ / "lib.gguf", s);
  EXPECT_EQ(slurp(dir_ / "t.gguf"), slurp(dir_ / "lib.gguf"));

  // stdout only; llama-oracle on this file, prompt "Hello", 4 greedy tokens: bytes 76 14 08 1a.
  const CliResult g = fucina("run " + path("t.gguf") + " -p Hello -n 4 --temp 0 -t 2 2>/dev/null");
  ASSERT_EQ(g.status, 0) << g.output;
  EXPECT_EQ(g.output, "\x76\x14\x08\x1a");
}

TEST_F(SynthCli, EveryArchRuns) {
  for (const char* arch : {"qwen3", "qwen3moe"}) {
    const std::string f = path(std::string(arch) + ".gguf");
    ASSERT_EQ(fucina(std::string("synth ") + f + " --arch " + arch + " --hidden 32 --heads 2 --kv-heads 1 --tied").status, 0);
    const CliResult g = fucina("run " + f + " -p Hi -n 4 --temp 0");
    EXPECT_EQ(g.status, 0) << arch << ": " << g.output;
  }
}

TEST_F(SynthCli, BadFlagsAreOneLineWithExitTwo) {
  const std::string out = path("bad.gguf");
  const char* bad[] = {
      "",                                          // no output
      " --arch qwen3",                             // no output file
      " OUT",                                      // no --arch
      " OUT --arch gpt2",                          // unknown arch
      " OUT --arch qwen3 --bogus",                 // unknown flag
      " OUT --arch qwen3 --hidden",                // missing value
      " OUT --arch qwen3 --hidden 12x",            // bad number
      " OUT --arch qwen3 --hidden -64",            // negative
      " OUT --arch qwen3 --rope-base nan",         // not finite
      " OUT --arch qwen3 --heads 4 --kv-heads 3",  // kv-heads not dividing heads
      " OUT --arch qwen3 --hidden 66 --heads 4",   // hidden not divisible
      " OUT --arch qwen3 --head-dim 7",            // odd head dim
      " OUT --arch qwen3moe --experts-used 9",     // more used than experts
      " OUT --arch qwen3 --dtype q4_0",            // unknown dtype
      " OUT --arch qwen3 -t 0",                    // no threads
      " OUT OUT2 --arch qwen3",                    // two outputs
  };
  for (const char* b : bad) {
    std::string args = b;
    if (const auto p = args.find(" OUT"); p != std::string::npos) args = args.substr(0, p) + " " + out + args.substr(p + 4);
    const CliResult r = fucina("synth" + args);
    EXPECT_EQ(r.status, 2) << b << ": " << r.output;
    EXPECT_EQ(r.output.rfind("fucina synth: ", 0), 0u) << b << ": " << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << b << ": " << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad.gguf"));
  const CliResult missing = fucina("synth " + out + " --arch qwen3 --vocab " + path("none.gguf"));
  EXPECT_EQ(missing.status, 1) << missing.output;
  EXPECT_EQ(missing.output.find('\n'), missing.output.size() - 1) << missing.output;
}

TEST_F(SynthCli, HelpAndRunWithoutModelPointToSynth) {
  const CliResult h = fucina("synth --help");
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.output.find("--kv-heads"), std::string::npos) << h.output;
  // With no model and no default model (a copy of the binary away from the tree, Note [Default
  // model lookup]), `fucina run` points at synth.
  const auto lone = dir_ / "bin" / "fucina";
  std::filesystem::create_directories(lone.parent_path());
  std::filesystem::copy_file(cli_, lone);
  const CliResult r = run_cli("(unset FUCINA_MODEL; '" + lone.string() + "' run)");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no default model found"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fucina synth"), std::string::npos) << r.output;
}

// An output that exists and is not a regular file is refused before any work, and kept.
TEST_F(SynthCli, RefusesADirectoryOutputAndKeepsIt) {
  std::filesystem::create_directory(dir_ / "d");
  const CliResult r = fucina("synth " + path("d") + " --arch qwen3");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  EXPECT_NE(r.output.find("is a directory"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "d"));
}

}  // namespace
