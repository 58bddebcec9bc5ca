#include "input.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fucina/core/error.hpp"

namespace fucina::cli {

namespace {

std::string read_bounded(int fd, std::string_view name) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t k = ::read(fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    FUCINA_CHECK(k >= 0, Io, "cannot read {}: {}", name, std::strerror(errno));
    if (k == 0) return out;
    FUCINA_CHECK(out.size() + static_cast<std::size_t>(k) <= max_input_bytes, InvalidArgument,
                 "{} is larger than {} MiB, too large for a text input", name, max_input_bytes >> 20);
    out.append(buf, static_cast<std::size_t>(k));
  }
}

}  // namespace

std::string read_input_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FUCINA_CHECK(fd >= 0, Io, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st{};
  const bool dir = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
  try {
    FUCINA_CHECK(!dir, InvalidArgument, "'{}' is a directory, not a text file", path);
    std::string text = read_bounded(fd, "'" + path + "'");
    ::close(fd);
    return text;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

std::string read_stdin() { return read_bounded(STDIN_FILENO, "standard input"); }

}  // namespace fucina::cli
