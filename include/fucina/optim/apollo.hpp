#pragma once
// APOLLO (Zhu et al. 2024, arXiv 2412.05270), following apollo_torch's AdamW/Apollo step
// with random projection ("std" proj_type), f32 throughout.
//
// Matrix path (rank-2 params not in fallback_params), G = grad [m, n], t = completed steps:
//   P regenerated (never stored) from (seed, key, t / update_proj_gap):
//     tall (m >= n): P [rank, n], R = G P^T [m, rank];  wide: P [m, rank], R = P^T G [rank, n]
//     P = normal / sqrt(rank), normal = fucina::rng::normal(stream, row-major index)
//   Adam moments on R:  M = M*b1 + (1-b1)*R;  V = V*b2 + ((1-b2)*R)*R;  N = M / (sqrt(V) + eps)
//   channel scaling: s = |N| / (|R| + 1e-8) along the rank axis, one factor per row (tall)
//     or per column (wide) of G;  tensor scaling: one factor for the whole matrix
//   S = G*s; norm-growth limiter (Fira, gamma 1.01) on |S| vs the previous step's |S|
//   p = p + (-lr*sqrt(bc2)/bc1) * (S*sqrt(scale));  then p = p + (-lr*wd)*p
// Fallback path (other params): the same Adam without projection or scaling (legacy HF
// AdamW: eps outside the bias correction, decay after the step).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fucina/optim/optimizer.hpp"

namespace fucina::optim {

enum class ApolloScale : std::uint8_t { channel, tensor };

struct ApolloOptions {
  double lr = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0.0;
  std::int64_t rank = 128;
  std::int64_t update_proj_gap = 200;
  double scale = 1.0;
  ApolloScale scale_type = ApolloScale::channel;
  bool norm_growth_limiter = true;
  std::uint64_t seed = 0;
  std::vector<std::string> fallback_params;

  // APOLLO-Mini: rank 1, tensor-wise scaling, scale 128.
  static ApolloOptions mini() {
    ApolloOptions o;
    o.rank = 1, o.scale_type = ApolloScale::tensor, o.scale = 128.0;
    return o;
  }
};

// The projection stream of (seed, key, generation): element j of P is
// rng::normal(stream, j) / sqrt(rank). Exposed for the golden generator's twin.
std::uint64_t apollo_projection_stream(std::uint64_t seed, std::string_view key, std::int64_t generation);

class Apollo final : public Optimizer {
 public:
  explicit Apollo(ApolloOptions opts = {});
  std::string_view kind() const noexcept override { return "APLO"; }
  const ApolloOptions& options() const noexcept { return opts_; }
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
    std::vector<std::int64_t> moment_shape;  // R's shape on the matrix path
    std::vector<float> exp_avg, exp_avg_sq;
    bool has_prev_norm = false;  // limiter state: |S| of the previous step
    float prev_norm = 0.0f;
  };
  void step_matrix(Context& ctx, const std::string& key, ParamRef& p, Slot& s, float grad_scale);
  ApolloOptions opts_;
  std::map<std::string, Slot> slots_;
};

}  // namespace fucina::optim
