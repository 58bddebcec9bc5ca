#include "fucina/model/qwen3_moe.hpp"

#include <cstring>
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "fucina/core/ops/index.hpp"
#include "fucina/model/expert_store.hpp"
#include "fucina/model/one_row.hpp"

namespace fucina::model {

namespace {

// The router as llama.cpp's build_moe_ffn computes it (Note [ggml expf]): softmax over the
// experts, the top k by descending probability (ggml_argsort_top_k), their probabilities
// renormalized by their sum (ggml_sum_rows sums in double; clamped below at 2^-14).
struct Routing {
  std::vector<std::int32_t> expert;  // [token][slot]
  Tensor<"seq", "slot"> weight;      // differentiable in the router logits
};

Routing route(Context& ctx, const ModelConfig& c, const LayerWeights& w, const Tensor<"seq", "embd">& h) {
  const std::int64_t n = h.size<"seq">(), k = c.n_expert_used, ne = c.n_expert;
  const auto logits_t = linear<"embd">(ctx, h, w.router);  // <seq, expert>
  const auto logits = logits_t.to_vector();
  std::vector<std::int32_t> chosen(static_cast<std::size_t>(n * k));
  std::vector<float> weight(static_cast<std::size_t>(n * k)), probs(static_cast<std::size_t>(n * ne)), sums(static_cast<std::size_t>(n));
  std::vector<std::int32_t> order(static_cast<std::size_t>(ne));
  for (std::int64_t t = 0; t < n; ++t) {
    float* p = probs.data() + t * ne;
    softmax_ggml(logits.data() + t * ne, p, ne);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t b) { return p[a] > p[b]; });
    double total = 0;
    for (std::int64_t s = 0; s < k; ++s) total += static_cast<double>(p[order[static_cast<std::size_t>(s)]]);
    const float sum = std::max(static_cast<float>(total), 6.103515625e-5f);
    sums[static_cast<std::size_t>(t)] = sum;
    for (std::int64_t s = 0; s < k; ++s) {
      const auto e = order[static_cast<std::size_t>(s)];
      chosen[static_cast<std::size_t>(t * k + s)] = e;
      weight[static_cast<std::size_t>(t * k + s)] = p[e] / sum;
    }
  }
  Routing r{chosen, Tensor<"seq", "slot">::from_data(ctx, {n, k}, weight)};
  if (autograd::grad_enabled() && logits_t.requires_grad())
    r.weight.set_node(autograd::make_node<RouterWeightsBackward>({logits_t.node()}, std::move(probs), std::move(chosen),
                                                                 std::move(sums), ne, k));
  return r;
}

}  // namespace

Tensor<"seq", "embd"> moe_ffn(Context& ctx, const ModelConfig& c, const LayerWeights& w, std::int64_t layer,
                              const Tensor<"seq", "embd">& h) {
  const std::int64_t n = h.size<"seq">(), k = c.n_expert_used, embd = c.n_embd;
  const Routing routing = route(ctx, c, w, h);
  const std::vector<std::int32_t>& sel = routing.expert;
  const auto weights = merge<"seq", "slot", "ts">(routing.weight);  // [token·k + slot]

  // Per expert, the (token·k + slot)s routed to it; each active expert runs once, in order.
  std::vector<std::vector<std::int32_t>> rows_of(static_cast<std::size_t>(c.n_expert));
  for (std::int64_t i = 0; i < n * k; ++i) rows_of[static_cast<std::size_t>(sel[static_cast<std::size_t>(i)])].push_back(static_cast<std::int32_t>(i));
  std::vector<std::int32_t> active;
  for (std::int64_t e = 0; e < c.n_expert; ++e)
    if (!rows_of[static_cast<std::size_t>(e)].empty()) active.push_back(static_cast<std::int32_t>(e));
  if (w.expert_store) w.expert_store->prefetch(ctx, layer, active, h);  // Note [Streamed experts]

  std::vector<float> slots(static_cast<std::size_t>(n * k * embd));  // [token][slot][embd]
  std::vector<std::vector<std::int32_t>> expert_rows;  // per active expert: its (token·k + slot)s
  std::vector<autograd::NodeRef> expert_nodes;
  bool grad = false;
  for (const std::int32_t e : active) {
    const std::vector<std::int32_t>& rows = rows_of[static_cast<std::size_t>(e)];
    const auto m = static_cast<std::int64_t>(rows.size());
    std::vector<std::int32_t> tok(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) tok[r] = static_cast<std::int32_t>(rows[r] / k);
    auto xe = gather<"seq">(ctx, h, TensorT<DType::i32, "tok">::from_data(ctx, {m}, tok));  // <tok, embd>
    auto row_w = gather<"ts">(ctx, weights, TensorT<DType::i32, "tok">::from_data(ctx, {m}, rows));
    // Note [One-row arithmetic]: the expert's rows keep the batch's order, so its leading
    // one-row rows are the batch's among them.
    const std::int64_t one_row = one_row_rows();
    const OneRowArithmetic expert_scope(
        one_row == kAllRows ? kAllRows : std::count_if(tok.begin(), tok.end(), [&](std::int32_t t) { return t < one_row; }));
    const ExpertFfn ex = w.expert_store ? w.expert_store->fetch(layer, e) : resident_expert(w, e);
    auto ff = swiglu_ggml(ctx, linear<"embd">(ctx, xe, ex.gate), linear<"embd">(ctx, xe, ex.up));
    auto ye = mul(ctx, linear<"eff">(ctx, ff, ex.down), row_w);
    const float* y = ye.data().data();
    for (std::int64_t r = 0; r < m; ++r)  // scatter back to (token, slot)
      std::memcpy(slots.data() + static_cast<std::int64_t>(rows[static_cast<std::size_t>(r)]) * embd, y + r * embd,
                  static_cast<std::size_t>(embd) * sizeof(float));
    grad = grad || ye.requires_grad();
    expert_rows.push_back(rows);
    expert_nodes.push_back(ye.node());
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
  if (autograd::grad_enabled() && grad)
    out.set_node(autograd::make_node<MoeCombineBackward>(std::move(expert_nodes), std::move(expert_rows), k));
  return out;
}

Tensor<"seq", "embd"> qwen3moe_block(Context& ctx, const ModelConfig& c, const LayerWeights& w, std::int64_t layer,
                                     const Tensor<"seq", "embd">& x, const Batch& batch, bool prune) {
  auto h = rms_norm_mul<"embd">(ctx, x, w.attn_norm, c.rms_eps);
  auto x2 = add(ctx, x, attention(ctx, c, w, layer, h, batch));
  if (prune) x2 = output_rows(ctx, x2, batch);  // as llama_block
  auto h2 = rms_norm_mul<"embd">(ctx, x2, w.ffn_norm, c.rms_eps);
  return add(ctx, x2, moe_ffn(ctx, c, w, layer, h2));
}

}  // namespace fucina::model
