#include "support/shared_dir.hpp"

#include <cstdlib>

namespace fucina::test {

std::optional<std::filesystem::path> shared_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("FUCINA_SHARED"); env && *env) {
    if (fs::is_directory(env)) return fs::path(env);
    return std::nullopt;
  }
  fs::path p = fs::path(FUCINA_SOURCE_DIR) / ".." / "shared";
  if (fs::is_directory(p)) return fs::weakly_canonical(p);
  return std::nullopt;
}

std::filesystem::path test_data_dir() { return FUCINA_TEST_DATA; }

}  // namespace fucina::test
