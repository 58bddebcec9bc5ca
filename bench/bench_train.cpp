// One training step (forward + backward) of a 4-layer MLP and of a transformer block;
// bench/torch_train_step.py times the same steps in PyTorch (docs/BENCHMARK.md).
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "fucina/fucina.hpp"

using namespace fucina;

namespace {

void BM_MlpTrainStep(benchmark::State& st) {
  const std::int64_t batch = 256, width = 512;
  Context ctx({.threads = static_cast<int>(st.range(0))});
  auto x = Tensor<"b", "in">::randn(ctx, {batch, width}, 1);
  std::vector<Tensor<"out", "in">> ws;
  std::vector<Tensor<"out">> bs;
  for (int l = 0; l < 4; ++l) {
    ws.push_back(Tensor<"out", "in">::randn(ctx, {width, width}, 10 + l, 0.f, 1.f / std::sqrt(float(width))).variable());
    bs.push_back(Tensor<"out">::zeros(ctx, {width}).variable());
  }
  auto target = TensorT<DType::i32, "b">::zeros(ctx, {batch});
  for (auto _ : st) {
    auto h = x;
    for (int l = 0; l < 3; ++l) h = rename<"out", "in">(relu(ctx, add(ctx, h.dot<"in">(ctx, ws[l]), bs[l])));
    auto logits = add(ctx, h.dot<"in">(ctx, ws[3]), bs[3]);
    auto loss = cross_entropy<"out">(ctx, logits, target);
    loss.backward(ctx);
    for (auto& w : ws) w.zero_grad();
    for (auto& b : bs) b.zero_grad();
  }
}

void BM_TransformerBlockTrainStep(benchmark::State& st) {
  const std::int64_t seq = 128, embd = 256, hd = 32, heads = 8, kv = 4, ffn = 768;
  Context ctx({.threads = static_cast<int>(st.range(0))});
  auto x = Tensor<"seq", "embd">::randn(ctx, {seq, embd}, 1).variable();
  auto g1 = Tensor<"embd">::ones(ctx, {embd}).variable();
  auto g2 = Tensor<"embd">::ones(ctx, {embd}).variable();
  const float s = 1.f / std::sqrt(float(embd));
  auto wq = Tensor<"qd", "embd">::randn(ctx, {heads * hd, embd}, 2, 0.f, s).variable();
  auto wk = Tensor<"kd", "embd">::randn(ctx, {kv * hd, embd}, 3, 0.f, s).variable();
  auto wv = Tensor<"kd", "embd">::randn(ctx, {kv * hd, embd}, 4, 0.f, s).variable();
  auto wo = Tensor<"embd", "qd">::randn(ctx, {embd, heads * hd}, 5, 0.f, s).variable();
  auto wg = Tensor<"ff", "embd">::randn(ctx, {ffn, embd}, 6, 0.f, s).variable();
  auto wu = Tensor<"ff", "embd">::randn(ctx, {ffn, embd}, 7, 0.f, s).variable();
  auto wd = Tensor<"embd", "ff">::randn(ctx, {embd, ffn}, 8, 0.f, 1.f / std::sqrt(float(ffn))).variable();
  std::vector<std::int32_t> pos(static_cast<std::size_t>(seq));
  for (std::int64_t i = 0; i < seq; ++i) pos[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  auto mask = causal_mask<"seq", "kseq">(ctx, seq, seq);
  for (auto _ : st) {
    auto h = mul(ctx, rms_norm<"embd">(ctx, x, 1e-5f), g1);
    auto q = rope<"seq", "hd">(ctx, split<"qd", "head", "hd">(h.dot<"embd">(ctx, wq), hd), pos, 1e4f, RopeMode::normal);
    auto k = rope<"seq", "hd">(ctx, split<"kd", "kvh", "hd">(h.dot<"embd">(ctx, wk), hd), pos, 1e4f, RopeMode::normal);
    auto v = split<"kd", "kvh", "hd">(h.dot<"embd">(ctx, wv), hd);
    auto scores = einsum<"kvh", "grp", "seq", "kseq">(ctx, split<"head", "kvh", "grp">(q, heads / kv), rename<"seq", "kseq">(k));
    auto probs = softmax<"kseq">(ctx, add(ctx, mul(ctx, scores, 1.f / std::sqrt(float(hd))), mask));
    auto o = einsum<"seq", "kvh", "grp", "hd">(ctx, probs, rename<"seq", "kseq">(v));
    auto x2 = add(ctx, x, merge<"head", "hd", "qd">(merge<"kvh", "grp", "head">(o)).dot<"qd">(ctx, wo));
    auto h2 = mul(ctx, rms_norm<"embd">(ctx, x2, 1e-5f), g2);
    auto ff = mul(ctx, silu(ctx, h2.dot<"embd">(ctx, wg)), h2.dot<"embd">(ctx, wu));
    auto y = add(ctx, x2, ff.dot<"ff">(ctx, wd));
    sum_all(ctx, mul(ctx, y, y)).backward(ctx);
    x.zero_grad(), g1.zero_grad(), g2.zero_grad();
    wq.zero_grad(), wk.zero_grad(), wv.zero_grad(), wo.zero_grad(), wg.zero_grad(), wu.zero_grad(), wd.zero_grad();
  }
}

}  // namespace

BENCHMARK(BM_MlpTrainStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TransformerBlockTrainStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
