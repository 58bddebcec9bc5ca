#pragma once
// The pre-norm decoder block of llama.cpp's `llama` graph, also used for `qwen3`:
//   x += attention(rms_norm(x) · attn_norm);  x += swiglu_ffn(rms_norm(x) · ffn_norm)
// Qwen3's differences (q/k RMSNorm, NEOX RoPE, tied output) come from the config and
// the weights, so both architectures run through llama_block.
#include "fucina/model/attention.hpp"
#include "fucina/model/ggml_math.hpp"

namespace fucina::model {

// down(silu(gate(h)) * up(h)).
Tensor<"seq", "embd"> swiglu_ffn(Context& ctx, const LayerWeights& w, const Tensor<"seq", "embd">& h);

// prune: after attention keep only the batch's output rows (output_rows: llama.cpp's
// inp_out_ids pruning in the last layer), so the FFN of a solo forward runs on one row, with
// ggml's one-row (vec_dot) sums.
Tensor<"seq", "embd"> llama_block(Context& ctx, const ModelConfig& config, const LayerWeights& w, std::int64_t layer,
                                  const Tensor<"seq", "embd">& x, const Batch& batch, bool prune = false);

}  // namespace fucina::model
