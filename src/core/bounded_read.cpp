#include "fucina/core/bounded_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fucina/core/error.hpp"

namespace fucina {

std::string read_fd_bounded(int fd, std::string_view what, std::size_t max_bytes) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t k = ::read(fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    FUCINA_CHECK(k >= 0, Io, "cannot read {}: {}", what, std::strerror(errno));
    if (k == 0) return out;
    FUCINA_CHECK(out.size() + static_cast<std::size_t>(k) <= max_bytes, InvalidArgument,
                 "{} is larger than {} MiB, too large for a text input", what, max_bytes >> 20);
    out.append(buf, static_cast<std::size_t>(k));
  }
}

std::string read_file_bounded(const std::filesystem::path& path, std::size_t max_bytes) {
  const std::string name = path.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  FUCINA_CHECK(fd >= 0, Io, "cannot open '{}': {}", name, std::strerror(errno));
  struct stat st{};
  const bool dir = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
  try {
    FUCINA_CHECK(!dir, InvalidArgument, "'{}' is a directory, not a text file", name);
    std::string text = read_fd_bounded(fd, "'" + name + "'", max_bytes);
    ::close(fd);
    return text;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

}  // namespace fucina
