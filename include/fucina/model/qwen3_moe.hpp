#pragma once
// The qwen3moe decoder block: qwen3 attention, then a mixture-of-experts SwiGLU FFN.
//
// Note [MoE routing] (llama.cpp's build_moe_ffn with softmax gating and norm_w):
// probs = softmax(router · h) over experts; the top-k experts by prob are picked per
// token; their probs are renormalized to sum to 1 (sum clamped at 2^-14); the output is
// Σ_slot weight · down(silu(gate(h)) * up(h)), summed in slot order (highest prob first).
// Each expert runs once on the batch of rows that picked it. Differentiable: the weights
// take RouterWeightsBackward (through the softmax and the renormalization; the choice
// itself is a constant), the expert rows a gather, the slot sum MoeCombineBackward. The
// experts come from the mapped stacks, or from the layer's ExpertStore when streamed (Note
// [Streamed experts]): the same bytes, the same products.
#include "fucina/model/attention.hpp"
#include "fucina/model/ggml_math.hpp"

namespace fucina::model {

Tensor<"seq", "embd"> moe_ffn(Context& ctx, const ModelConfig& config, const LayerWeights& w, std::int64_t layer,
                              const Tensor<"seq", "embd">& h);

Tensor<"seq", "embd"> qwen3moe_block(Context& ctx, const ModelConfig& config, const LayerWeights& w, std::int64_t layer,
                                     const Tensor<"seq", "embd">& x, const Batch& batch, bool prune = false);

}  // namespace fucina::model
