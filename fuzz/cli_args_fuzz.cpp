// libFuzzer target for the CLI flag parser: any argument vector must parse or end in a
// UsageError / fucina::Error (one line and exit 2 / 1 in the real CLI), never crash.
// Input: NUL-separated arguments. The first byte picks the parser: `fucina run`'s full flag
// parser (the largest: numbers, floats, lists of stops, sampler flags), or the shared value
// parsers in args.hpp that every subcommand uses (whole numbers, finite floats, lists,
// thread counts). The sampler options are validated as the CLI does before any work.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// `fucina run`'s parser lives in the CLI's translation unit (an anonymous namespace); the
// target compiles that file in rather than widening its interface for a fuzzer.
#include "../tools/fucina/cmd_run.cpp"  // NOLINT(bugprone-suspicious-include)

// cmd_run.cpp registers itself with the CLI's command registry, which lives in the CLI's
// main.cpp (not linked here: libFuzzer brings its own main).
fucina::cli::Command::Command(std::string_view, std::string_view, Main) {}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const unsigned which = data[0] % 6;
  std::vector<std::string> args;
  std::string cur;
  for (std::size_t i = 1; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) args.push_back(std::move(cur)), cur.clear();
    else cur.push_back(static_cast<char>(data[i]));
  }
  args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    switch (which) {
      case 0: {
        const Options o = parse(std::span<char* const>(argv));
        fucina::sample::validate(o.sampling);
        break;
      }
      case 1: (void)fucina::cli::parse_num<std::int64_t>("-n", args[0]); break;
      case 2: (void)fucina::cli::parse_num<float>("--temp", args[0]); break;
      case 3: (void)fucina::cli::parse_num<std::uint64_t>("--seed", args[0]); break;
      case 4: (void)fucina::cli::parse_list<std::int64_t>("-p", args[0]); break;
      case 5: (void)fucina::cli::parse_threads("-t", args[0]); break;
    }
  } catch (const fucina::cli::UsageError&) {
  } catch (const fucina::Error&) {
  }
  return 0;
}
