// `fucina quantize` end to end: output equal to the library's, usage and file errors as one
// line with a non-zero exit. Skips when the CLI binary has not been built in this tree.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
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
  static std::string q(const std::filesystem::path& p) { return "'" + p.string() + "'"; }
  static std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
  }
  static bool one_line(const CliResult& r) { return std::count(r.output.begin(), r.output.end(), '\n') == 1; }
  // Files in the work directory other than the input and `keep` (leftover temporaries).
  std::size_t stray_files(const std::filesystem::path& keep) const {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) n += e.path() != in_ && e.path() != keep;
    return n;
  }
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
  for (const char* kv : {"noequals", "k=int:12x", "k=float:nan", "k=bool:yes", "k=blob:1", "k=int:4294967296"}) {
    r = run_cli(cmd(std::string("--override-kv '") + kv + "' '" + in_.string() + "' '" + out + "' Q8_0"));
    EXPECT_EQ(r.status, 2) << kv;
    EXPECT_TRUE(one_line(r)) << r.output;
    EXPECT_NE(r.output.find("KV override"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(run_cli(cmd("--help")).status, 0);
}

// Issue 17: a refused or failed quantize leaves whatever was at OUT exactly as it was, for
// every TYPE (COPY took another code path and truncated its own input).
TEST_F(QuantizeCli, RefusesADirectoryOutputAndKeepsIt) {
  const auto d = dir_ / "d";
  std::filesystem::create_directory(d);
  for (const char* type : {"Q8_0", "COPY"}) {
    const CliResult r = run_cli(cmd(q(in_) + " " + q(d) + " " + type));
    EXPECT_EQ(r.status, 1) << type;
    EXPECT_TRUE(one_line(r)) << r.output;
    EXPECT_NE(r.output.find("is a directory"), std::string::npos) << r.output;
    EXPECT_TRUE(std::filesystem::is_directory(d)) << type;
  }
}

TEST_F(QuantizeCli, RefusesADeviceOutputAndKeepsIt) {
  // A node with /dev/full's numbers (1, 7) when root may create one, else a FIFO.
  const auto dev = dir_ / "full";
  const bool is_dev = ::mknod(dev.c_str(), S_IFCHR | 0600, makedev(1, 7)) == 0;
  if (!is_dev) {
    ASSERT_EQ(::mkfifo(dev.c_str(), 0600), 0);
  }
  for (const char* type : {"Q8_0", "COPY", "--llama-copy COPY"}) {
    const CliResult r = run_cli(cmd(q(in_) + " " + q(dev) + " " + type));
    EXPECT_EQ(r.status, 1) << type;
    EXPECT_TRUE(one_line(r)) << r.output;
    EXPECT_NE(r.output.find(is_dev ? "character device" : "FIFO"), std::string::npos) << r.output;
    struct stat st{};
    ASSERT_EQ(::lstat(dev.c_str(), &st), 0) << type << ": the node was removed";
    EXPECT_TRUE(is_dev ? S_ISCHR(st.st_mode) : S_ISFIFO(st.st_mode)) << type;
  }
}

TEST_F(QuantizeCli, RefusesTheInputAsOutputForEveryType) {
  const std::string before = slurp(in_);
  std::filesystem::create_symlink(in_, dir_ / "sym.gguf");
  std::filesystem::create_hard_link(in_, dir_ / "hard.gguf");
  for (const char* out : {"in.gguf", "sym.gguf", "hard.gguf"})
    for (const char* type : {"Q8_0", "Q4_K_M", "COPY", "--llama-copy COPY"}) {
      const CliResult r = run_cli(cmd(q(in_) + " " + q(dir_ / out) + " " + type));
      EXPECT_EQ(r.status, 1) << out << " " << type;
      EXPECT_TRUE(one_line(r)) << r.output;
      EXPECT_NE(r.output.find("is the input file"), std::string::npos) << r.output;
      EXPECT_EQ(slurp(in_), before) << out << " " << type << ": the input changed";
    }
}

// `ulimit -f` (setrlimit(RLIMIT_FSIZE) in the CLI's shell) stops the write part-way: with
// SIGXFSZ fatal the process dies, with it ignored the write fails with EFBIG. OUT keeps its
// old contents either way; the error path also removes its temporary file.
TEST_F(QuantizeCli, AFileSizeLimitLeavesTheOldOutput) {
  const auto out = dir_ / "out.gguf";
  for (const char* type : {"Q8_0", "COPY"})
    for (const bool ignore : {true, false}) {
      std::ofstream(out, std::ios::binary) << "previous contents\n";
      const CliResult r = run_cli(std::string("(ulimit -f 8; ") + (ignore ? "trap '' XFSZ; " : "") +
                                  cmd(q(in_) + " " + q(out) + " " + type) + ")");
      EXPECT_NE(r.status, 0) << type << ": the 8 KiB limit did not stop it\n" << r.output;
      EXPECT_EQ(slurp(out), "previous contents\n") << type << (ignore ? " (SIGXFSZ ignored)" : " (killed)");
      if (ignore) {
        EXPECT_NE(r.output.find("File too large"), std::string::npos) << r.output;
        EXPECT_EQ(stray_files(out), 0u) << type;
      } else {  // killed mid-write: only the temporary file can be left, beside OUT
        for (const auto& e : std::filesystem::directory_iterator(dir_)) {
          const std::string name = e.path().filename().string();
          if (e.path() == in_ || e.path() == out) continue;
          EXPECT_TRUE(name.starts_with(".out.gguf.") && name.ends_with(".tmp")) << name;
          std::filesystem::remove(e.path());
        }
      }
    }
}

}  // namespace
}  // namespace fucina::quant