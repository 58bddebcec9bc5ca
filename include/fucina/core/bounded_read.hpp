#pragma once
// Whole-file reads with a size limit, so `/dev/zero`, an endless pipe or a mistaken huge
// file is a clear error instead of a memory hog. Every caller picks its own limit (prompt
// text: 64 MiB; training data: train/dataset.hpp).
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace fucina {

// Everything readable from `fd` (not closed). fucina::Error: Io when a read fails,
// InvalidArgument naming `what` and the limit when there is more than `max_bytes`.
std::string read_fd_bounded(int fd, std::string_view what, std::size_t max_bytes);
// The whole file; Io for a missing or unreadable file, InvalidArgument for a directory or
// more than `max_bytes`.
std::string read_file_bounded(const std::filesystem::path& path, std::size_t max_bytes);

}  // namespace fucina
