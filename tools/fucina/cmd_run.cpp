// fucina run: text generation. Until inference lands (issue 7) it explains what exists.
#include <fmt/core.h>

#include "command.hpp"

namespace {

int run_main(std::span<char* const> args) {
  if (!args.empty() && (std::string_view(args[0]) == "--help" || std::string_view(args[0]) == "-h")) {
    fmt::print("usage: fucina run [MODEL.gguf] -p PROMPT\n");
    return 0;
  }
  fmt::print(stderr,
             "fucina run: LLM inference is not built yet (tracked as issue 7).\n"
             "Available today: the named-axis tensor library (see examples/), and the\n"
             "subcommands listed by 'fucina --help'.\n");
  return 1;
}

const fucina::cli::Command reg{"run", "generate text from a GGUF model", run_main};

}  // namespace
