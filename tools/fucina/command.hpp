#pragma once
// Subcommand registry: each cmd_<name>.cpp registers itself with a static Command, so
// adding a subcommand touches no other file. Only tools/ turns errors into exit codes.
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fucina::cli {

struct Command {
  using Main = int (*)(std::span<char* const> args);  // args exclude "fucina <name>"
  Command(std::string_view name, std::string_view summary, Main main);
};

struct CommandInfo {
  std::string_view name;
  std::string_view summary;
  Command::Main main;
};
std::vector<CommandInfo>& command_registry();

// Thrown by argument parsing for a usage error (unknown flag, bad value): exit code 2.
struct UsageError {
  std::string message;
};

}  // namespace fucina::cli
