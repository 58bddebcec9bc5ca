#include "fucina/model/qwen3_moe.hpp"

#include <cstring>
#include <limits>
#include <vector>

#include "fucina/core/ops/index.hpp"

namespace fucina::model {

Tensor<"seq", "embd"> moe_ffn(Context& ctx, const ModelConfig& c, const LayerWeights& w,
                              const Tensor<"seq", "embd">& h) {
  const std::int64_t n = h.size<"seq">(), k = c.n_expert_used, embd = c.n_embd;
  auto probs = softmax<"expert">(ctx, linear<"embd">(ctx, h, w.router));  // <seq, expert>
  auto [top, picked] = topk<"expert">(ctx, probs, k);                  // <seq, expert> of size k
  auto total = clamp(ctx, sum<"expert">(ctx, top), 6.103515625e-5f, std::numeric_limits<float>::infinity());
  auto weights = div(ctx, top, total);
  const std::vector<std::int32_t> sel = picked.to_vector();
  const std::vector<float> wts = weights.to_vector();

  auto slots = Tensor<"seq", "slot", "embd">::zeros(ctx, {n, k, embd});
  float* out = slots.mutable_data().data();
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
    auto ff = mul(ctx, silu(ctx, linear<"embd">(ctx, xe, w.gate_exps.expert(e))), linear<"embd">(ctx, xe, w.up_exps.expert(e)));
    auto ye = mul(ctx, linear<"eff">(ctx, ff, w.down_exps.expert(e)), Tensor<"tok">::from_data(ctx, {m}, row_w));
    const float* y = ye.data().data();
    for (std::int64_t r = 0; r < m; ++r)  // scatter back to (token, slot)
      std::memcpy(out + static_cast<std::int64_t>(rows[static_cast<std::size_t>(r)]) * embd, y + r * embd,
                  static_cast<std::size_t>(embd) * sizeof(float));
  }
  return sum<"slot">(ctx, slots);
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
