// `fucina --help` and `fucina CMD --help` for every subcommand: the help goes to stdout
// (so `fucina run --help | less` works), nothing to stderr, exit 0. A usage error still
// prints the usage to stderr with exit 2. Skips when the CLI binary has not been built.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_cli.hpp"

namespace {

using fucina::test::Capture;
using fucina::test::CliResult;
using fucina::test::run_fucina;

class HelpCli : public ::testing::Test {
 protected:
  void SetUp() override { FUCINA_REQUIRE_CLI(); }
  static CliResult stdout_of(const std::string& args) { return run_fucina(args, Capture::Stdout); }
  static CliResult stderr_of(const std::string& args) { return run_fucina(args, Capture::Stderr); }
};

// The command names listed by `fucina --help` ("  name   summary" lines after "commands:").
std::vector<std::string> listed_commands(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream in(help);
  std::string line;
  bool in_list = false;
  while (std::getline(in, line)) {
    if (line == "commands:") in_list = true;
    else if (in_list && line.rfind("  ", 0) == 0) names.push_back(line.substr(2, line.find(' ', 2) - 2));
    else if (in_list) break;
  }
  return names;
}

TEST_F(HelpCli, TopLevelHelpIsOnStdout) {
  for (const char* flag : {"--help", "-h"}) {
    const CliResult out = stdout_of(flag);
    EXPECT_EQ(out.status, 0) << flag;
    EXPECT_EQ(out.output.rfind("usage: fucina <command>", 0), 0u) << out.output;
    const CliResult err = stderr_of(flag);
    EXPECT_EQ(err.output, "") << flag;
  }
  const auto names = listed_commands(stdout_of("--help").output);
  for (const char* cmd : {"bench", "export-lora", "inspect", "quantize", "run", "synth", "tokenize"})
    EXPECT_NE(std::find(names.begin(), names.end(), cmd), names.end()) << cmd << " not listed";
}

TEST_F(HelpCli, EverySubcommandHelpIsOnStdout) {
  const auto names = listed_commands(stdout_of("--help").output);
  ASSERT_FALSE(names.empty());
  for (const auto& cmd : names) {
    for (const char* flag : {"--help", "-h"}) {
      SCOPED_TRACE(cmd + " " + flag);
      const CliResult out = stdout_of(cmd + " " + flag);
      EXPECT_EQ(out.status, 0);
      EXPECT_EQ(out.output.rfind("usage: fucina " + cmd, 0), 0u) << out.output;
      EXPECT_EQ(stderr_of(cmd + " " + flag).output, "");
    }
  }
}

TEST_F(HelpCli, UsageErrorsStayOnStderr) {
  for (const char* args : {"", "frobnicate"}) {
    SCOPED_TRACE(args);
    const CliResult out = stdout_of(args);
    EXPECT_EQ(out.status, 2);
    EXPECT_EQ(out.output, "");
    EXPECT_NE(stderr_of(args).output.find("usage: fucina <command>"), std::string::npos);
  }
}

}  // namespace
