#include "fucina/model/attention.hpp"

#include <algorithm>
#include <cmath>

#include "fucina/model/flash_attention.hpp"
#include "fucina/model/prefill_attention.hpp"

namespace fucina::model {

namespace {
// llama.cpp switches to its tiled f32 flash-attention path from this many query rows, for
// head sizes that fill whole 16-lane vectors.
constexpr std::int64_t kTiledFromRows = 64, kTiledHeadMultiple = 16;

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

// The chunk of Note [split decode] for n new rows over n_kv keys, 0 when ggml does not split.
std::int64_t split_decode_chunk(std::int64_t n, std::int64_t n_kv, std::int64_t capacity, std::int64_t threads) {
  constexpr std::int64_t kPad = 256, kSplitFrom = 512;
  const std::int64_t view = std::min(round_up(capacity, kPad), std::max(kPad, round_up(n_kv, kPad)));
  if (n != 1 || view < kSplitFrom) return 0;
  return (view + threads - 1) / threads;
}
}  // namespace

Tensor<"seq", "kvh", "grp", "hd"> causal_attention(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                   const Tensor<"seq", "kvh", "hd">& k,
                                                   const Tensor<"seq", "kvh", "hd">& v,
                                                   std::span<const std::int64_t> seq_starts, float scale) {
  FUCINA_CHECK(seq_starts.size() >= 2 && seq_starts.front() == 0 && seq_starts.back() == q.size<"seq">(), InvalidArgument,
               "[attention] sequence starts must run from 0 to the {} rows", q.size<"seq">());
  const auto qc = contiguous(ctx, q.detach());
  const auto kc = contiguous(ctx, k.detach()), vc = contiguous(ctx, v.detach());
  auto out = Tensor<"seq", "kvh", "grp", "hd">::empty(ctx, qc.sizes());
  const std::int64_t row = qc.size<"kvh">() * qc.size<"grp">() * qc.size<"hd">();
  for (std::size_t s = 0; s + 1 < seq_starts.size(); ++s) {
    const std::int64_t r0 = seq_starts[s], n = seq_starts[s + 1] - r0;
    FUCINA_CHECK(n > 0, InvalidArgument, "[attention] sequence {} is empty", s);
    const auto o = prefill_attention(ctx, narrow<"seq">(qc, r0, n), rename<"seq", "kseq">(narrow<"seq">(kc, r0, n)),
                                     rename<"seq", "kseq">(narrow<"seq">(vc, r0, n)), 0, scale);
    std::copy_n(o.data().data(), n * row, out.mutable_data().data() + r0 * row);
  }
  if (autograd::grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad()))
    out.set_node(autograd::make_node<CausalAttentionBackward>(
        {q.node(), k.node(), v.node()}, qc.raw(), kc.raw(), vc.raw(),
        std::vector<std::int64_t>(seq_starts.begin(), seq_starts.end()), scale));
  return out;
}

Tensor<"seq", "embd"> attention(Context& ctx, const ModelConfig& c, const LayerWeights& w, std::int64_t layer,
                                const Tensor<"seq", "embd">& h, const Batch& batch) {
  const std::span<const std::int32_t> positions = batch.positions;
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
  auto qg = split<"head", "kvh", "grp">(q, c.group());  // head = kvh * grp + g (GQA)
  const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  Tensor<"seq", "kvh", "grp", "hd"> o;
  if (!batch.cache) {
    o = causal_attention(ctx, qg, k, v, batch.seq_starts, scale);
    return linear<"qd">(ctx, merge<"head", "hd", "qd">(merge<"kvh", "grp", "head">(o)), w.wo);
  }

  KvCache& cache = *batch.cache;
  const std::int64_t n = h.size<"seq">(), n_past = cache.size(), n_kv = n_past + n;
  cache.store(ctx, layer, k, v);
  if (cache.dtype() == DType::f16 && (n < kTiledFromRows || c.head_dim % kTiledHeadMultiple != 0)) {
    o = flash_attention_f16(ctx, qg, cache.keys_f16(layer, n_kv), cache.values_f16(layer, n_kv), n_past, scale,
                            split_decode_chunk(n, n_kv, cache.capacity(), ctx.threads()));
  } else if (cache.dtype() == DType::f16) {
    o = prefill_attention(ctx, qg, cache.keys_f16(layer, n_kv), cache.values_f16(layer, n_kv), n_past, scale);
  } else {
    o = prefill_attention(ctx, qg, cache.keys(ctx, layer, n_kv), cache.values(ctx, layer, n_kv), n_past, scale);
  }
  return linear<"qd">(ctx, merge<"head", "hd", "qd">(merge<"kvh", "grp", "head">(o)), w.wo);
}

}  // namespace fucina::model
