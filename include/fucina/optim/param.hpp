#pragma once
// ParamRef: what an optimizer sees of one parameter -- a contiguous f32 value, its
// gradient (same numel) and its logical shape. Optimizers never own parameters; state is
// keyed by name, so a parameter list may be reordered between steps or across a resume.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fucina::optim {

struct ParamRef {
  std::string name;                  // empty: auto-named "param<i>" by list position
  std::span<float> value;            // updated in place
  std::span<const float> grad;       // read only; clipping goes through a grad scale
  std::vector<std::int64_t> shape;   // row-major; Muon/APOLLO treat rank 2 as a matrix
};

// Product of the dims (1 for a scalar shape).
std::int64_t shape_numel(std::span<const std::int64_t> shape);

// The state key of params[i]: its name, or "param<i>" when empty.
std::string param_key(const ParamRef& p, std::size_t i);

// Throws fucina::Error on a malformed list: numel mismatches, negative dims, duplicate keys.
// with_grads = false skips the gradient checks (saving and loading need values only).
void validate_params(std::span<const ParamRef> params, std::string_view op, bool with_grads = true);

}  // namespace fucina::optim
