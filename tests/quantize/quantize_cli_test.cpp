// `fucina quantize` end to end: output equal to the library's, usage and file errors as one
// line with a non-zero exit. Skips when the CLI binary has not been built in this tree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_cli.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"
#include "quantize/golden_support.hpp"
#include "quantize/synth_model.hpp"

namespace fucina::quant {
namespace {

using fucina::test::CliResult;
using fucina::test::run_cli;

class QuantizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    cli_ = std::filesystem::path(FUCINA_BINARY_DIR) / "fucina";
    if (!std::filesystem::exists(cli_)) GTEST_SKIP() << "CLI not built at " << cli_;
    dir_ = std::filesystem::temp_directory_path() / ("fucina_quantize_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    const auto bytes = test::make_synth_model(test::synth_specs()[1]);
    in_ = dir_ / "in.gguf";
    std::ofstream(in_, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string cmd(const std::string& args) const { return "'" + cli_.string() + "' quantize " + args; }
  std::filesystem::path cli_, dir_, in_;
};

TEST_F(QuantizeCli, WritesTheGoldenFile) {
  const auto out = dir_ / "out.gguf";
  const CliResult r = run_cli(cmd("-t 2 '" + in_.string() + "' '" + out.string() + "' q4_k_m"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("blk.1.ffn_down.weight"), std::string::npos) << r.output;  // per-tensor lines (no tty)
  std::string want;
  for (const auto& m : test::load_quantize_goldens())
    if (m.name == test::synth_specs()[1].name)
      for (const auto& o : m.outputs)
        if (o.type == "Q4_K_M" && o.flags.empty()) want = o.sha256;
  ASSERT_FALSE(want.empty());
  const auto q = gguf::Reader::open(out);
  EXPECT_EQ(test::sha256_hex(q.bytes()), want);
  // A file llama-quantize made (same bytes) re-emits byte for byte through the GGUF writer.
  const auto again = gguf::Writer::from_reader(q).to_bytes();
  ASSERT_EQ(again.size(), q.bytes().size());
  EXPECT_TRUE(std::equal(again.begin(), again.end(), q.bytes().begin()));
}

TEST_F(QuantizeCli, CopyReemitsTheInputByteForByte) {
  const auto out = dir_ / "copy.gguf";
  const CliResult r = run_cli(cmd("'" + in_.string() + "' '" + out.string() + "' COPY"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto a = gguf::Reader::open(in_), b = gguf::Reader::open(out);
  ASSERT_EQ(a.bytes().size(), b.bytes().size());
  EXPECT_TRUE(std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin()));
  // --llama-copy follows llama-quantize's COPY instead (its golden hash).
  const auto out2 = dir_ / "llama_copy.gguf";
  ASSERT_EQ(run_cli(cmd("--llama-copy '" + in_.string() + "' '" + out2.string() + "' COPY")).status, 0);
  std::string want;
  for (const auto& m : test::load_quantize_goldens())
    if (m.name == test::synth_specs()[1].name)
      for (const auto& o : m.outputs)
        if (o.type == "COPY" && o.flags.empty()) want = o.sha256;
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(test::sha256_hex(gguf::Reader::open(out2).bytes()), want);
}

TEST_F(QuantizeCli, ErrorsAreOneLineWithNonZeroExit) {
  const auto out = (dir_ / "o.gguf").string();
  const auto one_line = [](const CliResult& r) { return std::count(r.output.begin(), r.output.end(), '\n') == 1; };
  CliResult r = run_cli(cmd("'" + (dir_ / "missing.gguf").string() + "' '" + out + "' Q8_0"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(one_line(r)) << r.output;
  EXPECT_NE(r.output.find("cannot open"), std::string::npos) << r.output;

  r = run_cli(cmd("'" + in_.string() + "' '" + out + "' Q9_X"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(one_line(r)) << r.output;
  EXPECT_NE(r.output.find("unknown TYPE"), std::string::npos) << r.output;

  const auto corrupt = dir_ / "corrupt.gguf";
  std::ofstream(corrupt, std::ios::binary) << "GGUF\x03garbage";
  r = run_cli(cmd("'" + corrupt.string() + "' '" + out + "' Q8_0"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(one_line(r)) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));

  r = run_cli(cmd("--threads 0 a b Q8_0"));
  EXPECT_EQ(r.status, 2);
  r = run_cli(cmd("--bogus a b Q8_0"));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(run_cli(cmd("--help")).status, 0);
}

}  // namespace
}  // namespace fucina::quant
