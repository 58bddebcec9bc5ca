#include "fucina/model/attention.hpp"

#include <cmath>

#include "fucina/model/flash_attention.hpp"
#include "fucina/model/prefill_attention.hpp"

namespace fucina::model {

namespace {
// llama.cpp switches to its tiled f32 flash-attention path from this many query rows.
constexpr std::int64_t kTiledFromRows = 64;
}  // namespace

Tensor<"seq", "embd"> attention(Context& ctx, const ModelConfig& c, const LayerWeights& w, KvCache& cache,
                                std::int64_t layer, const Tensor<"seq", "embd">& h,
                                std::span<const std::int32_t> positions) {
  const std::int64_t n = h.size<"seq">(), n_past = cache.size(), n_kv = n_past + n;
  SharedInput in(ctx, h);
  auto q = split<"qd", "head", "hd">(in.linear(w.wq), c.head_dim);
  auto k = split<"kd", "kvh", "hd">(in.linear(w.wk), c.head_dim);
  auto v = split<"kd", "kvh", "hd">(in.linear(w.wv), c.head_dim);
  if (c.qk_norm) {
    q = mul(ctx, rms_norm<"hd">(ctx, q, c.rms_eps), w.q_norm);
    k = mul(ctx, rms_norm<"hd">(ctx, k, c.rms_eps), w.k_norm);
  }
  q = rope<"seq", "hd">(ctx, q, positions, c.rope_base, c.rope_mode);
  k = rope<"seq", "hd">(ctx, k, positions, c.rope_base, c.rope_mode);
  cache.store(ctx, layer, k, v);

  auto qg = split<"head", "kvh", "grp">(q, c.group());  // head = kvh * grp + g (GQA)
  const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  Tensor<"seq", "kvh", "grp", "hd"> o;
  if (cache.dtype() == DType::f16 && n < kTiledFromRows) {
    o = flash_attention_f16(ctx, qg, cache.keys_f16(layer, n_kv), cache.values_f16(layer, n_kv), n_past, scale);
  } else if (cache.dtype() == DType::f16) {
    o = prefill_attention(ctx, qg, cache.keys_f16(layer, n_kv), cache.values_f16(layer, n_kv), n_past, scale);
  } else {
    o = prefill_attention(ctx, qg, cache.keys(ctx, layer, n_kv), cache.values(ctx, layer, n_kv), n_past, scale);
  }
  return linear<"qd">(ctx, merge<"head", "hd", "qd">(merge<"kvh", "grp", "head">(o)), w.wo);
}

}  // namespace fucina::model
