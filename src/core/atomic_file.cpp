#include "fucina/core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "fucina/core/error.hpp"

namespace fucina {

namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

std::string_view file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::filesystem::path parent_dir(const std::filesystem::path& p) {
  const auto d = p.parent_path();
  return d.empty() ? std::filesystem::path(".") : d;
}

// A name no other writer picks: pid, a process-wide counter and the clock.
std::filesystem::path temp_name(const std::filesystem::path& target, unsigned attempt) {
  static std::atomic<unsigned> counter{0};
  const auto ticks = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  const std::string tag = fmt::format("{:x}{:x}{:x}", static_cast<unsigned>(::getpid()),
                                      counter.fetch_add(1, std::memory_order_relaxed) + attempt, ticks & 0xffffff);
  const std::string name = target.filename().string().substr(0, 200);  // room for the tag in NAME_MAX
  return parent_dir(target) / fmt::format(".{}.{}.tmp", name, tag);
}

void write_all(int fd, const std::byte* p, std::size_t n, const std::filesystem::path& out) {
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    FUCINA_CHECK(k > 0, Io, "[output] cannot write '{}': {}", out.string(),
                 k < 0 ? std::strerror(errno) : "no progress");
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}

}  // namespace

void check_output_path(const std::filesystem::path& out, std::span<const std::filesystem::path> inputs) {
  FUCINA_CHECK(!out.empty(), InvalidArgument, "[output] the output path is empty");
  struct stat ls{}, st{};
  if (::lstat(out.c_str(), &ls) != 0) {
    FUCINA_CHECK(errno == ENOENT, Io, "[output] cannot check '{}': {}", out.string(), std::strerror(errno));
    struct stat ds{};
    const auto dir = parent_dir(out);
    FUCINA_CHECK(::stat(dir.c_str(), &ds) == 0 && S_ISDIR(ds.st_mode), Io,
                 "[output] cannot create '{}': directory '{}' does not exist", out.string(), dir.string());
    return;
  }
  FUCINA_CHECK(::stat(out.c_str(), &st) == 0, Io, "[output] refusing to write '{}': it is a symlink to a missing file",
               out.string());
  FUCINA_CHECK(S_ISREG(st.st_mode), InvalidArgument, "[output] refusing to write '{}': it exists and is {}",
               out.string(), file_kind(st.st_mode));
  for (const auto& in : inputs) {
    struct stat is{};
    if (::stat(in.c_str(), &is) != 0) continue;  // a missing input is its reader's error
    FUCINA_CHECK(is.st_dev != st.st_dev || is.st_ino != st.st_ino, InvalidArgument,
                 "[output] refusing to write '{}': it is the input file '{}'", out.string(), in.string());
  }
}

AtomicFile::AtomicFile(const std::filesystem::path& out, std::span<const std::filesystem::path> inputs) : out_(out) {
  check_output_path(out, inputs);
  std::error_code ec;
  target_ = std::filesystem::is_symlink(out, ec) ? std::filesystem::canonical(out) : out;
  struct stat st{};
  const bool replacing = ::stat(target_.c_str(), &st) == 0;
  for (unsigned attempt = 0; fd_ < 0; ++attempt) {
    tmp_ = temp_name(target_, attempt);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FUCINA_CHECK(fd_ >= 0 || (errno == EEXIST && attempt < 100), Io, "[output] cannot create a file next to '{}': {}",
                 out.string(), std::strerror(errno));
  }
  if (replacing) (void)::fchmod(fd_, st.st_mode & 07777);  // the replaced file's permissions
  buf_.reserve(kBufferBytes);
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());  // only the file this object created
  tmp_.clear();
}

void AtomicFile::flush() {
  write_all(fd_, buf_.data(), buf_.size(), out_);
  buf_.clear();
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  FUCINA_CHECK(fd_ >= 0, InvalidArgument, "[output] write to '{}' after commit", out_.string());
  if (buf_.size() + bytes.size() > kBufferBytes) flush();
  if (bytes.size() >= kBufferBytes) write_all(fd_, bytes.data(), bytes.size(), out_);
  else buf_.insert(buf_.end(), bytes.begin(), bytes.end());
  written_ += bytes.size();
}

void AtomicFile::commit() {
  FUCINA_CHECK(fd_ >= 0, InvalidArgument, "[output] '{}' committed twice", out_.string());
  flush();
  FUCINA_CHECK(::fsync(fd_) == 0, Io, "[output] cannot write '{}': {}", out_.string(), std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  FUCINA_CHECK(::close(fd) == 0, Io, "[output] cannot write '{}': {}", out_.string(), std::strerror(errno));
  FUCINA_CHECK(::rename(tmp_.c_str(), target_.c_str()) == 0, Io, "[output] cannot replace '{}': {}", out_.string(),
               std::strerror(errno));
  tmp_.clear();
  // Make the rename itself durable; some file systems cannot fsync a directory (harmless).
  const int dir = ::open(parent_dir(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
}

void write_file_atomic(const std::filesystem::path& out, std::span<const std::byte> bytes) {
  AtomicFile f(out);
  f.write(bytes);
  f.commit();
}

}  // namespace fucina
