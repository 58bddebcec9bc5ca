// es::Strategy against the textbook update computed in double with explicitly stored
// noise, thread-count invariance, remote scoring, shaping, resume and input errors.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "fucina/autograd/node.hpp"
#include "fucina/es/strategy.hpp"
#include "fucina/es/train.hpp"
#include "fucina/fucina.hpp"

using namespace fucina;

namespace {

struct Tiny {
  Tensor<"a", "b"> w;
  Tensor<"b"> bias;
  Tensor<"c"> v;
  template <class F>
  void for_each_param(F&& f) {
    f(w), f(bias), f(v);
  }
  static Tiny make(Context& ctx, std::int64_t scale = 1) {
    return {Tensor<"a", "b">::randn(ctx, {3 * scale, 5}, 11), Tensor<"b">::randn(ctx, {5}, 12),
            Tensor<"c">::randn(ctx, {7 * scale}, 13)};
  }
};

// A deterministic reward computed with plain sequential loops.
float quadratic_reward(const es::ParamSet& p) {
  double acc = 0;
  std::int64_t i = 0;
  for (std::size_t k = 0; k < p.count(); ++k)
    for (float x : p.tensor(k)) {
      const double d = x - 0.01 * static_cast<double>(i++ % 17);
      acc += d * d;
    }
  return static_cast<float>(-acc);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The textbook update in double with the member noise stored in a matrix.
std::vector<double> textbook_step(const std::vector<float>& theta, const es::Config& cfg, std::uint64_t iteration,
                                  const std::vector<float>& rewards, const std::vector<float>& shaped) {
  const std::size_t n = rewards.size(), p = theta.size();
  std::vector<std::vector<double>> eps(n, std::vector<double>(p));
  for (std::size_t m = 0; m < n; ++m) {
    const std::uint64_t stream = cfg.antithetic ? m / 2 : m;
    const double sign = cfg.antithetic && (m & 1) ? -1 : 1;
    for (std::size_t i = 0; i < p; ++i) eps[m][i] = sign * es::noise(cfg.seed, iteration, stream, i);
  }
  std::vector<double> out(p);
  for (std::size_t i = 0; i < p; ++i) {
    double g = 0;
    for (std::size_t m = 0; m < n; ++m) g += shaped[m] * eps[m][i];
    out[i] = theta[i] * (1 - double(cfg.learning_rate) * cfg.weight_decay) + double(cfg.learning_rate) / n * g;
  }
  return out;
}

}  // namespace

TEST(EsStrategy, StepMatchesTextbookFormulaWithStoredNoise) {
  Context ctx({.threads = 2});
  for (bool antithetic : {false, true})
    for (es::Shaping shaping : {es::Shaping::none, es::Shaping::z_score, es::Shaping::centered_ranks}) {
      Tiny model = Tiny::make(ctx);
      es::Config cfg{.population = 6, .sigma = 0.05f, .learning_rate = 0.1f, .antithetic = antithetic,
                     .shaping = shaping, .weight_decay = 0.3f, .seed = 7, .threads = 1};
      es::Strategy es(cfg, es::params_of(model));
      Tiny rep_model = es::replica_of(ctx, model);
      const es::ParamSet rep = es::params_of(rep_model);
      for (int it = 0; it < 2; ++it) {
        const std::vector<float> theta = es.params().to_vector();
        std::vector<float> rewards;
        for (const es::Member& m : es.ask()) {
          es.materialize(m, rep);
          const std::vector<float> got = rep.to_vector();
          for (std::size_t i = 0; i < theta.size(); ++i)
            ASSERT_NEAR(got[i], theta[i] + 0.05 * m.epsilon(i), 1e-6) << i;
          rewards.push_back(quadratic_reward(rep));
        }
        const std::vector<float> shaped = es::shape_rewards(rewards, shaping);
        const std::vector<double> want = textbook_step(theta, cfg, es.iteration(), rewards, shaped);
        es.tell(rewards);
        const std::vector<float> got = es.params().to_vector();
        for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << i << " antithetic " << antithetic;
      }
    }
}

TEST(EsStrategy, ShapingFormulas) {
  const std::vector<float> r{3, 1, 3, 2};
  const auto ranks = es::shape_rewards(r, es::Shaping::centered_ranks);
  // Ascending, ties by member index: member 1, 3, 0, 2.
  EXPECT_FLOAT_EQ(ranks[0], 2.f / 3 - 0.5f);
  EXPECT_FLOAT_EQ(ranks[1], -0.5f);
  EXPECT_FLOAT_EQ(ranks[2], 0.5f);
  EXPECT_FLOAT_EQ(ranks[3], 1.f / 3 - 0.5f);
  const auto z = es::shape_rewards(r, es::Shaping::z_score);
  const double mean = 2.25, sd = std::sqrt((0.5625 + 1.5625 + 0.5625 + 0.0625) / 4);
  for (std::size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(z[i], (r[i] - mean) / (sd + 1e-8), 1e-6);
  EXPECT_EQ(es::shape_rewards(r, es::Shaping::none), r);
  EXPECT_EQ(es::shape_rewards(std::vector<float>{5.f}, es::Shaping::centered_ranks), std::vector<float>{0.f});
  EXPECT_THROW(es::shape_rewards(std::vector<float>{1.f, NAN}, es::Shaping::centered_ranks), Error);
}

TEST(EsStrategy, EqualRewardsUnderZScoreAreABitwiseNoOp) {
  Context ctx({.threads = 1});
  Tiny model = Tiny::make(ctx);
  es::Strategy es({.population = 8, .sigma = 0.1f, .learning_rate = 0.5f, .seed = 3, .threads = 1}, es::params_of(model));
  const auto before = es.params().to_vector();
  es.tell(std::vector<float>(8, 1.25f));
  EXPECT_TRUE(bitwise_equal(before, es.params().to_vector()));
  EXPECT_EQ(es.iteration(), 1u);
}

TEST(EsStrategy, BitwiseIdenticalForOneAndManyThreads) {
  // Big enough for several update chunks; members scored in parallel on 1 and 4 threads.
  std::vector<std::vector<float>> results;
  for (int threads : {1, 4}) {
    Context ctx({.threads = threads});
    Tiny model = Tiny::make(ctx, 2000);
    es::Config cfg{.population = 10, .sigma = 0.03f, .learning_rate = 0.05f, .seed = 5, .threads = threads};
    es::Strategy es(cfg, es::params_of(model));
    std::vector<Tiny> reps;
    std::vector<es::ParamSet> rep_params;
    for (int t = 0; t < threads; ++t) reps.push_back(es::replica_of(ctx, model));
    for (auto& r : reps) rep_params.push_back(es::params_of(r));
    for (int it = 0; it < 3; ++it) {
      const auto rewards = es.evaluate(rep_params, [](const es::Member&, const es::ParamSet& p, std::size_t) { return quadratic_reward(p); });
      es.tell(rewards);
    }
    results.push_back(es.params().to_vector());
  }
  EXPECT_TRUE(bitwise_equal(results[0], results[1]));
}

TEST(EsStrategy, RemoteWorkerStaysInSyncFromSeedIterationMember) {
  // The "remote" side knows only θ0, the config, and (seed, iteration, member) of the
  // members it scores; it receives everybody's rewards and applies the same tell().
  Context ctx({.threads = 2});
  Tiny a = Tiny::make(ctx), b = es::replica_of(ctx, a);
  const es::Config cfg{.population = 6, .sigma = 0.1f, .learning_rate = 0.2f, .shaping = es::Shaping::centered_ranks, .seed = 99};
  es::Strategy coordinator(cfg, es::params_of(a)), worker(cfg, es::params_of(b));
  Tiny rep_a = es::replica_of(ctx, a), rep_b = es::replica_of(ctx, a);
  const es::ParamSet pa = es::params_of(rep_a), pb = es::params_of(rep_b);
  for (int it = 0; it < 4; ++it) {
    const auto rewards = coordinator.evaluate(std::span(&pa, 1), [](const es::Member&, const es::ParamSet& p, std::size_t) {
      return quadratic_reward(p);
    });
    std::vector<float> remote(rewards.size());
    for (std::uint64_t m = 0; m < remote.size(); ++m) {
      const es::Member mem{cfg.seed, static_cast<std::uint64_t>(it), m, cfg.antithetic};
      es::perturb(mem, cfg.sigma, worker.params(), pb);
      remote[m] = quadratic_reward(pb);
    }
    EXPECT_TRUE(bitwise_equal(rewards, remote));
    coordinator.tell(rewards);
    worker.tell(remote);
  }
  EXPECT_TRUE(bitwise_equal(coordinator.params().to_vector(), worker.params().to_vector()));
}

TEST(EsStrategy, ResumeFromIterationReproducesTheRun) {
  Context ctx({.threads = 1});
  const es::Config cfg{.population = 4, .sigma = 0.1f, .learning_rate = 0.1f, .seed = 1, .threads = 1};
  auto run = [&](es::Strategy& es, int iters) {
    Tiny rep = es::replica_of(ctx, Tiny::make(ctx));
    const es::ParamSet p = es::params_of(rep);
    for (int i = 0; i < iters; ++i)
      es.tell(es.evaluate(std::span(&p, 1), [](const es::Member&, const es::ParamSet& q, std::size_t) { return quadratic_reward(q); }));
  };
  Tiny full = Tiny::make(ctx);
  es::Strategy s_full(cfg, es::params_of(full));
  run(s_full, 5);
  Tiny part = Tiny::make(ctx);
  {
    es::Strategy s1(cfg, es::params_of(part));
    run(s1, 3);
  }
  es::Strategy s2(cfg, es::params_of(part));
  s2.seek(3);
  run(s2, 2);
  EXPECT_TRUE(bitwise_equal(s_full.params().to_vector(), s2.params().to_vector()));
}

namespace {
struct Vec {
  Tensor<"i"> x;
  template <class F>
  void for_each_param(F&& f) {
    f(x);
  }
};
}  // namespace

TEST(EsTrain, SphereShrinks) {
  // Upstream's sphere check: n=16, σ .1, α .05, N 16: after 150 steps ‖θ‖² < 0.25× start.
  Context ctx({.threads = 2});
  Vec v{Tensor<"i">::full(ctx, {16}, 1.f)};
  auto norm2 = [](const Tensor<"i">& t) {
    double s = 0;
    for (float x : t.data()) s += double(x) * x;
    return s;
  };
  const double start = norm2(v.x);
  int calls = 0;
  const es::Config cfg{.population = 16, .sigma = 0.1f, .learning_rate = 0.05f, .antithetic = false, .seed = 42};
  const std::uint64_t nodes = autograd::nodes_created();
  es::train(ctx, cfg, v, [&](const Vec& m) { return static_cast<float>(-norm2(m.x)); }, 150, [&](const es::Stats&) { ++calls; });
  EXPECT_EQ(autograd::nodes_created(), nodes);  // forward only: no autograd state
  EXPECT_EQ(calls, 150);
  EXPECT_LT(norm2(v.x), 0.25 * start);
}

TEST(EsTrain, CallbackStopsEarlyAndRewardSeesTheMember) {
  Context ctx({.threads = 2});
  Vec v{Tensor<"i">::zeros(ctx, {4})};
  std::atomic<int> scored{0};
  const es::Config cfg{.population = 4, .sigma = 0.1f, .learning_rate = 0.05f};
  const es::Stats st = es::train(
      ctx, cfg, v,
      [&](const Vec& m, const es::Member& mem) {
        ++scored;
        EXPECT_FLOAT_EQ(m.x.data()[1], 0.1f * mem.epsilon(1) + 0.f);
        return 0.f;
      },
      10, [](const es::Stats& s) { return s.iteration < 2; });
  EXPECT_EQ(st.iteration, 2u);
  EXPECT_EQ(scored.load(), 12);
}

TEST(EsStrategy, BadInputIsAClearError) {
  Context ctx({.threads = 1});
  Tiny model = Tiny::make(ctx);
  auto code_of = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Internal;
  };
  EXPECT_EQ(code_of([&] { es::Strategy({.population = 5, .antithetic = true}, es::params_of(model)); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of([&] { es::Strategy({.population = 0}, es::params_of(model)); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of([&] { es::Strategy({.sigma = 0.f}, es::params_of(model)); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of([&] { es::Strategy({.learning_rate = NAN}, es::params_of(model)); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of([&] { es::Strategy({}, es::ParamSet{}); }), ErrorCode::InvalidArgument);
  es::Strategy es({.population = 4, .threads = 1}, es::params_of(model));
  EXPECT_EQ(code_of([&] { es.tell(std::vector<float>(3, 0.f)); }), ErrorCode::ShapeMismatch);
  EXPECT_EQ(code_of([&] { es.tell(std::vector<float>{0.f, NAN, 0.f, 0.f}); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of([&] { (void)es.member(4); }), ErrorCode::IndexOutOfBounds);
  es::ParamSet wrong;
  wrong.add(Tensor<"i">::zeros(ctx, {3}));
  EXPECT_EQ(code_of([&] { es.materialize(es.member(0), wrong); }), ErrorCode::ShapeMismatch);
  es::ParamSet strided;
  EXPECT_EQ(code_of([&] { strided.add(model.w.permute<"b", "a">()); }), ErrorCode::UnsupportedView);
  EXPECT_EQ(es.iteration(), 0u);  // failed tells changed nothing
}
