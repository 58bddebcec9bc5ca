#include "fucina/model/llama.hpp"

namespace fucina::model {

Tensor<"seq", "embd"> swiglu_ffn(Context& ctx, const LayerWeights& w, const Tensor<"seq", "embd">& h) {
  SharedInput in(ctx, h);
  auto ff = swiglu_ggml(ctx, in.linear(w.gate), in.linear(w.up));
  return linear<"ff">(ctx, ff, w.down);
}

Tensor<"seq", "embd"> llama_block(Context& ctx, const ModelConfig& c, const LayerWeights& w, std::int64_t layer,
                                  const Tensor<"seq", "embd">& x, const Batch& batch, bool prune) {
  auto h = rms_norm_mul<"embd">(ctx, x, w.attn_norm, c.rms_eps);
  auto x2 = add(ctx, x, attention(ctx, c, w, layer, h, batch));
  if (prune) x2 = output_rows(ctx, x2, batch);
  auto h2 = rms_norm_mul<"embd">(ctx, x2, w.ffn_norm, c.rms_eps);
  return add(ctx, x2, swiglu_ffn(ctx, w, h2));
}

}  // namespace fucina::model
