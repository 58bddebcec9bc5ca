#pragma once
// es::train: the ask -> score -> tell loop for a Parametric model (es/params.hpp).
//   auto reward = [&](const Mlp& member) { return -loss(ctx, member); };
//   es::train(ctx, cfg, model, reward, 1000, [](const es::Stats& s) { return s.iteration < 900; });
// The reward may also take the Member: reward(const M&, const es::Member&). The callback
// runs after every update with that iteration's stats; returning false stops early.
// Forward passes only: nothing here needs (or creates) autograd state.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "fucina/core/context.hpp"
#include "fucina/es/strategy.hpp"

namespace fucina::es {

struct NoCallback {
  bool operator()(const Stats&) const noexcept { return true; }
};

// Runs `iterations` ES iterations on `model` (updated in place) and returns the last
// iteration's stats. Members are scored in parallel on ctx.pool() (or on a private
// pool of cfg.threads), each worker on its own replica of the model.
template <Parametric M, class RewardFn, class Callback = NoCallback>
Stats train(Context& ctx, const Config& cfg, M& model, RewardFn&& reward, std::int64_t iterations, Callback&& callback = {}) {
  FUCINA_CHECK(iterations >= 0, InvalidArgument, "[es::train] iterations must be >= 0, got {}", iterations);
  Strategy es(cfg, params_of(model), cfg.threads == 0 ? &ctx.pool() : nullptr);
  const auto slots = static_cast<std::size_t>(std::min(es.pool().size(), cfg.population));
  std::vector<M> replicas;
  std::vector<ParamSet> replica_params;
  replicas.reserve(slots);
  for (std::size_t s = 0; s < slots; ++s) {
    replicas.push_back(replica_of(ctx, model));
    replica_params.push_back(params_of(replicas.back()));
  }
  auto score = [&](const Member& m, const ParamSet&, std::size_t slot) -> float {
    const M& member_model = replicas[slot];
    if constexpr (std::is_invocable_v<RewardFn&, const M&, const Member&>) return static_cast<float>(reward(member_model, m));
    else return static_cast<float>(reward(member_model));
  };
  Stats last;
  for (std::int64_t it = 0; it < iterations; ++it) {
    const std::vector<float> rewards = es.evaluate(replica_params, score);
    last = es.tell(rewards);
    if constexpr (std::is_same_v<std::invoke_result_t<Callback&, const Stats&>, void>) {
      callback(last);
    } else {
      if (!callback(last)) break;
    }
  }
  return last;
}

}  // namespace fucina::es
