#pragma once
// Runs the built `fucina` CLI for end-to-end tests.
#include <filesystem>
#include <string>

namespace fucina::test {

struct CliResult {
  int status = -1;      // exit code (-1: did not exit normally)
  std::string output;   // stdout and stderr together
};

// Runs a shell command line, capturing stdout+stderr.
CliResult run_cli(const std::string& cmd);

// The CLI binary of this build tree (may not exist if it was not built).
std::filesystem::path cli_path();

}  // namespace fucina::test
