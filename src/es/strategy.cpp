#include "fucina/es/strategy.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>

#include "fucina/core/error.hpp"

namespace fucina::es {

namespace {

// Elements per update/perturb task: a fixed grid, so results never depend on threads
// (they would not anyway: every element is independent).
constexpr std::int64_t kChunk = 2048;

template <class F>
void for_each_chunk(ThreadPool* pool, std::int64_t n, F&& f) {
  const std::int64_t tasks = (n + kChunk - 1) / kChunk;
  auto task = [&](std::int64_t t) { f(t * kChunk, std::min(n, (t + 1) * kChunk)); };
  if (pool != nullptr && tasks > 1) pool->parallel_for(tasks, task);
  else
    for (std::int64_t t = 0; t < tasks; ++t) task(t);
}

void check_config(const Config& c) {
  FUCINA_CHECK(c.population >= 1, InvalidArgument, "[es] population must be >= 1, got {}", c.population);
  FUCINA_CHECK(!c.antithetic || c.population % 2 == 0, InvalidArgument,
               "[es] antithetic sampling needs an even population, got {}", c.population);
  FUCINA_CHECK(std::isfinite(c.sigma) && c.sigma > 0.f, InvalidArgument, "[es] sigma must be finite and > 0, got {}", c.sigma);
  FUCINA_CHECK(std::isfinite(c.learning_rate) && c.learning_rate >= 0.f, InvalidArgument,
               "[es] learning_rate must be finite and >= 0, got {}", c.learning_rate);
  FUCINA_CHECK(std::isfinite(c.weight_decay) && c.weight_decay >= 0.f, InvalidArgument,
               "[es] weight_decay must be finite and >= 0, got {}", c.weight_decay);
  FUCINA_CHECK(c.threads >= 0, InvalidArgument, "[es] threads must be >= 0, got {}", c.threads);
}

}  // namespace

std::vector<float> shape_rewards(std::span<const float> rewards, Shaping shaping) {
  const std::size_t n = rewards.size();
  for (std::size_t m = 0; m < n; ++m)
    FUCINA_CHECK(std::isfinite(rewards[m]), InvalidArgument, "[es::shape_rewards] reward of member {} is not finite ({})", m, rewards[m]);
  std::vector<float> c(n);
  switch (shaping) {
    case Shaping::none:
      std::copy(rewards.begin(), rewards.end(), c.begin());
      break;
    case Shaping::z_score: {
      double mean = 0;
      for (float r : rewards) mean += r;
      mean /= static_cast<double>(n);
      double var = 0;
      for (float r : rewards) var += (r - mean) * (r - mean);
      const double sd = std::sqrt(var / static_cast<double>(n));
      for (std::size_t i = 0; i < n; ++i) c[i] = static_cast<float>((rewards[i] - mean) / (sd + 1e-8));
      break;
    }
    case Shaping::centered_ranks: {
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rewards[a] < rewards[b]; });
      const double denom = n > 1 ? static_cast<double>(n - 1) : 1.0;
      for (std::size_t r = 0; r < n; ++r) c[order[r]] = n > 1 ? static_cast<float>(static_cast<double>(r) / denom - 0.5) : 0.f;
      break;
    }
  }
  return c;
}

void perturb(const Member& member, float sigma, const ParamSet& theta, const ParamSet& out, ThreadPool* pool) {
  FUCINA_CHECK(theta.same_layout(out), ShapeMismatch, "[es::perturb] the replica has a different parameter layout ({} vs {} elements)",
               out.size(), theta.size());
  const std::uint64_t key = member.key();
  const float t = member.sign() * sigma;
  for_each_chunk(pool, theta.size(), [&](std::int64_t b, std::int64_t e) {
    float eps[kChunk];
    theta.for_each_piece(b, e, [&](std::size_t k, std::int64_t gb, std::int64_t lb, std::int64_t len) {
      fill_noise(key, static_cast<std::uint64_t>(gb), len, eps);
      const float* th = theta.tensor(k).data() + lb;
      float* o = out.tensor(k).data() + lb;
      for (std::int64_t j = 0; j < len; ++j) {
        const float d = t * eps[j];
        o[j] = th[j] + d;
      }
    });
  });
}

Strategy::Strategy(const Config& config, ParamSet theta, ThreadPool* pool) : cfg_(config), theta_(std::move(theta)), pool_(pool) {
  check_config(cfg_);
  FUCINA_CHECK(theta_.size() > 0, InvalidArgument, "[es::Strategy] the parameter set is empty");
  if (pool_ == nullptr) {
    own_pool_ = std::make_unique<ThreadPool>(cfg_.threads);
    pool_ = own_pool_.get();
  }
}

Member Strategy::member(std::uint64_t index) const {
  FUCINA_CHECK(index < static_cast<std::uint64_t>(cfg_.population), IndexOutOfBounds,
               "[es::Strategy] member {} is outside a population of {}", index, cfg_.population);
  return Member{cfg_.seed, iteration_, index, cfg_.antithetic};
}

std::vector<Member> Strategy::ask() const {
  std::vector<Member> ms;
  ms.reserve(static_cast<std::size_t>(cfg_.population));
  for (int m = 0; m < cfg_.population; ++m) ms.push_back(member(static_cast<std::uint64_t>(m)));
  return ms;
}

void Strategy::materialize(const Member& m, const ParamSet& out) const { perturb(m, cfg_.sigma, theta_, out, pool_); }

std::vector<float> Strategy::evaluate(std::span<const ParamSet> replicas, const ScoreFn& score) {
  FUCINA_CHECK(!replicas.empty(), InvalidArgument, "[es::evaluate] needs at least one replica");
  for (std::size_t s = 0; s < replicas.size(); ++s)
    FUCINA_CHECK(replicas[s].same_layout(theta_), ShapeMismatch,
                 "[es::evaluate] replica {} has a different parameter layout ({} vs {} elements)", s, replicas[s].size(),
                 theta_.size());
  const auto n = static_cast<std::int64_t>(cfg_.population);
  std::vector<float> rewards(static_cast<std::size_t>(n));
  std::atomic<std::int64_t> next{0};
  const auto slots = std::min<std::int64_t>(static_cast<std::int64_t>(replicas.size()), n);
  pool_->parallel_for(slots, [&](std::int64_t slot) {
    const ParamSet& rep = replicas[static_cast<std::size_t>(slot)];
    for (std::int64_t m = next.fetch_add(1); m < n; m = next.fetch_add(1)) {
      const Member mem = member(static_cast<std::uint64_t>(m));
      perturb(mem, cfg_.sigma, theta_, rep, nullptr);
      rewards[static_cast<std::size_t>(m)] = score(mem, rep, static_cast<std::size_t>(slot));
    }
  });
  return rewards;
}

Stats Strategy::tell(std::span<const float> rewards) {
  const auto n = static_cast<std::size_t>(cfg_.population);
  FUCINA_CHECK(rewards.size() == n, ShapeMismatch, "[es::tell] {} rewards for a population of {}", rewards.size(), n);
  Stats st;
  st.iteration = iteration_;
  st.reward_min = st.reward_max = rewards[0];
  for (std::size_t m = 0; m < n; ++m) {
    FUCINA_CHECK(std::isfinite(rewards[m]), InvalidArgument, "[es::tell] reward of member {} is not finite ({})", m, rewards[m]);
    st.reward_mean += rewards[m];
    if (rewards[m] > st.reward_max) st.reward_max = rewards[m], st.best_member = m;
    st.reward_min = std::min<double>(st.reward_min, rewards[m]);
  }
  st.reward_mean /= static_cast<double>(n);
  for (float r : rewards) st.reward_std += (r - st.reward_mean) * (r - st.reward_mean);
  st.reward_std = std::sqrt(st.reward_std / static_cast<double>(n));

  // Per-stream weights: antithetic pairs fold to C_2k − C_2k+1.
  const std::vector<float> c = shape_rewards(rewards, cfg_.shaping);
  const std::size_t streams = cfg_.antithetic ? n / 2 : n;
  std::vector<float> w(streams);
  std::vector<std::uint64_t> keys(streams);
  for (std::size_t k = 0; k < streams; ++k) {
    w[k] = cfg_.antithetic ? c[2 * k] - c[2 * k + 1] : c[k];
    keys[k] = stream_key(cfg_.seed, iteration_, k);
  }
  const auto step = static_cast<float>(static_cast<double>(cfg_.learning_rate) / static_cast<double>(n));
  const auto decay = static_cast<float>(1.0 - static_cast<double>(cfg_.learning_rate) * cfg_.weight_decay);

  for_each_chunk(pool_, theta_.size(), [&](std::int64_t b, std::int64_t e) {
    float eps[kChunk];
    float acc[kChunk];
    theta_.for_each_piece(b, e, [&](std::size_t k, std::int64_t gb, std::int64_t lb, std::int64_t len) {
      std::fill(acc, acc + len, 0.f);
      for (std::size_t s = 0; s < streams; ++s) {
        if (w[s] == 0.f) continue;  // adds ±0 only: skipping is bitwise the same
        fill_noise(keys[s], static_cast<std::uint64_t>(gb), len, eps);
        const float ws = w[s];
        for (std::int64_t j = 0; j < len; ++j) {
          const float d = ws * eps[j];
          acc[j] = acc[j] + d;
        }
      }
      float* th = theta_.tensor(k).data() + lb;
      for (std::int64_t j = 0; j < len; ++j) {
        const float kept = th[j] * decay;
        const float d = step * acc[j];
        th[j] = kept + d;
      }
    });
  });
  ++iteration_;
  return st;
}

}  // namespace fucina::es
