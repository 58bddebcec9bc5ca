#pragma once
// A loaded model: the GGUF mapping, its config and its borrowed weights, plus the
// forward pass over a per-sequence KV cache.
//
// Note [Forward protocol]: forward(ids) runs the new tokens at positions
// cache.size() .. cache.size() + n - 1 in one batch, appends their K/V and returns the
// logits of the last one (llama.cpp's default output row). prefill() splits a long
// prompt into batches of n_batch; decoding is forward() with one token.
//
// Note [One forward]: training runs the same blocks, weights and kernels as inference;
// forward_train() differs only in where its rows come from (whole sequences, no cache,
// every row's logits) and in recording autograd nodes, which every op of the forward has
// (model/backward.hpp). Variables are what the caller makes of the weights: LoRA factors
// attached with Weight::add_lora, or f32 copies of the weights as variables (full
// training). Attention over the sequence takes prefill_attention's arithmetic on f32 K/V,
// so the training logits equal, bit for bit, forward_all() over an f32 KV cache.
//
// Note [Batched forward]: forward_batch() runs new tokens of many sequences of a
// PagedKvCache in one forward: every weight is read once per step for all rows (the
// products take any number of rows; MoE groups the rows routed to each expert). Per-row
// work (norms, RoPE at each row's position) is row-independent, and attention runs per
// sequence over its own keys with the kernel its solo forward() of the same chunk picks
// (attention.hpp): a sequence's attention takes the arithmetic of running it alone. What
// differs is the order of the weight products' sums: ggml (and so Fucina) sums one row
// with vec_dot and several with tinyBLAS tiles (weights.hpp linear_ggml), so a decode row
// batched with others takes the tiled order where its solo run took the vec order. Logits
// then differ in the last bits, and an f16 KV cache or f16 activations (f16 weights) can
// turn one ulp into one f16 rounding: measured over 8 staggered sequences
// (tests/model/batch_forward_test.cpp) 1.4e-6 with f32 weights and an f32 cache, 2e-4 to
// 4e-3 with an f16 cache, 0 for Q8_0/Q4_K (their products are row-independent); greedy
// picks the same. A sequence alone in a batch is its solo forward bit for bit.
#include <filesystem>
#include <span>

#include "fucina/gguf/reader.hpp"
#include "fucina/model/attention.hpp"
#include "fucina/model/kv_cache.hpp"
#include "fucina/model/weights.hpp"

namespace fucina::model {

class Model {
 public:
  // Throws Io/InvalidFile for a missing or malformed file, Unsupported for an
  // architecture or weight type Fucina cannot run.
  static Model load(const std::filesystem::path& path, const LoadOptions& options = {});
  static Model from_reader(gguf::Reader file, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  // For attaching adapters or trainable copies (Note [One forward]).
  ModelWeights& mutable_weights() { return weights_; }
  const gguf::Reader& file() const { return file_; }

  // n_ctx <= 0 means the context length from the metadata.
  KvCache new_cache(std::int64_t n_ctx = 0, KvType type = KvType::f16) const;

  Tensor<"vocab"> forward(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const;
  // Logits of every position of ids (teacher forcing, perplexity, parity work).
  Tensor<"seq", "vocab"> forward_all(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const;
  // forward_all() where every row's logits and K/V are bit for bit those of forward() over
  // that token alone, after the rows before it (Note [One-row arithmetic]): speculative
  // verification.
  Tensor<"seq", "vocab"> forward_as_decode(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const;
  Tensor<"vocab"> prefill(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids,
                          std::int64_t n_batch = 512) const;

  // A multi-sequence cache (Note [Paged KV cache]) of n_tokens positions shared by all
  // sequences, each at most n_ctx (<= 0: the training context).
  PagedKvCache new_paged_cache(std::int64_t n_tokens, std::int64_t n_ctx = 0, KvType type = KvType::f16) const;
  // Note [Batched forward]: the chunks' tokens, each after its sequence's cached positions,
  // in one forward; the result holds, chunk after chunk, the logits of each chunk's last
  // token, or of every token of a chunk with every_row (speculative verification; run under
  // a OneRowArithmetic scope, each row is its one-token forward's, Note [One-row
  // arithmetic]). A sequence appears at most once. Throws (no sequence grows) for bad ids or
  // a chunk that does not fit.
  struct SeqChunk {
    SeqId seq;
    std::span<const std::int32_t> ids;
    bool every_row = false;
  };
  Tensor<"seq", "vocab"> forward_batch(Context& ctx, PagedKvCache& cache, std::span<const SeqChunk> chunks) const;

  // Logits of every row, recording autograd nodes where weights are variables: rows
  // [seq_starts[i], seq_starts[i + 1]) of ids are sequence i, from position 0 (empty
  // seq_starts: one sequence). checkpoint: keep only each block's input, recompute the
  // block in backward (less memory, one more forward).
  Tensor<"seq", "vocab"> forward_train(Context& ctx, std::span<const std::int32_t> ids,
                                       std::span<const std::int64_t> seq_starts = {}, bool checkpoint = false) const;

 private:
  Model(gguf::Reader file, const LoadOptions& options);
  void check_ids(std::span<const std::int32_t> ids) const;
  // last_only: the last layer's FFN runs on the last row only (llama.cpp's output pruning).
  Tensor<"seq", "embd"> run_layers(Context& ctx, std::span<const std::int32_t> ids, const Batch& batch,
                                   bool last_only, bool checkpoint = false) const;
  Tensor<"seq", "vocab"> head(Context& ctx, const Tensor<"seq", "embd">& x) const;
  gguf::Reader file_;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace fucina::model
