#pragma once
// The ES spirals tasks shared by examples/es_spirals, examples/es_ternary_spirals and
// tests/es: a 2-H-H-2 tanh MLP classifying the two spirals, trained by es::train with
// reward −CE. Forward tensor ops only: no backward exists anywhere on this path.
//
// The ternary variant keeps the input layer (2×H) and biases in f32, as upstream's
// es-ternary-spirals does, and makes the H×H and H×2 matrices ternary: the network sees
// ternarize(latent) (es/ternary.hpp) and ES searches over the latent.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "fucina/core/ops/contract.hpp"
#include "fucina/core/ops/methods.hpp"
#include "fucina/core/ops/nn.hpp"
#include "fucina/core/ops/pointwise.hpp"
#include "fucina/core/ops/reduce.hpp"
#include "fucina/data/spirals.hpp"
#include "fucina/es/ternary.hpp"
#include "fucina/es/train.hpp"

namespace fucina::es::demo {

struct SpiralsMlp {
  Tensor<"in", "h1"> w1;
  Tensor<"h1"> b1;
  Tensor<"h1", "h2"> w2;
  Tensor<"h2"> b2;
  Tensor<"h2", "class"> w3;
  Tensor<"class"> b3;
  // Ternary variant: w2, w3 are latents and the forward uses s·trit(latent), with one
  // learned f32 scale s per matrix (s2, s3).
  bool ternary = false;
  float threshold = 0.5f;
  Tensor<> s2, s3;

  template <class F>
  void for_each_param(F&& f) {
    f(w1), f(b1), f(w2), f(b2), f(w3), f(b3);
    if (ternary) f(s2), f(s3);
  }

  // Weights U(±1/√fan_in), zero biases (upstream's spirals init). Ternary latents are
  // U(±latent) with the trit threshold at latent/2: the latent scale sets how many
  // trits a perturbation of a given σ flips.
  static SpiralsMlp init(Context& ctx, std::int64_t hidden, bool ternary, std::uint64_t seed, float latent = 1.f) {
    const float b_in = 1.f / std::sqrt(2.f), b_h = 1.f / std::sqrt(static_cast<float>(hidden));
    SpiralsMlp m;
    m.w1 = Tensor<"in", "h1">::uniform(ctx, {2, hidden}, seed, -b_in, b_in);
    m.b1 = Tensor<"h1">::zeros(ctx, {hidden});
    m.b2 = Tensor<"h2">::zeros(ctx, {hidden});
    m.b3 = Tensor<"class">::zeros(ctx, {2});
    m.ternary = ternary;
    if (ternary) {
      m.w2 = Tensor<"h1", "h2">::uniform(ctx, {hidden, hidden}, seed + 1, -latent, latent);
      m.w3 = Tensor<"h2", "class">::uniform(ctx, {hidden, 2}, seed + 2, -latent, latent);
      m.threshold = 0.5f * latent;
      // About a half of the trits are non-zero: scale keeps the pre-activation variance ~1.
      m.s2 = Tensor<>::scalar(ctx, std::sqrt(2.f / static_cast<float>(hidden)));
      m.s3 = Tensor<>::scalar(ctx, std::sqrt(2.f / static_cast<float>(hidden)));
    } else {
      m.w2 = Tensor<"h1", "h2">::uniform(ctx, {hidden, hidden}, seed + 1, -b_h, b_h);
      m.w3 = Tensor<"h2", "class">::uniform(ctx, {hidden, 2}, seed + 2, -b_h, b_h);
    }
    return m;
  }

  Tensor<"batch", "class"> logits(Context& ctx, const Tensor<"batch", "in">& x) const {
    auto h1 = tanh(ctx, add(ctx, x.dot<"in">(ctx, w1), b1));
    const auto v2 = ternary ? ternarize(ctx, w2, threshold, s2.item()) : w2;
    auto h2 = tanh(ctx, add(ctx, h1.dot<"h1">(ctx, v2), b2));
    const auto v3 = ternary ? ternarize(ctx, w3, threshold, s3.item()) : w3;
    return add(ctx, h2.dot<"h2">(ctx, v3), b3);
  }
};

// Mean cross-entropy of `logits` against `labels`.
inline double cross_entropy(Context& ctx, const Tensor<"batch", "class">& logits, const TensorT<DType::i32, "batch">& labels) {
  const auto lp = log_softmax<"class">(ctx, logits).to_vector();
  const auto y = labels.to_vector();
  const std::int64_t c = logits.size<"class">();
  double sum = 0;
  for (std::size_t b = 0; b < y.size(); ++b) sum -= lp[b * static_cast<std::size_t>(c) + static_cast<std::size_t>(y[b])];
  return sum / static_cast<double>(y.size());
}

inline double accuracy(Context& ctx, const Tensor<"batch", "class">& logits, const TensorT<DType::i32, "batch">& labels) {
  const auto pred = argmax<"class">(ctx, logits).to_vector();
  const auto y = labels.to_vector();
  std::size_t hit = 0;
  for (std::size_t b = 0; b < y.size(); ++b) hit += pred[b] == y[b];
  return static_cast<double>(hit) / static_cast<double>(y.size());
}

struct Options {
  bool ternary = false;
  std::int64_t hidden = 32;
  float latent = 1.f;  // ternary latent range (see SpiralsMlp::init)
  std::int64_t points_per_class = 100;
  std::int64_t max_iterations = 3000;
  std::int64_t eval_every = 25;  // accuracy of the mean θ is checked this often
  double target = 0.99;          // stop once the training accuracy reaches it
  std::uint64_t init_seed = 1;
  std::uint64_t data_seed = 7;
  Config es{.population = 64, .sigma = 0.1f, .learning_rate = 0.3f, .antithetic = true,
            .shaping = Shaping::z_score, .weight_decay = 0.f, .seed = 42, .threads = 0};
};

// Tuned defaults of the two demos (see docs/TRAINING.md for the measured runs).
inline Options spirals_options() { return Options{}; }
inline Options ternary_options() {
  Options o;
  o.ternary = true;
  o.target = 0.95;
  o.es.sigma = 0.05f;
  return o;
}

struct Progress {
  std::int64_t iteration = 0;  // iterations done
  double reward_mean = 0;      // mean member reward (−CE) of the last iteration
  double loss = 0;             // CE of the mean θ
  double accuracy = 0;         // training accuracy of the mean θ
  double seconds = 0;
};

struct Result {
  Progress last;
  double initial_loss = 0;  // CE of the initial θ
  std::int64_t reached_at = -1;  // first checked iteration with accuracy >= target
  double reached_seconds = 0;
  double test_accuracy = 0;  // on a fresh spirals draw (data_seed + 1)
  std::int64_t params = 0;
};

// Trains from scratch until the target accuracy or max_iterations; on_progress runs
// at every accuracy check.
inline Result run(Context& ctx, const Options& opt, const std::function<void(const Progress&)>& on_progress = {}) {
  const auto data = data::spirals(ctx, {.points_per_class = opt.points_per_class, .noise = 0.02f, .turns = 1.75f, .seed = opt.data_seed});
  SpiralsMlp model = SpiralsMlp::init(ctx, opt.hidden, opt.ternary, opt.init_seed, opt.latent);
  Result res;
  res.params = params_of(model).size();
  res.initial_loss = cross_entropy(ctx, model.logits(ctx, data.x), data.labels);
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto reward = [&](const SpiralsMlp& m) { return static_cast<float>(-cross_entropy(ctx, m.logits(ctx, data.x), data.labels)); };
  auto check = [&](const Stats& st) {
    const std::int64_t done = static_cast<std::int64_t>(st.iteration) + 1;
    if (done % opt.eval_every != 0 && done != opt.max_iterations) return true;
    const auto logits = model.logits(ctx, data.x);
    res.last = {done, st.reward_mean, cross_entropy(ctx, logits, data.labels), accuracy(ctx, logits, data.labels), seconds()};
    if (on_progress) on_progress(res.last);
    if (res.last.accuracy >= opt.target) {
      res.reached_at = done;
      res.reached_seconds = res.last.seconds;
      return false;
    }
    return true;
  };
  train(ctx, opt.es, model, reward, opt.max_iterations, check);
  const auto test = data::spirals(ctx, {.points_per_class = opt.points_per_class, .noise = 0.02f, .turns = 1.75f, .seed = opt.data_seed + 1});
  res.test_accuracy = accuracy(ctx, model.logits(ctx, test.x), test.labels);
  return res;
}

}  // namespace fucina::es::demo
