#pragma once
// Every file Fucina writes goes through AtomicFile, so a failed or killed write never
// destroys what was at the output path (see docs/SAFETY.md):
//  - OUT is checked first: an existing OUT must be a regular file (a directory, device,
//    FIFO or socket is refused) and must not be one of the inputs (same st_dev/st_ino, so
//    a symlink or a hard link to an input is caught too);
//  - bytes go to a new temporary file next to OUT (".<name>.XXXXXX.tmp", same directory,
//    so the rename cannot cross file systems);
//  - commit() fsyncs it and renames it over OUT; OUT itself is never opened for writing.
//    A symlink OUT is written through: its target is replaced, the link stays.
//  - without commit() (an exception, an early return) the destructor removes the
//    temporary file and nothing else. A killed process leaves only the temporary file.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace fucina {

// Throws fucina::Error unless `out` may be replaced: absent, or an existing regular file
// (through symlinks) that is none of `inputs`. Call it before any long work, so a bad OUT
// is reported before, not after; AtomicFile repeats it when it opens.
void check_output_path(const std::filesystem::path& out, std::span<const std::filesystem::path> inputs = {});
inline void check_output_path(const std::filesystem::path& out, std::initializer_list<std::filesystem::path> inputs) {
  check_output_path(out, std::span<const std::filesystem::path>(inputs.begin(), inputs.size()));
}

class AtomicFile {
 public:
  // Checks `out` (check_output_path) and creates the temporary file.
  explicit AtomicFile(const std::filesystem::path& out, std::span<const std::filesystem::path> inputs = {});
  AtomicFile(const std::filesystem::path& out, std::initializer_list<std::filesystem::path> inputs)
      : AtomicFile(out, std::span<const std::filesystem::path>(inputs.begin(), inputs.size())) {}
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless committed

  void write(std::span<const std::byte> bytes);
  void write(const void* data, std::size_t size) { write({static_cast<const std::byte*>(data), size}); }
  // Flushes, fsyncs and renames the temporary file over the output. Call once.
  void commit();

  const std::filesystem::path& path() const { return out_; }  // what the user asked for
  std::uint64_t bytes_written() const { return written_; }

 private:
  void flush();
  void discard() noexcept;

  std::filesystem::path out_;     // as given (for messages)
  std::filesystem::path target_;  // out_ with symlinks resolved: what the rename replaces
  std::filesystem::path tmp_;
  int fd_ = -1;
  std::vector<std::byte> buf_;  // small writes are gathered into one syscall
  std::uint64_t written_ = 0;
};

// The whole of `bytes` to `out` through an AtomicFile.
void write_file_atomic(const std::filesystem::path& out, std::span<const std::byte> bytes);

}  // namespace fucina
