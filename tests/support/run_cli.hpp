#pragma once
// Runs the built `fucina` CLI for end-to-end tests.
#include <filesystem>
#include <string>

namespace fucina::test {

struct CliResult {
  int status = -1;      // exit code (-1: did not exit normally)
  std::string output;   // stdout and stderr together
};

// s as one shell word ('...', with ' written '\''), for building command lines.
std::string shell_quote(const std::string& s);

// Runs a shell command line, capturing stdout+stderr.
CliResult run_cli(const std::string& cmd);

// The CLI binary of this build tree (may not exist if it was not built).
std::filesystem::path cli_path();

// `fucina ARGS` of this build tree (ARGS shell-quoted by the caller), capturing stdout and
// stderr together or one of them alone (the other dropped).
enum class Capture { Both, Stdout, Stderr };
CliResult run_fucina(const std::string& args, Capture capture = Capture::Both);

// Expects one line of output (a trailing newline allowed) containing `needle`, and the exit
// status `status`: the CLI's contract for bad input.
void expect_one_line_error(const CliResult& r, int status, const std::string& needle);

}  // namespace fucina::test

// Skips the current test with a clear message when the CLI has not been built.
#define FUCINA_REQUIRE_CLI()                                  \
  if (!std::filesystem::exists(::fucina::test::cli_path())) \
  GTEST_SKIP() << "CLI not built at " << ::fucina::test::cli_path()
