#pragma once
// A fresh directory per test (removed afterwards) and the message of an expected error.
#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "fucina/core/error.hpp"

namespace fucina::test {

// dir_ = <temp>/fucina_<prefix>_<pid>_<test name>, created before the test, removed after.
class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("fucina_{}_{}_{}", prefix_, ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

// The message of the fucina::Error `f` throws; "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace fucina::test
