#include "fucina/model/model.hpp"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "fucina/autograd/node.hpp"
#include "fucina/core/ops/checkpoint.hpp"
#include "fucina/core/ops/index.hpp"
#include "fucina/model/expert_store.hpp"
#include "fucina/model/llama.hpp"
#include "fucina/model/one_row.hpp"
#include "fucina/model/qwen3_moe.hpp"

namespace fucina::model {

Model::Model(gguf::Reader file, const LoadOptions& options)
    : file_(std::move(file)), config_(read_config(file_)), weights_(load_weights(file_, config_, options)) {}

Model Model::load(const std::filesystem::path& path, const LoadOptions& options) {
  if (!options.moe_stream) return Model(gguf::Reader::open(path), options);
  // Note [Streamed experts]: the expert stacks stay unmapped, read on demand.
  auto file = gguf::Reader::open(path, [](const gguf::TensorInfo& t) { return !is_routed_expert_tensor(t.name); });
  FUCINA_CHECK(read_config(file).moe, InvalidArgument,
               "[moe-stream] '{}' is not a mixture-of-experts model: it has no routed experts to stream", path.string());
  Model m(std::move(file), options);
  std::vector<Weight<"expert", "embd">> routers;
  for (const LayerWeights& L : m.weights_.layers) routers.push_back(L.router);
  auto store = std::make_shared<ExpertStore>(path, m.file_, m.config_, std::move(routers), options);
  for (LayerWeights& L : m.weights_.layers) L.expert_store = store;
  return m;
}
Model Model::from_reader(gguf::Reader file, const LoadOptions& options) {
  FUCINA_CHECK(!options.moe_stream, InvalidArgument, "[moe-stream] streamed experts need a model file (Model::load)");
  return Model(std::move(file), options);
}

KvCache Model::new_cache(std::int64_t n_ctx, KvType type) const {
  return KvCache(config_, n_ctx > 0 ? n_ctx : config_.n_ctx_train, type);
}

PagedKvCache Model::new_paged_cache(std::int64_t n_tokens, std::int64_t n_ctx, KvType type) const {
  return PagedKvCache(config_, n_tokens, n_ctx > 0 ? n_ctx : config_.n_ctx_train, type);
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

void Model::check_ids(std::span<const std::int32_t> ids) const {
  FUCINA_CHECK(!ids.empty(), InvalidArgument, "[forward] no tokens to run");
  for (std::int32_t id : ids)
    FUCINA_CHECK(id >= 0 && id < config_.n_vocab, IndexOutOfBounds, "[forward] token id {} is outside the vocabulary of {}",
                 id, config_.n_vocab);
}

Tensor<"seq", "embd"> Model::run_layers(Context& ctx, std::span<const std::int32_t> ids, const Batch& batch,
                                        bool last_only, bool checkpoint) const {
  auto x = embed(ctx, weights_.tok_embd, ids);
  // A checkpointed block is recomputed in backward, after this call returned: it owns its rows.
  using Rows = std::pair<std::vector<std::int32_t>, std::vector<std::int64_t>>;
  const auto rows = std::make_shared<const Rows>(Rows{{batch.positions.begin(), batch.positions.end()},
                                                      {batch.seq_starts.begin(), batch.seq_starts.end()}});
  for (std::int64_t l = 0; l < config_.n_layer; ++l) {
    const LayerWeights& w = weights_.layers[static_cast<std::size_t>(l)];
    const bool prune = last_only && l + 1 == config_.n_layer;
    if (checkpoint) {
      auto block = [this, &w, l, rows](Context& c, const Tensor<"seq", "embd">& in) {
        const Batch b{rows->first, nullptr, rows->second};
        return config_.moe ? qwen3moe_block(c, config_, w, l, in, b) : llama_block(c, config_, w, l, in, b);
      };
      x = fucina::checkpoint(ctx, block, x);
    } else {
      x = config_.moe ? qwen3moe_block(ctx, config_, w, l, x, batch, prune) : llama_block(ctx, config_, w, l, x, batch, prune);
    }
  }
  return x;
}

Tensor<"seq", "vocab"> Model::head(Context& ctx, const Tensor<"seq", "embd">& x) const {
  auto h = rms_norm_mul<"embd">(ctx, x, weights_.output_norm, config_.rms_eps);
  return linear<"embd">(ctx, h, weights_.output);
}

namespace {
std::vector<std::int32_t> cache_positions(const KvCache& cache, std::size_t n) {
  std::vector<std::int32_t> pos(n);
  for (std::size_t i = 0; i < n; ++i) pos[i] = static_cast<std::int32_t>(cache.size() + static_cast<std::int64_t>(i));
  return pos;
}
}  // namespace

Tensor<"vocab"> Model::forward(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const {
  autograd::NoGradGuard no_grad;
  check_ids(ids);
  cache.reserve(static_cast<std::int64_t>(ids.size()));
  const auto pos = cache_positions(cache, ids.size());
  auto x = run_layers(ctx, ids, Batch{pos, &cache, {}}, true);  // only the last position's logits are needed
  cache.advance(static_cast<std::int64_t>(ids.size()));
  return select<"seq">(head(ctx, x), 0);
}

Tensor<"seq", "vocab"> Model::forward_all(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const {
  autograd::NoGradGuard no_grad;
  check_ids(ids);
  cache.reserve(static_cast<std::int64_t>(ids.size()));
  const auto pos = cache_positions(cache, ids.size());
  auto x = run_layers(ctx, ids, Batch{pos, &cache, {}}, false);
  cache.advance(static_cast<std::int64_t>(ids.size()));
  return head(ctx, x);
}

Tensor<"seq", "vocab"> Model::forward_as_decode(Context& ctx, KvCache& cache, std::span<const std::int32_t> ids) const {
  OneRowArithmetic one_row;
  return forward_all(ctx, cache, ids);
}

Tensor<"seq", "vocab"> Model::forward_batch(Context& ctx, PagedKvCache& cache, std::span<const SeqChunk> chunks) const {
  autograd::NoGradGuard no_grad;
  FUCINA_CHECK(!chunks.empty(), InvalidArgument, "[forward_batch] no sequences to run");
  std::vector<std::int32_t> ids, pos;
  std::vector<std::int64_t> starts{0}, out_rows;
  std::vector<SeqId> seqs;
  for (const SeqChunk& chunk : chunks) {
    check_ids(chunk.ids);
    FUCINA_CHECK(std::find(seqs.begin(), seqs.end(), chunk.seq) == seqs.end(), InvalidArgument,
                 "[forward_batch] sequence {} appears twice in one batch", chunk.seq);
    const auto n = static_cast<std::int64_t>(chunk.ids.size());
    FUCINA_CHECK(cache.size(chunk.seq) + n <= cache.capacity(), InvalidArgument,
                 "[kv_cache] context is full: {} cached + {} new tokens > context length {} (raise --ctx)",
                 cache.size(chunk.seq), n, cache.capacity());
    for (std::int64_t i = 0; i < n; ++i) pos.push_back(static_cast<std::int32_t>(cache.size(chunk.seq) + i));
    ids.insert(ids.end(), chunk.ids.begin(), chunk.ids.end());
    for (std::int64_t r = chunk.every_row ? starts.back() : starts.back() + n - 1; r < starts.back() + n; ++r)
      out_rows.push_back(r);
    starts.push_back(starts.back() + n);
    seqs.push_back(chunk.seq);
  }
  for (const SeqChunk& chunk : chunks) cache.reserve(chunk.seq, static_cast<std::int64_t>(chunk.ids.size()));
  const Batch batch{.positions = pos, .seq_starts = starts, .paged = &cache, .seq_ids = seqs, .out_rows = out_rows};
  auto x = run_layers(ctx, ids, batch, true);
  for (const SeqChunk& chunk : chunks) cache.advance(chunk.seq, static_cast<std::int64_t>(chunk.ids.size()));
  return head(ctx, x);
}

Tensor<"seq", "vocab"> Model::forward_train(Context& ctx, std::span<const std::int32_t> ids,
                                            std::span<const std::int64_t> seq_starts, bool checkpoint) const {
  check_ids(ids);
  const auto n = static_cast<std::int64_t>(ids.size());
  std::vector<std::int64_t> starts(seq_starts.begin(), seq_starts.end());
  if (starts.empty()) starts = {0, n};
  FUCINA_CHECK(starts.front() == 0 && starts.back() == n && std::is_sorted(starts.begin(), starts.end()), InvalidArgument,
               "[forward_train] sequence starts must rise from 0 to the {} tokens", n);
  std::vector<std::int32_t> pos(ids.size());
  for (std::size_t s = 0; s + 1 < starts.size(); ++s) {
    FUCINA_CHECK(starts[s + 1] - starts[s] <= config_.n_ctx_train, InvalidArgument,
                 "[forward_train] a sequence of {} tokens is longer than the model's context {}", starts[s + 1] - starts[s],
                 config_.n_ctx_train);
    for (std::int64_t i = starts[s]; i < starts[s + 1]; ++i) pos[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i - starts[s]);
  }
  return head(ctx, run_layers(ctx, ids, Batch{pos, nullptr, starts}, false, checkpoint));
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
