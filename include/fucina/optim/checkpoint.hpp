#pragma once
// Parameters + optimizer state in one StateDict file (see Note [Optimizer state file]):
// parameter values under "param/<key>", optimizer records under "optim/..." and
// "state/...". Loading validates every parameter and the whole optimizer state before
// writing anything, so a mismatched or corrupt file changes nothing.
#include <filesystem>
#include <span>

#include "fucina/optim/optimizer.hpp"

namespace fucina::optim {

StateDict checkpoint_dict(std::span<const ParamRef> params, const Optimizer& opt);
void restore_checkpoint(const StateDict& dict, std::span<ParamRef> params, Optimizer& opt);

void save_checkpoint(const std::filesystem::path& path, std::span<const ParamRef> params, const Optimizer& opt);
void load_checkpoint(const std::filesystem::path& path, std::span<ParamRef> params, Optimizer& opt);

}  // namespace fucina::optim
