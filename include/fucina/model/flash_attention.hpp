#pragma once
// Attention over an f16 KV cache with llama.cpp's CPU flash-attention numerics.
//
// Note [f16 flash attention] (ggml's one-chunk path, used when a batch has < 64 query
// rows): q is rounded to f16; s = q·k with f16 products summed exactly, times scale;
// an online softmax keeps the running output in f16: on a new max M it is rescaled by
// exp(M_old - M), then acc = f16(acc + v·exp(s - M)) per key; the end result is
// f32(acc) / S. Rounding acc to f16 at every key moves logits by ~2e-3 on the tiny
// models, so parity at 1e-3 needs it. Masked (future) keys are skipped.
#include "fucina/fucina.hpp"

namespace fucina::model {

// q <seq, kvh, grp, hd> for the n new tokens; keys/values <kseq, kvh, hd> hold the
// n_past cached positions followed by the new ones. Query i sees keys 0..n_past + i.
// kv_chunk > 0 with one new token: the keys are taken kv_chunk at a time and merged (Note
// [split decode] in attention.hpp).
Tensor<"seq", "kvh", "grp", "hd"> flash_attention_f16(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& keys,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& values,
                                                      std::int64_t n_past, float scale, std::int64_t kv_chunk = 0);

}  // namespace fucina::model
