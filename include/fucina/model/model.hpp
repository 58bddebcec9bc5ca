#pragma once
// A loaded model: the GGUF mapping, its config and its borrowed weights, plus the
// forward pass over a per-sequence KV cache.
//
// Note [Forward protocol]: forward(ids) runs the new tokens at positions
// cache.size() .. cache.size() + n - 1 in one batch, appends their K/V and returns the
// logits of the last one (llama.cpp's default output row). prefill() splits a long
// prompt into batches of n_batch; decoding is forward() with one token.
#include <filesystem>
#include <span>

#include "fucina/gguf/reader.hpp"
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
  const gguf::Reader& file() const { return file_; }

  // n_ctx <= 0 means the context length from the metadata.
  KvCache new_cache(Context& ctx, std::int64_t n_ctx = 0, DType dtype = DType::f16) const;

  Tensor<"vocab"> forward(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const;
  // Logits of every position of ids (teacher forcing, perplexity, parity work).
  Tensor<"seq", "vocab"> forward_all(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const;
  Tensor<"vocab"> prefill(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids,
                          std::int64_t n_batch = 512) const;

 private:
  Model(gguf::Reader file, const LoadOptions& options);
  // last_only: the last layer's FFN runs on the last row only (llama.cpp's output pruning).
  Tensor<"seq", "embd"> run_layers(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids,
                                   bool last_only) const;
  Tensor<"seq", "vocab"> head(Context& ctx, const Tensor<"seq", "embd">& x) const;
  gguf::Reader file_;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace fucina::model
