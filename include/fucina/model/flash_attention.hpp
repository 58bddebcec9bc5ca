#pragma once
// Attention over an f16 KV cache with llama.cpp's CPU flash-attention numerics.
//
// Note [f16 flash attention] (ggml's one-chunk path, used when a batch has < 64 query
// rows): q is rounded to f16; s = q·k with f16 products summed exactly, times scale;
// an online softmax keeps the running output in f16: on a new max M it is rescaled by
// exp(M_old - M), then acc = f16(acc + v·exp(s - M)) per key; the end result is
// f32(acc) / S. Rounding acc to f16 at every key moves logits by ~2e-3 on the tiny
// models, so parity at 1e-3 needs it. Masked (future) keys are skipped.
//
// Note [Decode at depth]: one task is a pair of query rows of one KV head (of one token row,
// or of up to four: Note [Rows share their keys]); it walks its keys 16 at a time, each run of 16 scored, softmaxed and added into the running output before
// the next (keys and values stream together, the output stays in L1; a run never crosses a
// block of a paged cache). The cache is read in place through a KvView, so a paged cache's
// blocks need no gathering, and one pool pass serves every sequence of a batch. A run's
// softmax factors take one vectorized expf with libm's bits (Note [glibc expf]). Each run
// asks for the next run's K and V rows (software prefetch: a run of 16 head-major rows is
// one 4 KiB page, which the hardware prefetcher does not cross), and each task for the first
// run of the task its thread likely claims next; at 8 streams and 128-192 positions that
// took the attention pass from 8.1-8.8 to 7.0-7.3 ms per step (position-major rows, 2 KiB
// apart, had shown no gain from prefetch). Measured and not kept (docs/BENCHMARK.md): a
// position-major walk (a split chunk's task taking every KV head per run, so a
// thread reads whole cache rows front to back: 5% slower). What is left is the arithmetic,
// per key and KV head 16 f16 widenings, 32 FMAs and 16 f16 round trips of the running
// output (Note [f16 flash attention]), plus the wait for key rows that come from DRAM. The
// caches are head-major (Note [Head-major KV]), so a task's keys are one contiguous run
// (a paged sequence's: one per run of consecutive blocks) that the prefetcher follows.
//
// Note [Rows share their keys]: the rows of one sequence at consecutive positions -- a
// verification's k+1 rows (one entry each under one-row arithmetic, Note [One-row
// arithmetic]) or a short chunk's -- see the same keys but the last few. A task takes up to
// kRowsPerTask = 4 of them (of one KV head: 8 query rows for two heads), walks the keys the
// first row sees with all of them, then the later rows' own last keys with the rows that see
// each. Each key run's K rows are widened once for all its query rows, each V row once per
// 16 of their running outputs, and those 16 f16 chains (an FMA and an f16 round trip per key,
// each waiting on the one before) are interleaved, which hides their latency. Every query
// row still meets its keys in order with its own online softmax, chunk ends (Note [split
// decode]) and f16 roundings: its bits are those of a task of its own. Entries that store
// their row in the pass (Note [Store in the attention pass]) are tasks of their own. On the
// default model (hd 64, 2 KV heads) 16 verification rows at depth 250, attention pass alone:
// 111-121 -> 97-100 us per layer on one thread (2 rows per task: 101-107); the whole
// 16-row forward in-process, alternated: 0.955-1.000 of the one-row-per-task time (mean 0.972).
#include <span>

#include "fucina/fucina.hpp"
#include "fucina/model/kv_cache.hpp"

namespace fucina::model {

// q <seq, kvh, grp, hd> for the n new tokens; keys/values <kseq, kvh, hd> hold the
// n_past cached positions followed by the new ones. Query i sees keys 0..n_past + i.
// kv_chunk > 0 with one new token: the keys are taken kv_chunk at a time and merged (Note
// [split decode] in attention.hpp).
Tensor<"seq", "kvh", "grp", "hd"> flash_attention_f16(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& keys,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& values,
                                                      std::int64_t n_past, float scale, std::int64_t kv_chunk = 0);

// Many sequences in one pass over the pool: rows [r0, r0 + n) of q are the new tokens of a
// sequence whose f16 cache `kv` holds n_past positions before them (and theirs, stored).
// Note [Store in the attention pass]: with new_k / new_v set, the one new token's keys and
// values (n == 1, [kvh, hd] f32 each) are not stored yet: the task of each KV head writes
// that head's row at n_past (f16, nearest even, as KvCache::write_rows) before reading it.
// Every task reads only its own head, so nothing waits; a decode step's serial per-sequence
// stores (~0.65 ms of an 8-stream Qwen3-0.6B step, most of it call overhead) go with it.
// It needs one task per KV head: at most kHeadsPerTask query heads per KV head.
inline constexpr int kHeadsPerTask = 2;  // query heads of one KV head a task takes together
struct AttentionRows {
  std::int64_t r0 = 0, n = 0, n_past = 0, kv_chunk = 0;
  KvView kv{};
  const float* new_k = nullptr;
  const float* new_v = nullptr;
};
Tensor<"seq", "kvh", "grp", "hd"> flash_attention_f16(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                      std::span<const AttentionRows> seqs, float scale);

// The same over q8_0 caches (Note [q8_0 KV cache]), ggml's one-row path for quantized K/V
// (any number of rows, never split): each query row is encoded to Q8_0 (unrounded), scored
// by the Q8_0 x Q8_0 dot, and the online softmax keeps an f32 output: acc = acc · ms on a
// new max, then acc = fma(v, vs, acc) over the dequantized value row; the result acc / S.
Tensor<"seq", "kvh", "grp", "hd"> flash_attention_q8_0(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                       std::span<const AttentionRows> seqs, float scale);

}  // namespace fucina::model
