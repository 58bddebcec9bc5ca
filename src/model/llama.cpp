#include "fucina/model/llama.hpp"

namespace fucina::model {

Tensor<"seq", "embd"> swiglu_ffn(Context& ctx, const LayerWeights& w, const Tensor<"seq", "embd">& h) {
  SharedInput in(ctx, h);
  auto ff = swiglu_ggml(ctx, in.linear(w.gate), in.linear(w.up));
  return linear<"ff">(ctx, ff, w.down);
}

Tensor<"seq", "embd"> llama_block(Context& ctx, const ModelConfig& c, const LayerWeights& w, std::int64_t layer,
                                  const Tensor<"seq", "embd">& x, const Batch& batch, bool prune) {
  auto h = mul(ctx, rms_norm<"embd">(ctx, x, c.rms_eps), w.attn_norm);
  auto x2 = add(ctx, x, attention(ctx, c, w, layer, h, batch));
  if (prune) x2 = output_rows(ctx, x2, batch);
  auto h2 = mul(ctx, rms_norm<"embd">(ctx, x2, c.rms_eps), w.ffn_norm);
  return add(ctx, x2, swiglu_ffn(ctx, w, h2));
}

}  // namespace fucina::model
