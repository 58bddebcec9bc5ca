#pragma once
// Muon (Keller Jordan's muon.py, SingleDeviceMuonWithAuxAdam) in f32 throughout; the
// reference runs Newton-Schulz in bf16, we do not.
//
// Matrix path (rank-2 params not listed in fallback_params):
//   M = lerp(M, g, 1-mu);  U = nesterov ? lerp(g, M, mu) : M;  O = NS5(U) * sqrt(max(1, rows/cols))
//   p = p*(1-lr*wd);  p = p + (-lr)*O
// NS5: transpose if rows > cols; X = U/(|U|_F + 1e-7); `steps` times
//   A = X X^T;  B = b*A + (c*A) A;  X = a*X + B X     with (a,b,c) = (3.4445, -4.7750, 2.0315).
// Fallback path (every other param): the reference's aux Adam,
//   m = lerp(m, g, 1-b1); v = lerp(v, g*g, 1-b2); u = (m/bc1) / (sqrt(v/bc2) + eps)
//   p = p*(1-lr*wd); p = p + (-lr)*u
// lerp is torch's: w < 0.5 ? a + w*(b-a) : b - (b-a)*(1-w).
#include <map>
#include <string>
#include <vector>

#include "fucina/optim/optimizer.hpp"

namespace fucina::optim {

struct MuonOptions {
  double lr = 0.02;  // the matrix path's lr; Optimizer::lr()/set_lr drive it
  double momentum = 0.95;
  double weight_decay = 0.0;
  bool nesterov = true;
  int ns_steps = 5;
  // Aux Adam for non-matrix params and the names below (embeddings, heads).
  double adam_lr = 3e-4;  // scaled with set_lr: effective adam lr = adam_lr * lr()/lr
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-10;
  double adam_weight_decay = 0.0;
  std::vector<std::string> fallback_params;
};

// The NS5 orthogonalization of a rows x cols row-major matrix, in place (for tests).
void newton_schulz5(Context& ctx, std::span<float> x, std::int64_t rows, std::int64_t cols, int steps);

class Muon final : public Optimizer {
 public:
  explicit Muon(MuonOptions opts = {});
  std::string_view kind() const noexcept override { return "MUON"; }
  const MuonOptions& options() const noexcept { return opts_; }
  // True when params with this key and shape take the Newton-Schulz path.
  bool uses_matrix_path(const std::string& key, std::span<const std::int64_t> shape) const;

 protected:
  void step_impl(Context& ctx, std::span<ParamRef> params, float grad_scale) override;
  void save_slots(StateDict& dict) const override;
  void load_slots(const StateDict& dict) override;

 private:
  struct Slot {
    std::vector<std::int64_t> shape;
    std::int64_t step = 0;
    bool matrix = false;
    std::vector<float> momentum;             // matrix path
    std::vector<float> exp_avg, exp_avg_sq;  // fallback path
  };
  MuonOptions opts_;
  std::map<std::string, Slot> slots_;
};

}  // namespace fucina::optim
