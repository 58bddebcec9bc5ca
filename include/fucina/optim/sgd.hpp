#pragma once
// SGD with momentum, dampening, Nesterov and coupled weight decay, in the exact f32
// operation order of torch.optim.SGD (single-tensor path):
//   d = g + wd*p;  buf = d (first step) | buf*mu + (1-damp)*d;  d = nesterov ? d + mu*buf : buf;
//   p = p + (-lr)*d
// Hyperparameters are f64; each scalar is rounded to f32 once, as torch does.
#include <map>
#include <string>
#include <vector>

#include "fucina/optim/optimizer.hpp"

namespace fucina::optim {

struct SgdOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;  // requires momentum > 0 and dampening == 0
};

class Sgd final : public Optimizer {
 public:
  explicit Sgd(SgdOptions opts = {});
  std::string_view kind() const noexcept override { return "SGD1"; }
  const SgdOptions& options() const noexcept { return opts_; }

 protected:
  void step_impl(Context& ctx, std::span<ParamRef> params, float grad_scale) override;
  void save_slots(StateDict& dict) const override;
  void load_slots(const StateDict& dict) override;

 private:
  struct Slot {
    std::vector<std::int64_t> shape;
    std::int64_t step = 0;
    std::vector<float> momentum;  // empty until the first step when momentum > 0
  };
  SgdOptions opts_;
  std::map<std::string, Slot> slots_;
};

}  // namespace fucina::optim
