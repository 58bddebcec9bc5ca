#include "fucina/model/qwen3_moe.hpp"

#include <cstring>
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "fucina/core/ops/index.hpp"

namespace fucina::model {

namespace {

// The router as llama.cpp's build_moe_ffn computes it (Note [ggml expf]): softmax over the
// experts, the top k by descending probability (ggml_argsort_top_k), their probabilities
// renormalized by their sum (ggml_sum_rows sums in double; clamped below at 2^-14).
struct Routing {
  std::vector<std::int32_t> expert;  // [token][slot]
  std::vector<float> weight;         // [token][slot]
};

Routing route(Context& ctx, const ModelConfig& c, const LayerWeights& w, const Tensor<"seq", "embd">& h) {
  const std::int64_t n = h.size<"seq">(), k = c.n_expert_used, ne = c.n_expert;
  const auto logits = linear<"embd">(ctx, h, w.router).to_vector();  // <seq, expert>
  Routing r{std::vector<std::int32_t>(static_cast<std::size_t>(n * k)), std::vector<float>(static_cast<std::size_t>(n * k))};
  std::vector<float> probs(static_cast<std::size_t>(ne));
  std::vector<std::int32_t> order(static_cast<std::size_t>(ne));
  for (std::int64_t t = 0; t < n; ++t) {
    softmax_ggml(logits.data() + t * ne, probs.data(), ne);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return probs[static_cast<std::size_t>(a)] > probs[static_cast<std::size_t>(b)];
    });
    double total = 0;
    for (std::int64_t s = 0; s < k; ++s) total += static_cast<double>(probs[static_cast<std::size_t>(order[static_cast<std::size_t>(s)])]);
    const float sum = std::max(static_cast<float>(total), 6.103515625e-5f);
    for (std::int64_t s = 0; s < k; ++s) {
      const auto e = order[static_cast<std::size_t>(s)];
      r.expert[static_cast<std::size_t>(t * k + s)] = e;
      r.weight[static_cast<std::size_t>(t * k + s)] = probs[static_cast<std::size_t>(e)] / sum;
    }
  }
  return r;
}

}  // namespace

Tensor<"seq", "embd"> moe_ffn(Context& ctx, const ModelConfig& c, const LayerWeights& w,
                              const Tensor<"seq", "embd">& h) {
  const std::int64_t n = h.size<"seq">(), k = c.n_expert_used, embd = c.n_embd;
  const Routing routing = route(ctx, c, w, h);
  const std::vector<std::int32_t>& sel = routing.expert;
  const std::vector<float>& wts = routing.weight;

  std::vector<float> slots(static_cast<std::size_t>(n * k * embd));  // [token][slot][embd]
  std::vector<std::int32_t> rows;  // (token, slot) pairs routed to the current expert
  std::vector<float> row_w;
  for (std::int64_t e = 0; e < c.n_expert; ++e) {
    rows.clear();
    row_w.clear();
    for (std::int64_t i = 0; i < n * k; ++i)
      if (sel[static_cast<std::size_t>(i)] == e) {
        rows.push_back(static_cast<std::int32_t>(i));
        row_w.push_back(wts[static_cast<std::size_t>(i)]);
      }
    if (rows.empty()) continue;
    const auto m = static_cast<std::int64_t>(rows.size());
    std::vector<std::int32_t> tok(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) tok[r] = static_cast<std::int32_t>(rows[r] / k);
    auto xe = gather<"seq">(ctx, h, TensorT<DType::i32, "tok">::from_data(ctx, {m}, tok));  // <tok, embd>
    auto ff = swiglu_ggml(ctx, linear<"embd">(ctx, xe, w.gate_exps.expert(e)), linear<"embd">(ctx, xe, w.up_exps.expert(e)));
    auto ye = mul(ctx, linear<"eff">(ctx, ff, w.down_exps.expert(e)), Tensor<"tok">::from_data(ctx, {m}, row_w));
    const float* y = ye.data().data();
    for (std::int64_t r = 0; r < m; ++r)  // scatter back to (token, slot)
      std::memcpy(slots.data() + static_cast<std::int64_t>(rows[static_cast<std::size_t>(r)]) * embd, y + r * embd,
                  static_cast<std::size_t>(embd) * sizeof(float));
  }
  // Σ over slots in slot order, one f32 add at a time (llama.cpp's chain of ggml_add).
  auto out = Tensor<"seq", "embd">::empty(ctx, {n, embd});
  float* o = out.mutable_data().data();
  for (std::int64_t t = 0; t < n; ++t) {
    const float* s0 = slots.data() + t * k * embd;
    std::memcpy(o + t * embd, s0, static_cast<std::size_t>(embd) * sizeof(float));
    for (std::int64_t s = 1; s < k; ++s)
      for (std::int64_t d = 0; d < embd; ++d) o[t * embd + d] += s0[s * embd + d];
  }
  return out;
}

Tensor<"seq", "embd"> qwen3moe_block(Context& ctx, const ModelConfig& c, const LayerWeights& w, KvCache& cache,
                                     std::int64_t layer, const Tensor<"seq", "embd">& x,
                                     std::span<const std::int32_t> positions, bool last_row_only) {
  auto h = mul(ctx, rms_norm<"embd">(ctx, x, c.rms_eps), w.attn_norm);
  auto x2 = add(ctx, x, attention(ctx, c, w, cache, layer, h, positions));
  if (last_row_only) x2 = contiguous(ctx, narrow<"seq">(x2, x2.size<"seq">() - 1, 1));  // as llama_block
  auto h2 = mul(ctx, rms_norm<"embd">(ctx, x2, c.rms_eps), w.ffn_norm);
  return add(ctx, x2, moe_ffn(ctx, c, w, h2));
}

}  // namespace fucina::model
