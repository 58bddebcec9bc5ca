// fucina: the thin CLI over the library. Subcommands live in cmd_<name>.cpp.
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "command.hpp"
#include "fucina/core/error.hpp"

namespace fucina::cli {

std::vector<CommandInfo>& command_registry() {
  static std::vector<CommandInfo> r;
  return r;
}

Command::Command(std::string_view name, std::string_view summary, Main main) {
  command_registry().push_back({name, summary, main});
}

}  // namespace fucina::cli

namespace {

// To stdout when asked for (--help), to stderr after a usage error.
void print_usage(std::FILE* to) {
  auto cmds = fucina::cli::command_registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  fmt::print(to, "usage: fucina <command> [options]\n\ncommands:\n");
  for (auto& c : cmds) fmt::print(to, "  {:<12} {}\n", c.name, c.summary);
  fmt::print(to, "\nRun 'fucina <command> --help' for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage(stdout);
    return 0;
  }
  for (auto& c : fucina::cli::command_registry()) {
    if (c.name != argv[1]) continue;
    try {
      return c.main(std::span<char* const>(argv + 2, static_cast<size_t>(argc - 2)));
    } catch (const fucina::cli::UsageError& e) {
      fmt::print(stderr, "fucina {}: {}\n", c.name, e.message);
      return 2;
    } catch (const fucina::Error& e) {
      fmt::print(stderr, "fucina {}: error: {}\n", c.name, e.what());
      return 1;
    } catch (const std::bad_alloc&) {
      fmt::print(stderr, "fucina {}: error: out of memory\n", c.name);
      return 1;
    } catch (const std::exception& e) {
      fmt::print(stderr, "fucina {}: error: {}\n", c.name, e.what());
      return 1;
    }
  }
  fmt::print(stderr, "fucina: unknown command '{}'\n\n", argv[1]);
  print_usage(stderr);
  return 2;
}
