#pragma once
// Causal self-attention with grouped KV heads and a KV cache, as llama.cpp's llama and
// qwen3 graphs compute it: optional per-head q/k RMSNorm (qwen3), RoPE (pairing from the
// config), softmax(q·kᵀ / sqrt(head_dim) + causal mask) · v, output projection.
//
// Which kernel runs follows which path ggml's flash attention takes (the default KV cache
// is f16): < 64 new rows, or a head size that is not a multiple of 16, run one row at a time
// with f16 accumulators (flash_attention_f16, Note [f16 flash attention]); >= 64 rows the
// tiled f32 path (prefill_attention, Note [prefill attention]). A q8_0 cache always takes
// ggml's one-row path for quantized K/V (flash_attention_q8_0, Note [q8_0 KV cache]).
//
// Note [split decode]: one new token over a KV view of >= 512 positions (llama.cpp views
// n_past + 1 positions rounded up to 256, at most the context rounded up to 256) is split
// into one chunk of positions per thread, ceil(view / threads) each; every chunk runs its
// own online softmax and f16 chain, and the chunks are merged in f32. The result depends on
// the thread count, as llama.cpp's does: `-t N` gives llama.cpp's `-t N` bits. An f32 cache
// always takes the tiled arithmetic (llama.cpp's one-row f32 path is not emulated).
#include <span>

#include "fucina/model/kv_cache.hpp"
#include "fucina/model/paged_kv_cache.hpp"
#include "fucina/model/weights.hpp"

namespace fucina::model {

// The rows of one forward (Note [One forward] in model.hpp). Inference: new tokens of one
// sequence at `positions`, after the rows in `cache`. Training (no cache): whole sequences,
// rows [seq_starts[i], seq_starts[i + 1]) being sequence i, at positions 0, 1, ...
// Batched inference (`paged`, Note [Batched forward] in model.hpp): rows [seq_starts[i],
// seq_starts[i + 1]) are new tokens of sequence seq_ids[i], after its rows in `paged`.
struct Batch {
  std::span<const std::int32_t> positions{};
  KvCache* cache = nullptr;
  std::span<const std::int64_t> seq_starts{};
  PagedKvCache* paged = nullptr;
  std::span<const SeqId> seq_ids{};
  // The rows whose output is wanted when a block prunes (llama.cpp's inp_out_ids); empty:
  // the last row.
  std::span<const std::int64_t> out_rows{};
};

// The rows of x a pruning block keeps (Batch::out_rows), contiguous.
Tensor<"seq", "embd"> output_rows(Context& ctx, const Tensor<"seq", "embd">& x, const Batch& batch);

// h: the normed hidden states of the batch's rows.
Tensor<"seq", "embd"> attention(Context& ctx, const ModelConfig& config, const LayerWeights& w, std::int64_t layer,
                                const Tensor<"seq", "embd">& h, const Batch& batch);

// Every row over the rows of its own sequence up to itself (seq_starts as in Batch), with
// prefill_attention's arithmetic on f32 keys and values (what an f32 KV cache gives), and
// a backward (CausalAttentionBackward).
Tensor<"seq", "kvh", "grp", "hd"> causal_attention(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                   const Tensor<"seq", "kvh", "hd">& k,
                                                   const Tensor<"seq", "kvh", "hd">& v,
                                                   std::span<const std::int64_t> seq_starts, float scale);

}  // namespace fucina::model
