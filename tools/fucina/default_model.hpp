#pragma once
// Where `fucina run` finds a model when none is given (docs/DEFAULT-MODEL.md): the project's
// own default model, models/fucina-default.gguf, trained by scripts/train-default-model.sh.
//
// Note [Default model lookup], first hit wins:
//   1. $FUCINA_MODEL, when set (an explicit choice: a missing file there is an error, not a
//      silent fallback);
//   2. <bin>/../share/fucina/fucina-default.gguf, where `cmake --install` puts it;
//   3. <bin>/../../models/fucina-default.gguf, the source tree seen from a preset's build
//      directory (build/release/fucina).
// <bin> is the directory of the running executable (/proc/self/exe), not the working
// directory, so the answer does not depend on where the command is typed.
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>

namespace fucina::cli {

inline constexpr const char* default_model_name = "fucina-default.gguf";

// The default model's path, or nullopt when no candidate exists. Throws a fucina::Error
// naming the variable when $FUCINA_MODEL points at nothing.
inline std::optional<std::filesystem::path> find_default_model() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("FUCINA_MODEL"); env && *env) return fs::path(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const fs::path bin = exe.parent_path();
  for (const fs::path& candidate : {bin / ".." / "share" / "fucina" / default_model_name,
                                    bin / ".." / ".." / "models" / default_model_name})
    if (fs::is_regular_file(candidate, ec)) return fs::weakly_canonical(candidate, ec);
  return std::nullopt;
}

}  // namespace fucina::cli
