#pragma once
// Where the read-only ../shared tree lives (models, vocabs, oracles), and a skip helper.
#include <filesystem>
#include <optional>
#include <string>

namespace fucina::test {

// $FUCINA_SHARED, else <source>/../shared; nullopt when absent.
std::optional<std::filesystem::path> shared_dir();

// The repository's committed test data (tests/data).
std::filesystem::path test_data_dir();

}  // namespace fucina::test

// Skips the current test with a clear message when ../shared is not present.
#define FUCINA_REQUIRE_SHARED(var)                                                        \
  auto var##_opt = ::fucina::test::shared_dir();                                          \
  if (!var##_opt) GTEST_SKIP() << "../shared not found (set FUCINA_SHARED); skipping";   \
  const std::filesystem::path var = *var##_opt
