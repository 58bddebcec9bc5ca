#pragma once
// The two-spirals MLP, trained with AdamW through autograd; shared by the example and its
// test. Written in the seed's style: x.dot<"in">(ctx, w1) ...
#include <fmt/core.h>

#include <fucina/data/spirals.hpp>
#include <fucina/fucina.hpp>
#include <fucina/optim/adamw.hpp>
#include <fucina/optim/tensor_params.hpp>

namespace spirals_example {

using namespace fucina;

struct Result {
  float first_loss = 0, last_loss = 0, accuracy = 0;
  int steps = 0;
};

inline Result train(Context& ctx, int max_steps, float target_accuracy, bool verbose) {
  auto data = data::spirals(ctx, {.points_per_class = 200, .noise = 0.02f, .seed = 1});
  const std::int64_t hidden = 64;
  auto w1 = Tensor<"hid", "in">::randn(ctx, {hidden, 2}, 11, 0.f, 1.0f).variable();
  auto b1 = Tensor<"hid">::zeros(ctx, {hidden}).variable();
  auto w2 = Tensor<"hid2", "hid">::randn(ctx, {hidden, hidden}, 12, 0.f, 1.f / 8).variable();
  auto b2 = Tensor<"hid2">::zeros(ctx, {hidden}).variable();
  auto w3 = Tensor<"class", "hid2">::randn(ctx, {2, hidden}, 13, 0.f, 1.f / 8).variable();
  optim::AdamW opt({.lr = 0.01, .weight_decay = 0.0});
  Result r;
  for (int step = 1; step <= max_steps; ++step) {
    auto h1 = tanh(ctx, add(ctx, data.x.dot<"in">(ctx, w1), b1));
    auto h2 = tanh(ctx, add(ctx, h1.dot<"hid">(ctx, w2), b2));
    auto logits = h2.dot<"hid2">(ctx, w3);
    auto loss = cross_entropy<"class">(ctx, logits, data.labels);
    loss.backward(ctx);
    std::vector<optim::ParamRef> params{optim::param_ref("w1", w1), optim::param_ref("b1", b1), optim::param_ref("w2", w2),
                                        optim::param_ref("b2", b2), optim::param_ref("w3", w3)};
    opt.step(ctx, params);
    w1.zero_grad(), b1.zero_grad(), w2.zero_grad(), b2.zero_grad(), w3.zero_grad();

    const auto pred = argmax<"class">(ctx, logits.detach()).to_vector();
    const auto labels = data.labels.to_vector();
    std::int64_t correct = 0;
    for (std::size_t i = 0; i < pred.size(); ++i) correct += pred[i] == labels[i];
    r.accuracy = static_cast<float>(correct) / static_cast<float>(pred.size());
    r.last_loss = loss.item();
    if (step == 1) r.first_loss = r.last_loss;
    r.steps = step;
    if (verbose && (step % 100 == 0 || step == 1 || r.accuracy >= target_accuracy))
      fmt::print("step {:5d}  loss {:.4f}  accuracy {:.1f}%\n", step, r.last_loss, 100.0 * r.accuracy);
    if (r.accuracy >= target_accuracy) break;
  }
  return r;
}

}  // namespace spirals_example
