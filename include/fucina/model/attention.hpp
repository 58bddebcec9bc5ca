#pragma once
// Causal self-attention with grouped KV heads and a KV cache, as llama.cpp's llama and
// qwen3 graphs compute it: optional per-head q/k RMSNorm (qwen3), RoPE (pairing from the
// config), softmax(q·kᵀ / sqrt(head_dim) + causal mask) · v, output projection.
//
// With an f16 cache and < 64 new rows the scores/weighted sum run in flash_attention_f16
// (llama.cpp's numerics, Note [f16 flash attention]); otherwise in two einsums over f32
// keys/values, which is what llama.cpp's tiled path computes.
#include <span>

#include "fucina/model/kv_cache.hpp"
#include "fucina/model/weights.hpp"

namespace fucina::model {

// h: the normed hidden states of the new tokens at `positions` (cache.size() onwards).
Tensor<"seq", "embd"> attention(Context& ctx, const ModelConfig& config, const LayerWeights& w, KvCache& cache,
                                std::int64_t layer, const Tensor<"seq", "embd">& h,
                                std::span<const std::int32_t> positions);

}  // namespace fucina::model
