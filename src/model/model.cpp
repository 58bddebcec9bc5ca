#include "fucina/model/model.hpp"

#include <algorithm>
#include <vector>

#include "fucina/autograd/node.hpp"
#include "fucina/core/ops/index.hpp"
#include "fucina/model/llama.hpp"
#include "fucina/model/qwen3_moe.hpp"

namespace fucina::model {

Model::Model(gguf::Reader file, const LoadOptions& options)
    : file_(std::move(file)), config_(read_config(file_)), weights_(load_weights(file_, config_, options)) {}

Model Model::load(const std::filesystem::path& path, const LoadOptions& options) {
  return Model(gguf::Reader::open(path), options);
}
Model Model::from_reader(gguf::Reader file, const LoadOptions& options) { return Model(std::move(file), options); }

KvCache Model::new_cache(Context& ctx, std::int64_t n_ctx, DType dtype) const {
  return KvCache(ctx, config_, n_ctx > 0 ? n_ctx : config_.n_ctx_train, dtype);
}

namespace {

// Token embeddings as f32 rows.
Tensor<"seq", "embd"> embed(Context& ctx, const Weight<"vocab", "embd">& table, std::span<const std::int32_t> ids) {
  auto idt = TensorT<DType::i32, "seq">::from_data(ctx, {static_cast<std::int64_t>(ids.size())}, ids);
  if (table.is_quant()) {
    const QuantMatrix& q = table.quant();
    auto out = Tensor<"seq", "embd">::empty(ctx, {static_cast<std::int64_t>(ids.size()), q.cols});
    gather_quant_rows(q, ids.data(), static_cast<std::int64_t>(ids.size()), out.mutable_data().data());
    return out;
  }
  if (table.is_f16()) return gather<"vocab">(ctx, table.f16(), idt).to<DType::f32>(ctx);
  return gather<"vocab">(ctx, table.f32(), idt);
}

}  // namespace

Tensor<"seq", "embd"> Model::run_layers(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids,
                                        bool last_only) const {
  const auto n = static_cast<std::int64_t>(ids.size());
  FUCINA_CHECK(n > 0, InvalidArgument, "[forward] no tokens to run");
  cache.reserve(n);
  for (std::int32_t id : ids)
    FUCINA_CHECK(id >= 0 && id < config_.n_vocab, IndexOutOfBounds, "[forward] token id {} is outside the vocabulary of {}",
                 id, config_.n_vocab);
  std::vector<std::int32_t> pos(ids.size());
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int32_t>(cache.size() + static_cast<std::int64_t>(i));

  auto x = embed(ctx, weights_.tok_embd, ids);
  for (std::int64_t l = 0; l < config_.n_layer; ++l) {
    const LayerWeights& w = weights_.layers[static_cast<std::size_t>(l)];
    const bool prune = last_only && l + 1 == config_.n_layer;
    x = config_.moe ? qwen3moe_block(ctx, config_, w, cache, l, x, pos, prune)
                    : llama_block(ctx, config_, w, cache, l, x, pos, prune);
  }
  cache.advance(n);
  return x;
}

Tensor<"seq", "vocab"> Model::head(Context& ctx, const Tensor<"seq", "embd">& x) const {
  auto h = mul(ctx, rms_norm<"embd">(ctx, x, config_.rms_eps), weights_.output_norm);
  return linear<"embd">(ctx, h, weights_.output);
}

Tensor<"vocab"> Model::forward(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const {
  autograd::NoGradGuard no_grad;
  auto x = run_layers(ctx, cache, ids, true);  // only the last position's logits are needed
  return select<"seq">(head(ctx, x), 0);
}

Tensor<"seq", "vocab"> Model::forward_all(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const {
  autograd::NoGradGuard no_grad;
  return head(ctx, run_layers(ctx, cache, ids, false));
}

Tensor<"vocab"> Model::prefill(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids, std::int64_t n_batch) const {
  FUCINA_CHECK(!ids.empty(), InvalidArgument, "[prefill] empty prompt");
  FUCINA_CHECK(n_batch > 0, InvalidArgument, "[prefill] batch size must be positive, got {}", n_batch);
  cache.reserve(static_cast<std::int64_t>(ids.size()));
  Tensor<"vocab"> logits;
  for (std::size_t b = 0; b < ids.size(); b += static_cast<std::size_t>(n_batch)) {
    const std::size_t e = std::min(ids.size(), b + static_cast<std::size_t>(n_batch));
    logits = forward(ctx, cache, ids.subspan(b, e - b));
  }
  return logits;
}

}  // namespace fucina::model
