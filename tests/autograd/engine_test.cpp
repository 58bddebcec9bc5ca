// The tape-free backward engine: topology, concurrency, lifetimes, guards, checkpoints.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "fucina/fucina.hpp"

using namespace fucina;

TEST(Engine, VariableAndConstantShareCallSitesAndValues) {
  Context ctx({.threads = 2});
  auto w = Tensor<"in", "out">::randn(ctx, {3, 2}, 1);
  auto x = Tensor<"b", "in">::randn(ctx, {4, 3}, 2);
  auto y_const = tanh(ctx, x.dot<"in">(ctx, w));
  auto wv = w.variable();
  auto y_var = tanh(ctx, x.dot<"in">(ctx, wv));
  EXPECT_FALSE(y_const.requires_grad());
  EXPECT_TRUE(y_var.requires_grad());
  EXPECT_EQ(y_const.to_vector(), y_var.to_vector());  // same kernels, same values
}

TEST(Engine, SimpleGradientsAndAccumulation) {
  Context ctx({.threads = 1});
  auto a = Tensor<"i">::from_data(ctx, {3}, {1, 2, 3}).variable();
  auto b = Tensor<"i">::from_data(ctx, {3}, {4, 5, 6}).variable();
  sum_all(ctx, mul(ctx, a, b)).backward(ctx);
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(b.grad().to_vector(), (std::vector<float>{1, 2, 3}));
  auto kept = a.grad();
  sum_all(ctx, mul(ctx, a, a)).backward(ctx);  // a fresh graph over the same leaves accumulates
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{6, 9, 12}));
  EXPECT_EQ(kept.to_vector(), (std::vector<float>{4, 5, 6}));  // an earlier grad never changes
  a.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Engine, DiamondAccumulatesFromEveryConsumer) {
  Context ctx({.threads = 2});
  auto x = Tensor<"i">::from_data(ctx, {2}, {0.5f, -1.f}).variable();
  auto y = exp(ctx, x);                                      // y used three times below
  auto z = sum_all(ctx, add(ctx, mul(ctx, y, y), mul(ctx, y, 3.f)));
  z.backward(ctx);
  auto g = x.grad().to_vector();
  for (int i = 0; i < 2; ++i) {
    const float yv = std::exp(i == 0 ? 0.5f : -1.f);
    EXPECT_NEAR(g[i], (2 * yv + 3) * yv, 1e-5);  // d/dx (y^2 + 3y) = (2y + 3) y
  }
}

// A wide graph: many independent branches joined at the end, each big enough to be
// scheduled concurrently. Gradients must be bit-identical for 1 and 2 workers.
template <int Threads>
std::vector<std::vector<float>> wide_graph_grads() {
  Context ctx({.threads = Threads});
  auto x = Tensor<"b", "in">::randn(ctx, {64, 96}, 1).variable();
  std::vector<Tensor<"in", "out">> ws;
  for (int k = 0; k < 8; ++k) ws.push_back(Tensor<"in", "out">::randn(ctx, {96, 80}, 10 + k, 0.f, 0.1f).variable());
  Tensor<> loss = Tensor<>::scalar(ctx, 0.f);
  for (int k = 0; k < 8; ++k) {
    auto h = tanh(ctx, x.dot<"in">(ctx, ws[k]));
    auto h2 = softmax<"out">(ctx, mul(ctx, h, h));
    loss = add(ctx, loss, sum_all(ctx, mul(ctx, h2, h)));
  }
  loss.backward(ctx);
  std::vector<std::vector<float>> out{x.grad().to_vector()};
  for (auto& w : ws) out.push_back(w.grad().to_vector());
  return out;
}

TEST(Engine, WideGraphBitIdenticalAcrossWorkerCounts) {
  auto g1 = wide_graph_grads<1>();
  auto g2 = wide_graph_grads<2>();
  ASSERT_EQ(g1.size(), g2.size());
  for (std::size_t i = 0; i < g1.size(); ++i) EXPECT_EQ(g1[i], g2[i]) << "gradient " << i;
}

TEST(Engine, TenThousandOpChainNeitherOverflowsNorLeaks) {
  Context ctx({.threads = 1});
  const auto base = ctx.buffers().stats().outstanding;
  {
    auto x = Tensor<"i">::from_data(ctx, {2}, {0.1f, 0.2f}).variable();
    auto h = x;
    for (int i = 0; i < 10000; ++i) h = add(ctx, h, 1e-4f);
    sum_all(ctx, h).backward(ctx);
    EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{1, 1}));
    // Dropping a long chain without running backward is iterative too.
    auto h2 = x;
    for (int i = 0; i < 10000; ++i) h2 = mul(ctx, h2, 1.0f);
  }
  EXPECT_EQ(ctx.buffers().stats().outstanding, base);
}

TEST(Engine, SecondBackwardOnTheSameGraphIsAnError) {
  Context ctx({.threads = 1});
  auto x = Tensor<"i">::ones(ctx, {2}).variable();
  auto l = sum_all(ctx, exp(ctx, x));
  l.backward(ctx);
  EXPECT_THROW(l.backward(ctx), Error);
  auto c = Tensor<"i">::ones(ctx, {2});
  EXPECT_THROW(sum_all(ctx, c).backward(ctx), Error);  // nothing requires grad
  EXPECT_THROW(exp(ctx, x).backward(ctx), Error);      // non-scalar needs a seed
}

TEST(Engine, NoGradAndDetach) {
  Context ctx({.threads = 1});
  auto x = Tensor<"i">::ones(ctx, {2}).variable();
  const auto before = autograd::nodes_created();
  {
    autograd::NoGradGuard guard;
    auto y = exp(ctx, mul(ctx, x, 2.f));
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_EQ(autograd::nodes_created(), before);
  auto d = exp(ctx, x).detach();
  EXPECT_FALSE(d.requires_grad());
  auto y = mul(ctx, x, d);
  sum_all(ctx, y).backward(ctx);
  EXPECT_NEAR(x.grad().to_vector()[0], std::exp(1.f), 1e-6);  // d is a constant
}

// Training keeps exactly what backward needs; releasing the step returns the pool to its
// baseline. Handles are dropped in a random order before backward: nothing dangles.
TEST(Engine, LifetimesAnyDropOrder) {
  Context ctx({.threads = 2});
  auto w = Tensor<"in", "out">::randn(ctx, {16, 8}, 3).variable();
  auto x = Tensor<"b", "in">::randn(ctx, {4, 16}, 4);
  const auto base = ctx.buffers().stats().outstanding;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 5; ++trial) {
    {
      std::vector<std::function<void()>> drops;
      auto h = x.dot<"in">(ctx, w);
      auto a = tanh(ctx, h);
      auto s = softmax<"out">(ctx, a);
      auto l = sum_all(ctx, mul(ctx, s, a));
      auto hp = std::make_shared<decltype(h)>(h);
      auto ap = std::make_shared<decltype(a)>(a);
      auto sp = std::make_shared<decltype(s)>(s);
      h = {}, a = {}, s = {};
      drops = {[&] { *hp = {}; }, [&] { *ap = {}; }, [&] { *sp = {}; }};
      std::shuffle(drops.begin(), drops.end(), rng);
      for (auto& d : drops) d();
      l.backward(ctx);
    }
    EXPECT_TRUE(w.grad().defined());
    w.zero_grad();
    EXPECT_EQ(ctx.buffers().stats().outstanding, base) << "trial " << trial;
  }
}

TEST(Engine, InferenceFreesIntermediatesImmediately) {
  Context ctx({.threads = 1});
  auto x = Tensor<"b", "in">::randn(ctx, {8, 64}, 1);
  ctx.buffers().reset_peak();
  auto h = x;
  for (int i = 0; i < 16; ++i) h = tanh(ctx, h);
  EXPECT_LE(ctx.buffers().stats().peak_outstanding, 3u);
}

TEST(Engine, CheckpointGradientsBitwiseEqualPlainRun) {
  auto run = [](bool ckpt) {
    Context ctx({.threads = 2});
    auto x = Tensor<"b", "in">::randn(ctx, {8, 32}, 1).variable();
    std::vector<Tensor<"in", "out">> ws;
    for (int k = 0; k < 3; ++k) ws.push_back(Tensor<"in", "out">::randn(ctx, {32, 32}, 20 + k, 0.f, 0.2f).variable());
    auto h = x;
    for (int k = 0; k < 3; ++k) {
      auto block = [&, k](Context& c, const Tensor<"b", "in">& in) {
        auto z = rms_norm<"out">(c, tanh(c, in.dot<"in">(c, ws[k])), 1e-5f);
        return rename<"out", "in">(z);
      };
      h = ckpt ? checkpoint(ctx, block, h) : block(ctx, h);
    }
    sum_all(ctx, mul(ctx, h, h)).backward(ctx);
    std::vector<std::vector<float>> g{x.grad().to_vector()};
    for (auto& w : ws) g.push_back(w.grad().to_vector());
    return g;
  };
  EXPECT_EQ(run(false), run(true));
}
