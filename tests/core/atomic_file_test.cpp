// AtomicFile (core/atomic_file.hpp): what is at the output path survives every failure, a
// non-regular output is refused before anything is written, an output that is the input
// (path, symlink or hard link) is refused, and a file-size limit (SIGXFSZ ignored or fatal)
// leaves the old output in place.
#include "fucina/core/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fucina/core/error.hpp"

namespace fucina {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fucina_atomic_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void put(const fs::path& p, const std::string& s) const { std::ofstream(p, std::ios::binary) << s; }
  // Names in the directory other than the given ones (leftover temporary files).
  std::vector<std::string> others(std::initializer_list<std::string> known) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (std::find(known.begin(), known.end(), e.path().filename().string()) == known.end())
        out.push_back(e.path().filename().string());
    return out;
  }
  static void write_text(AtomicFile& f, const std::string& s) { f.write(s.data(), s.size()); }
  fs::path dir_;
};

TEST_F(AtomicFileTest, CommitReplacesTheOutputAndKeepsItsMode) {
  const auto out = dir_ / "out.bin";
  put(out, "old");
  fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  AtomicFile f(out);
  write_text(f, "new contents");
  EXPECT_EQ(slurp(out), "old");  // nothing reaches OUT before commit
  f.commit();
  EXPECT_EQ(slurp(out), "new contents");
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_TRUE(others({"out.bin"}).empty());
}

TEST_F(AtomicFileTest, WithoutCommitTheOldOutputStaysAndTheTemporaryGoes) {
  const auto out = dir_ / "out.bin";
  put(out, "old");
  {
    AtomicFile f(out);
    write_text(f, std::string(3 << 20, 'x'));  // past the buffer: real writes happened
  }
  EXPECT_EQ(slurp(out), "old");
  EXPECT_TRUE(others({"out.bin"}).empty());
  {
    AtomicFile f(dir_ / "fresh.bin");  // no previous file: none appears
    write_text(f, "x");
  }
  EXPECT_FALSE(fs::exists(dir_ / "fresh.bin"));
  EXPECT_TRUE(others({"out.bin"}).empty());
}

TEST_F(AtomicFileTest, RefusesADirectoryAndLeavesIt) {
  const auto d = dir_ / "d";
  fs::create_directory(d);
  try {
    AtomicFile f(d);
    FAIL() << "a directory was accepted as output";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(d));
  EXPECT_EQ(others({"d"}), std::vector<std::string>{});
}

TEST_F(AtomicFileTest, RefusesADeviceOrFifoAndLeavesIt) {
  // /dev/full's numbers (1, 7) as root; a FIFO otherwise. Both must stay as they were.
  const auto dev = dir_ / "full";
  const bool is_dev = ::mknod(dev.c_str(), S_IFCHR | 0600, makedev(1, 7)) == 0;
  if (!is_dev) {
    ASSERT_EQ(::mkfifo(dev.c_str(), 0600), 0);
  }
  EXPECT_THROW(check_output_path(dev), Error);
  EXPECT_THROW(write_file_atomic(dev, std::as_bytes(std::span("x", 1))), Error);
  struct stat st{};
  ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(is_dev ? S_ISCHR(st.st_mode) : S_ISFIFO(st.st_mode));
  EXPECT_TRUE(others({"full"}).empty());
}

TEST_F(AtomicFileTest, RefusesTheInputByPathSymlinkOrHardLink) {
  const auto in = dir_ / "in.bin";
  put(in, "input");
  fs::create_symlink(in, dir_ / "sym.bin");
  fs::create_hard_link(in, dir_ / "hard.bin");
  for (const char* name : {"in.bin", "sym.bin", "hard.bin"}) {
    const std::vector<fs::path> inputs{in};
    EXPECT_THROW(AtomicFile(dir_ / name, inputs), Error) << name;
    EXPECT_THROW(check_output_path(dir_ / name, {in}), Error) << name;
  }
  EXPECT_NO_THROW(check_output_path(dir_ / "other.bin", {in}));
  EXPECT_EQ(slurp(in), "input");
}

TEST_F(AtomicFileTest, ASymlinkOutputIsWrittenThrough) {
  const auto target = dir_ / "target.bin";
  put(target, "old");
  fs::create_symlink(target, dir_ / "link.bin");
  write_file_atomic(dir_ / "link.bin", std::as_bytes(std::span("new", 3)));
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.bin"));
  EXPECT_EQ(slurp(target), "new");
}

TEST_F(AtomicFileTest, MissingDirectoryIsAClearError) {
  try {
    check_output_path(dir_ / "no" / "such" / "out.bin");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

// A child writes 1 MiB under RLIMIT_FSIZE = 64 KiB. With SIGXFSZ ignored the write fails
// with EFBIG and the child reports an Error; with the default action the kernel kills it
// mid-write. Either way the old OUT is intact.
TEST_F(AtomicFileTest, AFileSizeLimitLeavesTheOldOutput) {
  const auto out = dir_ / "out.bin";
  for (const bool ignore : {true, false}) {
    put(out, "old");
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::signal(SIGXFSZ, ignore ? SIG_IGN : SIG_DFL);
      const rlimit lim{64 << 10, 64 << 10};
      if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(3);
      const std::vector<char> big(1 << 20, 'x');
      try {
        write_file_atomic(out, std::as_bytes(std::span(big)));
      } catch (const Error&) {
        ::_exit(0);
      }
      ::_exit(1);  // the limit did not stop the write
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (ignore) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
      EXPECT_TRUE(others({"out.bin"}).empty());  // the failed write cleaned up after itself
    } else {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) << status;
    }
    EXPECT_EQ(slurp(out), "old") << (ignore ? "SIGXFSZ ignored" : "killed by SIGXFSZ");
  }
}

}  // namespace
}  // namespace fucina
