#include "input.hpp"

#include <unistd.h>

#include "fucina/core/bounded_read.hpp"

namespace fucina::cli {

std::string read_input_file(const std::string& path) { return read_file_bounded(path, max_input_bytes); }

std::string read_stdin() { return read_fd_bounded(STDIN_FILENO, "standard input", max_input_bytes); }

}  // namespace fucina::cli
