#pragma once
// Evolution strategies at scale (arXiv 2509.24372), kept deliberately vanilla: perturb
// θ with Gaussian noise, score each member with one scalar reward, step toward the
// members that did better. No optimizer state; the noise is never stored.
//
// Note [ES update]: with N members, shaped rewards C_n and noise ε_n (es/noise.hpp),
//   θ ← θ·(1 − α·λ) + (α/N)·Σ_n C_n·ε_n        (α = learning_rate, λ = weight_decay)
// There is no 1/σ: as in ES-at-scale, σ is folded into α. Antithetic members 2k, 2k+1
// share stream k with signs +/−, so a pair contributes (C_2k − C_2k+1)·ε_k, still over
// the full N. Each element accumulates acc += w_k·ε_k (f32 multiply, then add, streams
// in order), then applies θ·decay + (α/N)·acc, with decay and α/N rounded once from f64.
// Every element is computed independently, so the result is bitwise identical for any
// thread count and chunking.
//
// Note [Scaling past one machine]: a member is fully described by (seed, iteration,
// member) plus the Config. Workers that start from the same θ0 and apply the same
// tell(rewards) stay bitwise in sync, so a run only ships N scalars per iteration:
// each worker regenerates the noise it needs, scores its members, and broadcasts the
// rewards.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "fucina/core/thread_pool.hpp"
#include "fucina/es/noise.hpp"
#include "fucina/es/params.hpp"

namespace fucina::es {

enum class Shaping {
  none,            // raw rewards
  z_score,         // (R − mean)/(std + 1e-8), f64, ddof 0
  centered_ranks,  // rank/(N − 1) − 0.5, ties broken by member index
};

struct Config {
  int population = 32;  // N (even when antithetic)
  float sigma = 0.02f;
  float learning_rate = 0.01f;  // α in Note [ES update]
  bool antithetic = true;
  Shaping shaping = Shaping::z_score;
  float weight_decay = 0.f;  // λ, decoupled and toward zero
  std::uint64_t seed = 42;
  int threads = 0;  // pool participants; 0: train() uses ctx.pool(), a bare Strategy all cores
};

// Everything a scorer needs to rebuild member `index` of `iteration`: the perturbation
// is sign()·σ·noise(seed, iteration, stream(), i).
struct Member {
  std::uint64_t seed = 0;
  std::uint64_t iteration = 0;
  std::uint64_t index = 0;
  bool antithetic = false;

  std::uint64_t stream() const noexcept { return antithetic ? index / 2 : index; }
  float sign() const noexcept { return antithetic && (index & 1u) ? -1.f : 1.f; }
  std::uint64_t key() const noexcept { return stream_key(seed, iteration, stream()); }
  float epsilon(std::uint64_t param_index) const { return sign() * noise(seed, iteration, stream(), param_index); }
};

struct Stats {
  std::uint64_t iteration = 0;  // the iteration these rewards belong to
  double reward_mean = 0, reward_std = 0, reward_min = 0, reward_max = 0;
  std::uint64_t best_member = 0;
};

// Shaped rewards C_n (see Shaping).
std::vector<float> shape_rewards(std::span<const float> rewards, Shaping shaping);

// out = θ + sign·σ·ε for `member` (t = f32(sign·σ)·ε, then θ + t). Parallel on `pool`
// when given (and not already inside one of its tasks).
void perturb(const Member& member, float sigma, const ParamSet& theta, const ParamSet& out, ThreadPool* pool = nullptr);

class Strategy {
 public:
  // Updates `theta` in place. pool: where members are scored and the update runs; null
  // means a private pool of config.threads participants (0: all cores).
  Strategy(const Config& config, ParamSet theta, ThreadPool* pool = nullptr);

  const Config& config() const noexcept { return cfg_; }
  const ParamSet& params() const noexcept { return theta_; }
  ThreadPool& pool() noexcept { return *pool_; }
  std::uint64_t iteration() const noexcept { return iteration_; }
  // Resume: continue from `iteration` (θ must be the state after iteration − 1).
  void seek(std::uint64_t iteration) noexcept { iteration_ = iteration; }

  Member member(std::uint64_t index) const;
  std::vector<Member> ask() const;
  void materialize(const Member& member, const ParamSet& out) const;

  // Scores every member of the current iteration, members in parallel on the pool:
  // replica `slot` is overwritten with the member's parameters, then
  // score(member, replica, slot) returns its reward. Which slot scores which member is
  // unspecified; the rewards are in member order.
  using ScoreFn = std::function<float(const Member&, const ParamSet&, std::size_t)>;
  std::vector<float> evaluate(std::span<const ParamSet> replicas, const ScoreFn& score);

  // Applies Note [ES update] for the current iteration's rewards (member order), with
  // the noise regenerated, and advances the iteration.
  Stats tell(std::span<const float> rewards);

 private:
  Config cfg_;
  ParamSet theta_;
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool* pool_;
  std::uint64_t iteration_ = 0;
};

}  // namespace fucina::es
