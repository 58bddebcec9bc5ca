#include "fucina/optim/checkpoint.hpp"

#include <algorithm>

#include "detail.hpp"

namespace fucina::optim {

StateDict checkpoint_dict(std::span<const ParamRef> params, const Optimizer& opt) {
  validate_params(params, "save_checkpoint", false);
  StateDict d = opt.state_dict();
  for (std::size_t i = 0; i < params.size(); ++i)
    d.put_f32("param/" + param_key(params[i], i), params[i].shape, params[i].value);
  return d;
}

void restore_checkpoint(const StateDict& dict, std::span<ParamRef> params, Optimizer& opt) {
  validate_params(params, "load_checkpoint", false);
  std::vector<std::span<const float>> values;
  values.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i)
    values.push_back(dict.get_f32("param/" + param_key(params[i], i), params[i].shape));
  opt.load_state_dict(dict);  // validates fully before committing
  for (std::size_t i = 0; i < params.size(); ++i) std::copy(values[i].begin(), values[i].end(), params[i].value.begin());
}

void save_checkpoint(const std::filesystem::path& path, std::span<const ParamRef> params, const Optimizer& opt) {
  checkpoint_dict(params, opt).save(path);
}

void load_checkpoint(const std::filesystem::path& path, std::span<ParamRef> params, Optimizer& opt) {
  restore_checkpoint(StateDict::load(path), params, opt);
}

}  // namespace fucina::optim
