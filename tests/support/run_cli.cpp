#include "support/run_cli.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>

namespace fucina::test {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) {
    if (c == '\'') q.append("'\\''");
    else q.push_back(c);
  }
  q.push_back('\'');
  return q;
}

CliResult run_cli(const std::string& cmd) {
  CliResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::filesystem::path cli_path() { return std::filesystem::path(FUCINA_BINARY_DIR) / "fucina"; }

CliResult run_fucina(const std::string& args, Capture capture) {
  const char* drop = capture == Capture::Stdout ? " 2>/dev/null" : capture == Capture::Stderr ? " >/dev/null" : "";
  return run_cli("('" + cli_path().string() + "' " + args + drop + ")");
}

void expect_one_line_error(const CliResult& r, int status, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.output;
  std::string out = r.output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 0) << r.output;
  EXPECT_NE(out.find(needle), std::string::npos) << r.output;
}

}  // namespace fucina::test
