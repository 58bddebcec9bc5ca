#include "fucina/model/attention.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "fucina/model/f16_matmul.hpp"
#include "fucina/model/flash_attention.hpp"
#include "fucina/model/one_row.hpp"
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

// Runs attend(rows r0, n, sequence index s) -> <seq, kvh, grp, hd> for every sequence of
// seq_starts and writes each result into its rows of one output.
template <class Attend>
Tensor<"seq", "kvh", "grp", "hd"> per_sequence(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                               std::span<const std::int64_t> seq_starts, Attend attend) {
  FUCINA_CHECK(seq_starts.size() >= 2 && seq_starts.front() == 0 && seq_starts.back() == q.size<"seq">(), InvalidArgument,
               "[attention] sequence starts must run from 0 to the {} rows", q.size<"seq">());
  auto out = Tensor<"seq", "kvh", "grp", "hd">::empty(ctx, q.sizes());
  const std::int64_t row = q.size<"kvh">() * q.size<"grp">() * q.size<"hd">();
  for (std::size_t s = 0; s + 1 < seq_starts.size(); ++s) {
    const std::int64_t r0 = seq_starts[s], n = seq_starts[s + 1] - r0;
    FUCINA_CHECK(n > 0, InvalidArgument, "[attention] sequence {} is empty", s);
    const auto o = attend(r0, n, s);
    std::copy_n(o.data().data(), n * row, out.mutable_data().data() + r0 * row);
  }
  return out;
}

// Whether n new rows over a cache of this type take ggml's one-row path (reading the cache
// in place: always for q8_0) rather than the tiled one.
bool one_row_path(const ModelConfig& c, KvType cache, std::int64_t n) {
  return cache == KvType::q8_0 ||
         (cache == KvType::f16 && (n < kTiledFromRows || c.head_dim % kTiledHeadMultiple != 0));
}

Tensor<"seq", "kvh", "grp", "hd"> one_row_attention(Context& ctx, KvType cache, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                    std::span<const AttentionRows> rows, float scale) {
  return cache == KvType::q8_0 ? flash_attention_q8_0(ctx, q, rows, scale) : flash_attention_f16(ctx, q, rows, scale);
}

// The n = q.size<"seq">() new rows over keys/values (the cache's stored type, contiguous)
// holding n_past cached rows and then theirs, on the tiled path (see the header).
Tensor<"seq", "kvh", "grp", "hd"> tiled_attention(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                  RawTensor keys, RawTensor values, std::int64_t n_past, float scale) {
  using F16 = TensorT<DType::f16, "kseq", "kvh", "hd">;
  if (keys.dtype == DType::f32)
    return prefill_attention(ctx, q, KvCache::Cached(std::move(keys)), KvCache::Cached(std::move(values)), n_past, scale);
  return prefill_attention(ctx, q, F16(std::move(keys)), F16(std::move(values)), n_past, scale);
}

}  // namespace

Tensor<"seq", "embd"> output_rows(Context& ctx, const Tensor<"seq", "embd">& x, const Batch& batch) {
  if (batch.out_rows.empty()) return contiguous(ctx, narrow<"seq">(x, x.size<"seq">() - 1, 1));
  const auto n = static_cast<std::int64_t>(batch.out_rows.size()), embd = x.size<"embd">();
  const auto xc = contiguous(ctx, x);
  auto out = Tensor<"seq", "embd">::empty(ctx, {n, embd});
  for (std::int64_t i = 0; i < n; ++i)
    std::copy_n(xc.data().data() + batch.out_rows[static_cast<std::size_t>(i)] * embd, embd,
                out.mutable_data().data() + i * embd);
  return out;
}

Tensor<"seq", "kvh", "grp", "hd"> causal_attention(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                   const Tensor<"seq", "kvh", "hd">& k,
                                                   const Tensor<"seq", "kvh", "hd">& v,
                                                   std::span<const std::int64_t> seq_starts, float scale) {
  const auto qc = contiguous(ctx, q.detach());
  const auto kc = contiguous(ctx, k.detach()), vc = contiguous(ctx, v.detach());
  auto out = per_sequence(ctx, qc, seq_starts, [&](std::int64_t r0, std::int64_t n, std::size_t) {
    return prefill_attention(ctx, narrow<"seq">(qc, r0, n), rename<"seq", "kseq">(narrow<"seq">(kc, r0, n)),
                             rename<"seq", "kseq">(narrow<"seq">(vc, r0, n)), 0, scale);
  });
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
    q = rms_norm_mul<"hd">(ctx, q, w.q_norm, c.rms_eps);
    k = rms_norm_mul<"hd">(ctx, k, w.k_norm, c.rms_eps);
  }
  q = rope<"seq", "hd">(ctx, q, positions, c.rope_base, c.rope_mode);
  k = rope<"seq", "hd">(ctx, k, positions, c.rope_base, c.rope_mode);
  auto qg = split<"head", "kvh", "grp">(q, c.group());  // head = kvh * grp + g (GQA)
  const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  Tensor<"seq", "kvh", "grp", "hd"> o;
  if (batch.paged) {  // each sequence's rows over its own keys, as its solo run
    PagedKvCache& cache = *batch.paged;
    const auto qc = contiguous(ctx, qg);
    const std::size_t n_seqs = batch.seq_starts.size() - 1;
    // A decode step (every sequence one new row) on an f16 cache stores in the attention pass
    // (Note [Store in the attention pass]).
    const bool store_in_pass = cache.type() == KvType::f16 && one_row_path(c, KvType::f16, 1) &&
                               c.group() <= kHeadsPerTask &&
                               std::adjacent_find(batch.seq_starts.begin(), batch.seq_starts.end(),
                                                  [](auto a, auto b) { return b - a != 1; }) == batch.seq_starts.end();
    const auto kc = store_in_pass ? contiguous(ctx, k) : k;
    const auto vc = store_in_pass ? contiguous(ctx, v) : v;
    const std::int64_t kv_row = c.n_head_kv * c.head_dim;
    std::vector<AttentionRows> one_row;  // all of them in one pool pass, the cache read in place
    std::vector<std::size_t> tiled;
    for (std::size_t s = 0; s < n_seqs; ++s) {
      const SeqId seq = batch.seq_ids[s];
      const std::int64_t r0 = batch.seq_starts[s], n = batch.seq_starts[s + 1] - r0, n_past = cache.size(seq);
      if (store_in_pass) {
        one_row.push_back({.r0 = r0, .n = 1, .n_past = n_past,
                           .kv_chunk = split_decode_chunk(1, n_past + 1, cache.capacity(), ctx.threads()),
                           .kv = cache.view(layer, seq), .new_k = kc.data().data() + r0 * kv_row,
                           .new_v = vc.data().data() + r0 * kv_row});
        continue;
      }
      cache.store(ctx, layer, seq, narrow<"seq">(k, r0, n), narrow<"seq">(v, r0, n));
      const bool row_by_row = r0 < one_row_rows();  // Note [One-row arithmetic]: the leading chunks
      if (n > 1 && row_by_row && one_row_path(c, cache.type(), 1)) {
        for (std::int64_t r = 0; r < n; ++r)
          one_row.push_back({.r0 = r0 + r, .n = 1, .n_past = n_past + r,
                             .kv_chunk = split_decode_chunk(1, n_past + r + 1, cache.capacity(), ctx.threads()),
                             .kv = cache.view(layer, seq)});
      } else if (one_row_path(c, cache.type(), n))
        one_row.push_back({.r0 = r0, .n = n, .n_past = n_past,
                           .kv_chunk = split_decode_chunk(n, n_past + n, cache.capacity(), ctx.threads()),
                           .kv = cache.view(layer, seq)});
      else
        tiled.push_back(s);
    }
    o = one_row.empty() ? Tensor<"seq", "kvh", "grp", "hd">::empty(ctx, qc.sizes())
                        : one_row_attention(ctx, cache.type(), qc, one_row, scale);
    const std::int64_t row = qc.size<"kvh">() * qc.size<"grp">() * qc.size<"hd">();
    for (const std::size_t s : tiled) {  // long prompt chunks: gathered once, tiled kernel
      const SeqId seq = batch.seq_ids[s];
      const std::int64_t r0 = batch.seq_starts[s], n = batch.seq_starts[s + 1] - r0, n_kv = cache.size(seq) + n;
      // Under one-row arithmetic (an f32 cache), each row alone over the keys up to it.
      const std::int64_t step = r0 < one_row_rows() ? 1 : n;
      for (std::int64_t r = 0; r < n; r += step) {
        const std::int64_t m = std::min(step, n - r), keys = n_kv - n + r + m;
        const auto os = tiled_attention(ctx, narrow<"seq">(qc, r0 + r, m), cache.keys(ctx, layer, seq, keys),
                                        cache.values(ctx, layer, seq, keys), keys - m, scale);
        std::copy_n(os.data().data(), m * row, o.mutable_data().data() + (r0 + r) * row);
      }
    }
  } else if (batch.cache) {
    KvCache& cache = *batch.cache;
    const std::int64_t n = h.size<"seq">(), n_past = cache.size(), n_kv = n_past + n;
    cache.store(ctx, layer, k, v);
    if (n > 1 && one_row_rows() > 0) {  // each row alone over the keys up to it (Note [One-row arithmetic])
      const auto qc = contiguous(ctx, qg);
      if (one_row_path(c, cache.type(), 1)) {
        std::vector<AttentionRows> rows;
        for (std::int64_t r = 0; r < n; ++r)
          rows.push_back({.r0 = r, .n = 1, .n_past = n_past + r,
                          .kv_chunk = split_decode_chunk(1, n_past + r + 1, cache.capacity(), ctx.threads()),
                          .kv = cache.view(layer)});
        o = one_row_attention(ctx, cache.type(), qc, rows, scale);
      } else {
        std::vector<std::int64_t> starts(static_cast<std::size_t>(n + 1));
        std::iota(starts.begin(), starts.end(), 0);
        o = per_sequence(ctx, qc, starts, [&](std::int64_t r, std::int64_t, std::size_t) {
          return tiled_attention(ctx, narrow<"seq">(qc, r, 1), cache.stored_keys(layer, n_past + r + 1),
                                 cache.stored_values(layer, n_past + r + 1), n_past + r, scale);
        });
      }
    } else if (one_row_path(c, cache.type(), n)) {
      const AttentionRows rows{.r0 = 0, .n = n, .n_past = n_past,
                               .kv_chunk = split_decode_chunk(n, n_kv, cache.capacity(), ctx.threads()),
                               .kv = cache.view(layer)};
      o = one_row_attention(ctx, cache.type(), qg, std::span(&rows, 1), scale);
    } else {
      o = tiled_attention(ctx, qg, cache.stored_keys(layer, n_kv), cache.stored_values(layer, n_kv), n_past, scale);
    }
  } else {
    o = causal_attention(ctx, qg, k, v, batch.seq_starts, scale);
  }
  return linear<"qd">(ctx, merge<"head", "hd", "qd">(merge<"kvh", "grp", "head">(o)), w.wo);
}

}  // namespace fucina::model
