#pragma once
// Causal attention for a prompt batch over an f16 or f32 KV cache, fused: no n x n_kv
// score tensor, no f32 copy of the cache, masked keys never computed.
//
// Note [prefill attention]: the arithmetic of ggml's tiled flash-attention path, which
// llama.cpp runs for batches of >= 64 rows when the head size is a multiple of 16 (Note
// [ggml summation order] in f16_matmul.hpp: one ulp here flips later f16 roundings). Per
// query row and per tile of 64 keys: scores q·k in f32 (q not rounded, k widened), each a
// fused multiply-add chain over the head dims from 0, times scale; the tile's max M' and,
// when it raises the running max M, the output and sum rescaled by expf(M - M') (libm);
// weights w = ggml_vexpf(s - M) (0 for unseen keys); the sum S += the 16-key folds of w in
// double; the output o += Σ w·v as one fused multiply-add chain per element, keys in order.
// At the end o / S. Work is split per (kv head, query tile); a task holds one key tile's
// scores transposed, [key][query row] with the tile's grp·rows in SIMD lanes, and K/V rows
// as stored (f16 rows widened per 64-key tile). Query i sees keys 0..n_past + i.
#include "fucina/fucina.hpp"

namespace fucina::model {

// q <seq, kvh, grp, hd> for the n new tokens (head = kvh·grp + g); keys/values
// <kseq, kvh, hd> hold at least n_past + n rows: the cached positions, then the new ones.
Tensor<"seq", "kvh", "grp", "hd"> prefill_attention(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                    const TensorT<DType::f16, "kseq", "kvh", "hd">& keys,
                                                    const TensorT<DType::f16, "kseq", "kvh", "hd">& values,
                                                    std::int64_t n_past, float scale);
Tensor<"seq", "kvh", "grp", "hd"> prefill_attention(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                    const Tensor<"kseq", "kvh", "hd">& keys,
                                                    const Tensor<"kseq", "kvh", "hd">& values, std::int64_t n_past,
                                                    float scale);

namespace detail {
// The scalar twin of prefill_attention (every SIMD arm off); keys/values f16 or f32.
Tensor<"seq", "kvh", "grp", "hd"> prefill_attention_scalar(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                           const RawTensor& keys, const RawTensor& values,
                                                           std::int64_t n_past, float scale);
}  // namespace detail

}  // namespace fucina::model
