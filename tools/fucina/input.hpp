#pragma once
// Text input for the subcommands (prompt files, stdin): read whole, but never more than
// max_input_bytes, so `-f /dev/zero` or an endless pipe is a clear error, not a memory hog.
#include <cstddef>
#include <string>

namespace fucina::cli {

inline constexpr std::size_t max_input_bytes = std::size_t{64} << 20;

// The whole file; fucina::Error for a missing file, a directory, or more than max_input_bytes.
std::string read_input_file(const std::string& path);
// The whole of standard input, with the same bound.
std::string read_stdin();

}  // namespace fucina::cli
