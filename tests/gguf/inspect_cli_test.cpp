// `fucina inspect` end to end: runs the built CLI on a generated file and on a corrupt one.
// Skips when the CLI binary has not been built in this build tree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_cli.hpp"
#include "fucina/gguf/writer.hpp"
#include "sample_file.hpp"

namespace fucina::gguf {
namespace {

using fucina::test::CliResult;
using fucina::test::run_cli;

class InspectCli : public ::testing::Test {
 protected:
  void SetUp() override {
    cli_ = std::filesystem::path(FUCINA_BINARY_DIR) / "fucina";
    if (!std::filesystem::exists(cli_)) GTEST_SKIP() << "CLI not built at " << cli_;
    dir_ = std::filesystem::temp_directory_path() / fmt::format("fucina_inspect_{}", ::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path cli_, dir_;
};

TEST_F(InspectCli, PrintsHeaderMetadataAndTensors) {
  test::SampleFile s;
  test::fill_sample(s, 64);
  std::vector<std::int32_t> many(1000, 7);
  s.writer.set_array<std::int32_t>("t.many", many);
  const auto path = dir_ / "m.gguf";
  s.writer.write_file(path);
  const CliResult r = run_cli(fmt::format("'{}' inspect '{}'", cli_.string(), path.string()));
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* want : {"GGUF v3, alignment 64", "general.architecture", "\"llama\"", "arr[i32,1000]",
                           "[7, 7, 7, 7, 7, 7, ... (1000 items)]", "blk.0.attn_q.weight", "q8_0", "[5, 3]"})
    EXPECT_NE(r.output.find(want), std::string::npos) << "missing '" << want << "' in:\n" << r.output;
}

TEST_F(InspectCli, CorruptAndMissingFilesFailWithOneLine) {
  const auto path = dir_ / "bad.gguf";
  const char bad[] = "GGUF\x07\x00\x00\x00 garbage";
  std::ofstream(path, std::ios::binary).write(bad, sizeof bad - 1);
  CliResult r = run_cli(fmt::format("'{}' inspect '{}'", cli_.string(), path.string()));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unsupported version 7"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  r = run_cli(fmt::format("'{}' inspect '{}'", cli_.string(), (dir_ / "missing.gguf").string()));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("cannot open"), std::string::npos) << r.output;
  r = run_cli(fmt::format("'{}' inspect --bogus", cli_.string()));
  EXPECT_EQ(r.status, 2);
  r = run_cli(fmt::format("'{}' inspect --help", cli_.string()));
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("usage: fucina inspect"), std::string::npos);
}

}  // namespace
}  // namespace fucina::gguf
