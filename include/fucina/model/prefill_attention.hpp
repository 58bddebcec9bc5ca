#pragma once
// Causal attention for a prompt batch over an f16 or f32 KV cache, fused: no n x n_kv
// score tensor, no f32 copy of the cache, masked keys never computed.
//
// Note [prefill attention]: the math is the reference chain in f32 (einsum q·k, times
// scale, + causal mask, softmax with max subtraction, einsum with v): s = (q·k)·scale,
// m = max s, e = exp(s - m), S = Σe in key order, p = e·(1/S), o = Σ p·v. Only the
// summation order of the dot products and the exp (fast_exp, <= 2 ulp vs libm's 1)
// differ. Work is split per (kv head, query tile); a task holds its scores transposed,
// [key][query row] with the tile's grp·rows in SIMD lanes, so the two-pass softmax runs
// down the keys with no horizontal reductions and K/V rows are used as stored (f16 rows
// are widened per 64-key tile). Query i sees keys 0..n_past + i.
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
// y[i] = fast_exp(x[i]) through the kernel's SIMD arm; bit-identical to the scalar fast_exp.
void fast_exp_rows(const float* x, float* y, std::int64_t n);
}  // namespace detail

}  // namespace fucina::model
