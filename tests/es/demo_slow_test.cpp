// Short and full versions of the two ES spirals demos (examples/es_spirals,
// examples/es_ternary_spirals): the short runs assert progress, the full runs the
// accuracy targets (99% f32, 95% ternary). Label "slow": ~10-40 s on 2 cores.
#include <gtest/gtest.h>

#include <cmath>

#include "fucina/autograd/node.hpp"
#include "fucina/es/spirals_demo.hpp"

using namespace fucina;

TEST(EsSpiralsDemo, ShortRunMakesProgress) {
  Context ctx({.threads = 2});
  auto opt = es::demo::spirals_options();
  opt.max_iterations = 600;
  opt.eval_every = 600;
  const auto res = es::demo::run(ctx, opt);
  EXPECT_EQ(res.last.iteration, 600);
  EXPECT_NEAR(res.initial_loss, std::log(2.0), 0.05);  // near chance at init
  EXPECT_LT(res.last.loss, res.initial_loss - 0.03);
}

TEST(EsTernarySpiralsDemo, ShortRunMakesProgress) {
  Context ctx({.threads = 2});
  auto opt = es::demo::ternary_options();
  opt.max_iterations = 600;
  opt.eval_every = 600;
  const auto res = es::demo::run(ctx, opt);
  EXPECT_EQ(res.last.iteration, 600);
  EXPECT_LT(res.last.loss, res.initial_loss - 0.03);
}

TEST(EsSpiralsDemo, ReachesNinetyNinePercent) {
  Context ctx({.threads = 2});
  const std::uint64_t nodes = autograd::nodes_created();
  const auto res = es::demo::run(ctx, es::demo::spirals_options());
  EXPECT_EQ(autograd::nodes_created(), nodes) << "ES must not build autograd nodes";
  EXPECT_GE(res.reached_at, 0) << "accuracy " << res.last.accuracy;
  EXPECT_GE(res.last.accuracy, 0.99);
  EXPECT_GE(res.test_accuracy, 0.95);
}

TEST(EsTernarySpiralsDemo, ReachesNinetyFivePercent) {
  Context ctx({.threads = 2});
  const std::uint64_t nodes = autograd::nodes_created();
  const auto res = es::demo::run(ctx, es::demo::ternary_options());
  EXPECT_EQ(autograd::nodes_created(), nodes) << "ES must not build autograd nodes";
  EXPECT_GE(res.reached_at, 0) << "accuracy " << res.last.accuracy;
  EXPECT_GE(res.last.accuracy, 0.95);
  EXPECT_GE(res.test_accuracy, 0.90);
}
