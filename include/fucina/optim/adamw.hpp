#pragma once
// AdamW in the exact f32 operation order of torch.optim.AdamW (single-tensor path, the
// default on CPU in torch 1.13):
//   p = p*(1-lr*wd);  m = m*b1 + (1-b1)*g;  v = v*b2 + ((1-b2)*g)*g;
//   p = p + (-(lr/bc1)*m) / (sqrt(v)/sqrt(bc2) + eps)
// with bc_i = 1 - b_i^t computed in f64 and every scalar rounded to f32 once.
#include <map>
#include <string>
#include <vector>

#include "fucina/optim/optimizer.hpp"

namespace fucina::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class AdamW final : public Optimizer {
 public:
  explicit AdamW(AdamWOptions opts = {});
  std::string_view kind() const noexcept override { return "ADMW"; }
  const AdamWOptions& options() const noexcept { return opts_; }

 protected:
  void step_impl(Context& ctx, std::span<ParamRef> params, float grad_scale) override;
  void save_slots(StateDict& dict) const override;
  void load_slots(const StateDict& dict) override;

 private:
  struct Slot {
    std::vector<std::int64_t> shape;
    std::int64_t step = 0;
    std::vector<float> exp_avg, exp_avg_sq;
  };
  AdamWOptions opts_;
  std::map<std::string, Slot> slots_;
};

}  // namespace fucina::optim
