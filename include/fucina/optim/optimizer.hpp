#pragma once
// Optimizer: the interface every update rule implements. step() validates the parameter
// list, then updates each parameter from its gradient times grad_scale (an f32 multiply,
// bit-identical to scaling the gradient in place first -- that is how clipping is fed in).
//
// State is per parameter key (see ParamRef) and is created zeroed on the first step that
// sees a key. state_dict()/load_state_dict() round-trip it exactly; a load validates
// everything before changing anything, so a bad file leaves the optimizer untouched.
//
// Updates are element-independent passes chunked over the worker pool; reductions use a
// fixed chunk grid, so results are bit-identical for any thread count.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fucina/core/context.hpp"
#include "fucina/optim/param.hpp"
#include "fucina/optim/state.hpp"

namespace fucina::optim {

class Optimizer {
 public:
  explicit Optimizer(double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void step(Context& ctx, std::span<ParamRef> params, float grad_scale = 1.0f);

  double lr() const noexcept { return lr_; }
  void set_lr(double lr);
  // Completed step() calls: the index to pass to an LrSchedule before the next step.
  std::int64_t step_count() const noexcept { return steps_; }

  // Four-character code naming the update rule in saved state ("SGD1", "ADMW", ...).
  virtual std::string_view kind() const noexcept = 0;

  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);

 protected:
  virtual void step_impl(Context& ctx, std::span<ParamRef> params, float grad_scale) = 0;
  // Writes per-parameter records under "state/<key>/<field>".
  virtual void save_slots(StateDict& dict) const = 0;
  // Parses every "state/..." record into new slots and validates them, then commits.
  virtual void load_slots(const StateDict& dict) = 0;

 private:
  double lr_;
  std::int64_t steps_ = 0;
};

// Parameter keys that have records under "state/" in a dict (sorted, unique).
std::vector<std::string> state_keys(const StateDict& dict);

}  // namespace fucina::optim
