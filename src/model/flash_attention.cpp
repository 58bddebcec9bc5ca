#include "fucina/model/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fucina/core/raw/elementwise.hpp"
#include "fucina/kernels/arch.hpp"
#include "fucina/kernels/expf.hpp"
#include "fucina/model/f16_matmul.hpp"
#include "fucina/quant/blocks_legacy.hpp"
#include "fucina/quant/vec_dot.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::model {

namespace {

inline float h2f(Half h) { return half_to_float(h.bits); }
inline float round_half(float f) { return half_to_float(float_to_half(f)); }
// Cache row r of KV head h in t ([rows, kvh, units] through its strides: Note [Head-major KV]).
inline Half* head_row(const RawTensor& t, std::int64_t r, std::int64_t h) {
  return t.data<Half>() + r * t.strides[0] + h * t.strides[1];
}

constexpr int kPair = kHeadsPerTask;  // query heads per task (they share a KV head)
static_assert(kPair == 2);
// Consecutive rows of one sequence per task (Note [Rows share their keys]).
constexpr int kRowsPerTask = 4;
constexpr int kMaxQueries = kPair * kRowsPerTask;  // query rows per task
static_assert(kMaxQueries <= kMaxVecRowQueries);
constexpr std::int64_t kRun = 16;  // keys scored, softmaxed and accumulated together

// The online softmax of one query row over its keys so far: the running max and sum.
struct SoftmaxState {
  float max = -std::numeric_limits<float>::infinity(), sum = 0.f;
};

// The online softmax's per-key factors of n <= kRun more keys of g_count <= kMaxQueries query rows,
// computed before any value is touched: the running max only depends on the scores. Key j
// (score dots[g][j] · scale) rescales row g's running output by ms[g][j] (1 unless it is a
// new max) and adds value j weighted by vs[g][j]. One of the two is an expf, of -|s - max|
// (ggml's order of operands); all of a run's go through the vectorized libm expf at once
// (Note [glibc expf]). Each row's running sum is a chain of dependent FMAs, one per key: the
// rows' chains are interleaved so that one's latency hides behind the other's.
void softmax_steps(int g_count, const float (*dots)[kRun], float scale, std::int64_t n, float (*ms)[kRun],
                   float (*vs)[kRun], SoftmaxState* st) {
  float arg[kMaxQueries * kRun], e[kMaxQueries * kRun];
  bool new_max[kMaxQueries][kRun];
  for (int g = 0; g < g_count; ++g)
    for (std::int64_t j = 0; j < n; ++j) {
      const float s = dots[g][j] * scale;
      new_max[g][j] = s > st[g].max;
      arg[g * n + j] = new_max[g][j] ? st[g].max - s : s - st[g].max;
      if (new_max[g][j]) st[g].max = s;
    }
  kernels::expf_glibc(arg, e, g_count * n);
  float sum[kMaxQueries];
  for (int g = 0; g < g_count; ++g) sum[g] = st[g].sum;
  for (std::int64_t j = 0; j < n; ++j)
#pragma GCC unroll 8
    for (int g = 0; g < kMaxQueries; ++g) {
      if (g == g_count) break;
      ms[g][j] = new_max[g][j] ? e[g * n + j] : 1.f;
      vs[g][j] = new_max[g][j] ? 1.f : e[g * n + j];
      sum[g] = std::fma(sum[g], ms[g][j], vs[g][j]);
    }
  for (int g = 0; g < g_count; ++g) st[g].sum = sum[g];
}
float inverse(float sum) { return sum == 0.f ? 0.f : 1.f / sum; }


// The running outputs acc[g] (f32 values, each exactly an f16) of g_count rows over n more
// value rows (ggml_vec_scale_f16 / ggml_vec_mad_f16 per key: acc = f16(acc · ms), then
// acc = f16(fma(v, vs, acc))). The scalar twin of accumulate_in_registers.
void accumulate_scalar(int g_count, const float (*ms)[kRun], const float (*vs)[kRun], std::int64_t n, const Half* v0,
                       std::int64_t v_stride, std::int64_t hd, float* const* acc) {
  for (int g = 0; g < g_count; ++g)
    for (std::int64_t j = 0; j < n; ++j) {
      const Half* v = v0 + j * v_stride;
      if (ms[g][j] != 1.f)
        for (std::int64_t d = 0; d < hd; ++d) acc[g][d] = round_half(acc[g][d] * ms[g][j]);
      for (std::int64_t d = 0; d < hd; ++d) acc[g][d] = round_half(std::fma(h2f(v[d]), vs[g][j], acc[g][d]));
    }
}

#if FUCINA_ARCH_AVX512
inline __m512 round_f16(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// accumulate_scalar for G rows of hd = 16 V, the outputs held in registers over the run and
// rounded to f16 after every step as the scalar twin does through memory. Each step is an
// FMA and an f16 round trip that wait on the one before: the G x C chains of a pass are
// independent, and interleaving them hides that latency (G = 4 rows of hd 64 take 0.6x
// the time per row and key of G = 2). At most 16 chains are held (C columns of 16 at a
// time, G·C <= 16: the value row's C vectors and the temporaries take the other registers);
// each value row is widened once per pass for all G. Skipping a rescale by exactly 1 leaves
// an f16 value unchanged.
template <int V, int G>
void accumulate_in_registers(const float (*ms)[kRun], const float (*vs)[kRun], std::int64_t n, const Half* v0,
                             std::int64_t v_stride, float* const* out) {
  constexpr int C = std::min(V, 16 / G >= 8 ? 8 : 16 / G >= 4 ? 4 : 16 / G >= 2 ? 2 : 1);
  for (int c0 = 0; c0 < V; c0 += C) {
    __m512 acc[G][C];
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < C; ++c) acc[g][c] = _mm512_loadu_ps(out[g] + 16 * (c0 + c));
    for (std::int64_t j = 0; j < n; ++j) {
      const Half* v = v0 + j * v_stride + 16 * c0;
      __m512 vv[C];
      for (int c = 0; c < C; ++c) vv[c] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 16 * c)));
      for (int g = 0; g < G; ++g) {
        if (ms[g][j] != 1.f) {
          const __m512 vms = _mm512_set1_ps(ms[g][j]);
          for (int c = 0; c < C; ++c) acc[g][c] = round_f16(_mm512_mul_ps(acc[g][c], vms));
        }
        const __m512 vvs = _mm512_set1_ps(vs[g][j]);
        for (int c = 0; c < C; ++c) acc[g][c] = round_f16(_mm512_fmadd_ps(vv[c], vvs, acc[g][c]));
      }
    }
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < C; ++c) _mm512_storeu_ps(out[g] + 16 * (c0 + c), acc[g][c]);
  }
}

template <int V, int... Gs>
void accumulate_rows(int g_count, const float (*ms)[kRun], const float (*vs)[kRun], std::int64_t n, const Half* v0,
                     std::int64_t v_stride, float* const* out, std::integer_sequence<int, Gs...>) {
  (void)((g_count == Gs + 1 ? (accumulate_in_registers<V, Gs + 1>(ms, vs, n, v0, v_stride, out), true) : false) || ...);
}
#endif

void accumulate(int g_count, const float (*ms)[kRun], const float (*vs)[kRun], std::int64_t n, const Half* v0,
                std::int64_t v_stride, std::int64_t hd, float* const* acc) {
#if FUCINA_ARCH_AVX512
  constexpr auto all = std::make_integer_sequence<int, kMaxQueries>{};
  switch (hd) {
    case 128: return accumulate_rows<8>(g_count, ms, vs, n, v0, v_stride, acc, all);
    case 64: return accumulate_rows<4>(g_count, ms, vs, n, v0, v_stride, acc, all);
    case 32: return accumulate_rows<2>(g_count, ms, vs, n, v0, v_stride, acc, all);
    case 16: return accumulate_rows<1>(g_count, ms, vs, n, v0, v_stride, acc, all);
    default: break;
  }
#endif
  accumulate_scalar(g_count, ms, vs, n, v0, v_stride, hd, acc);
}

// Asks for the K and V rows of positions [p, e) of KV head h into the cache level `Level`
// (__builtin_prefetch's locality: 3 = L1, 2 = L2).
template <int Level>
void prefetch_rows(const KvView& kv, std::int64_t h, std::int64_t p, std::int64_t e, std::int64_t hd) {
  const auto bytes = static_cast<std::int64_t>(hd * sizeof(Half));
  for (; p < e; ++p) {
    const auto* k = reinterpret_cast<const char*>(head_row(kv.keys, kv.row(p), h));
    const auto* v = reinterpret_cast<const char*>(head_row(kv.values, kv.row(p), h));
    for (std::int64_t b = 0; b < bytes; b += 64) {
      __builtin_prefetch(k + b, 0, Level);
      __builtin_prefetch(v + b, 0, Level);
    }
  }
}

// One task (Note [Rows share their keys]): rows consecutive rows of one sequence, row t
// seeing keys [0, n_seen0 + t) of KV head h with query heads qs[t·heads, (t + 1)·heads),
// written to out likewise. Row t's keys are split in chunks of chunk[t] merged in f32 (Note
// [split decode]) when chunk[t] < its key count. Every query row sees exactly the
// operations, in the key order, of a task of its own: the rows only share the runs.
void attend_rows(const KvView& kv, std::int64_t h, const float* const* qs, int heads, int rows, std::int64_t hd,
                 std::int64_t n_seen0, const std::int64_t* chunk, float scale, float* const* out) {
  const RawTensor& kr = kv.keys;
  const RawTensor& vr = kv.values;
  const Half* k0 = head_row(kr, 0, h);
  const Half* v0 = head_row(vr, 0, h);
  const int n_q = heads * rows;
  thread_local std::vector<float> scratch;
  scratch.assign(static_cast<std::size_t>(2 * kMaxQueries * hd), 0.f);
  float* acc[kMaxQueries];
  float* total[kMaxQueries];
  for (int q = 0; q < n_q; ++q) acc[q] = scratch.data() + q * hd, total[q] = acc[q] + kMaxQueries * hd;
  SoftmaxState st[kMaxQueries], tot[kMaxQueries];
  std::int64_t chunk_end[kRowsPerTask];  // where row t's current chunk ends
  for (int t = 0; t < rows; ++t) chunk_end[t] = std::min(chunk[t], n_seen0 + t);
  const std::int64_t n_end = n_seen0 + rows - 1;
  prefetch_rows<3>(kv, h, 0, std::min(n_end, kRun), hd);
  for (std::int64_t p = 0; p < n_end;) {
    // Rows t0.. still see key p; a run stops at the first of their chunk ends.
    const int t0 = static_cast<int>(std::max<std::int64_t>(0, p - n_seen0 + 1));
    std::int64_t e = std::min(p + kRun, kv.run_end(p, n_end));
    for (int t = t0; t < rows; ++t) e = std::min(e, chunk_end[t]);
    prefetch_rows<3>(kv, h, e, std::min(n_end, e + kRun), hd);
    const int q0 = t0 * heads;
    float dots[kMaxQueries][kRun], ms[kMaxQueries][kRun], vs[kMaxQueries][kRun];
    float* dp[kMaxQueries];
    for (int q = q0; q < n_q; ++q) dp[q] = dots[q];
    // ggml_vec_dot_f16 on the f16 query: its 64-blocks in f32 lanes, the rest in double.
    dot_f16_vec_rows(k0 + kv.row(p) * kr.strides[0], kr.strides[0], qs + q0, n_q - q0, hd, e - p, dp + q0);
    softmax_steps(n_q - q0, dots + q0, scale, e - p, ms + q0, vs + q0, st + q0);
    accumulate(n_q - q0, ms + q0, vs + q0, e - p, v0 + kv.row(p) * vr.strides[0], vr.strides[0], hd, acc + q0);
    p = e;
    for (int t = t0; t < rows; ++t) {
      if (p != chunk_end[t]) continue;
      const std::int64_t n_seen = n_seen0 + t;
      const bool split = chunk[t] < n_seen;
      for (int q = t * heads; q < (t + 1) * heads; ++q) {
        if (!split) {
          const float inv = inverse(st[q].sum);
          for (std::int64_t d = 0; d < hd; ++d) out[q][d] = acc[q][d] * inv;
          continue;
        }
        // The chunk's (max, sum, f16 chain) merged in chunk order (ggml_flash_attn_ext_reduce_partials).
        if (st[q].sum != 0.f) {
          const float m_new = std::max(tot[q].max, st[q].max);
          const float s_old = std::exp(tot[q].max - m_new), s_new = std::exp(st[q].max - m_new);
          for (std::int64_t d = 0; d < hd; ++d) total[q][d] = std::fma(total[q][d], s_old, acc[q][d] * s_new);
          tot[q].sum = std::fma(tot[q].sum, s_old, st[q].sum * s_new);
          tot[q].max = m_new;
        }
        if (p == n_seen) {
          const float inv = inverse(tot[q].sum);
          for (std::int64_t d = 0; d < hd; ++d) out[q][d] = total[q][d] * inv;
        } else {
          st[q] = SoftmaxState{};
          std::fill_n(acc[q], hd, 0.f);
        }
      }
      chunk_end[t] = std::min(p + chunk[t], n_seen);
    }
  }
}

// Checks every sequence's rows and cache against q ([seq, kvh, grp, hd]) and a cache of
// `type` storing `units` per head row.
void check_rows(const Tensor<"seq", "kvh", "grp", "hd">& q, std::span<const AttentionRows> seqs, KvType type,
                std::int64_t units) {
  const std::int64_t kvh = q.size<"kvh">(), hd = q.size<"hd">();
  for (const AttentionRows& s : seqs) {
    const RawTensor& kr = s.kv.keys;
    const RawTensor& vr = s.kv.values;
    FUCINA_CHECK(s.kv.type == type && kr.rank == 3 && vr.rank == 3 && kr.shape[1] == kvh && kr.shape[2] == units &&
                     vr.shape[1] == kvh && vr.shape[2] == units,
                 ShapeMismatch, "[flash_attention] q has {} kv heads of {} dims, the {} cache does not match", kvh, hd,
                 kv_type_name(s.kv.type));
    FUCINA_CHECK(s.r0 >= 0 && s.n > 0 && s.r0 + s.n <= q.size<"seq">() && s.n_past >= 0, InvalidArgument,
                 "[flash_attention] rows [{}, {}) of {}", s.r0, s.r0 + s.n, q.size<"seq">());
    FUCINA_CHECK(s.kv.blocks.empty() ? s.n_past + s.n <= kr.shape[0]
                                     : s.n_past + s.n <= static_cast<std::int64_t>(s.kv.blocks.size()) * s.kv.block_size,
                 InvalidArgument, "[flash_attention] {} past + {} new positions are not in the cache", s.n_past, s.n);
    FUCINA_ASSERT(kr.strides[2] == 1 && vr.strides[2] == 1);
  }
}

// A query row of the pass: entry s's row i, which sees keys [0, n_seen()).
struct Row {
  const AttentionRows* s;
  std::int64_t i;
  std::int64_t n_seen() const { return s->n_past + i + 1; }
};

// The pass's tasks: the rows of seqs in order, cut into groups of at most max_rows in which
// joins(previous, next) holds for every neighbour pair, each group once per KV head h and
// per `heads` query heads from g0. Runs task(group, h, g0, g_count) for each over the pool;
// before each task, ahead(group, h) is told of the task pool.size() places on: the one this
// thread is likely to claim next.
template <class Joins, class Task, class Ahead>
void for_each_task(Context& ctx, std::span<const AttentionRows> seqs, std::int64_t kvh, std::int64_t grp,
                   std::int64_t heads, std::size_t max_rows, Joins joins, Task task, Ahead ahead) {
  std::vector<Row> rows;
  std::vector<std::size_t> first{0};  // group j: rows [first[j], first[j + 1])
  for (const AttentionRows& s : seqs)
    for (std::int64_t i = 0; i < s.n; ++i) {
      const Row r{&s, i};
      if (!rows.empty() && (rows.size() - first.back() == max_rows || !joins(rows.back(), r))) first.push_back(rows.size());
      rows.push_back(r);
    }
  if (rows.empty()) return;
  first.push_back(rows.size());
  const std::int64_t head_groups = (grp + heads - 1) / heads, per_group = kvh * head_groups;
  const auto n_tasks = static_cast<std::int64_t>(first.size() - 1) * per_group;
  const auto group = [&](std::int64_t t) {
    const auto j = static_cast<std::size_t>(t / per_group);
    return std::span<const Row>(rows.data() + first[j], first[j + 1] - first[j]);
  };
  const std::int64_t next = ctx.pool().size();
  ctx.pool().parallel_for(n_tasks, [&](std::int64_t t) {
    if (t + next < n_tasks) ahead(group(t + next), ((t + next) / head_groups) % kvh);
    const std::int64_t g0 = (t % head_groups) * heads;
    task(group(t), (t / head_groups) % kvh, g0, static_cast<int>(std::min(heads, grp - g0)));
  });
}

// Whether a row of b can follow one of a in a task: both read one cache the same way and
// store nothing (Note [Rows share their keys]); the caller checks that their positions follow.
bool same_keys(const AttentionRows& a, const AttentionRows& b) {
  if (&a == &b) return true;
  return a.new_k == nullptr && b.new_k == nullptr && a.kv.keys.data<Half>() == b.kv.keys.data<Half>() &&
         a.kv.values.data<Half>() == b.kv.values.data<Half>() && a.kv.keys.strides[0] == b.kv.keys.strides[0] &&
         a.kv.values.strides[0] == b.kv.values.strides[0] && a.kv.keys.strides[1] == b.kv.keys.strides[1] &&
         a.kv.values.strides[1] == b.kv.values.strides[1] && a.kv.blocks.data() == b.kv.blocks.data() &&
         a.kv.blocks.size() == b.kv.blocks.size() && a.kv.block_size == b.kv.block_size;
}

}  // namespace

Tensor<"seq", "kvh", "grp", "hd"> flash_attention_f16(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q_in,
                                                      std::span<const AttentionRows> seqs, float scale) {
  const auto q = contiguous(ctx, q_in);
  const std::int64_t kvh = q.size<"kvh">(), grp = q.size<"grp">(), hd = q.size<"hd">();
  check_rows(q, seqs, KvType::f16, hd);
  for (const AttentionRows& s : seqs)
    FUCINA_CHECK((s.new_k == nullptr && s.new_v == nullptr) || (s.new_k != nullptr && s.new_v != nullptr && s.n == 1 &&
                                                                  grp <= kPair),
                 InvalidArgument, "[flash_attention] new keys and values are stored by one task per KV head and row");
  auto out = Tensor<"seq", "kvh", "grp", "hd">::empty(ctx, q.sizes());
  const float* qp = q.data().data();
  float* op = out.mutable_data().data();
  // A task takes up to kRowsPerTask rows that follow each other in one cache (Note [Rows
  // share their keys]). It reads the cache through its last row's view, the one that reaches
  // furthest.
  const auto joins = [](const Row& last, const Row& r) {
    return r.n_seen() == last.n_seen() + 1 && same_keys(*last.s, *r.s);
  };
  for_each_task(ctx, seqs, kvh, grp, kPair, kRowsPerTask, joins, [&](std::span<const Row> rows, std::int64_t h,
                                                                     std::int64_t g0, int heads) {
    const AttentionRows& s0 = *rows.front().s;
    if (s0.new_k != nullptr) {  // Note [Store in the attention pass]
      const std::int64_t row = s0.kv.row(s0.n_past);
      raw::f32_to_f16_run(s0.new_k + h * hd, head_row(s0.kv.keys, row, h), hd);
      raw::f32_to_f16_run(s0.new_v + h * hd, head_row(s0.kv.values, row, h), hd);
    }
    thread_local std::vector<float> qh;
    qh.resize(static_cast<std::size_t>(kMaxQueries * hd));
    const float* qs[kMaxQueries];
    float* o[kMaxQueries];
    std::int64_t chunk[kRowsPerTask];
    const auto n_rows = static_cast<int>(rows.size());
    for (int t = 0; t < n_rows; ++t) {
      const Row& r = rows[static_cast<std::size_t>(t)];
      for (int g = 0; g < heads; ++g) {
        const std::int64_t qr = ((r.s->r0 + r.i) * kvh + h) * grp + g0 + g;
        float* qg = qh.data() + (t * heads + g) * hd;
        for (std::int64_t d = 0; d < hd; ++d) qg[d] = round_half(qp[qr * hd + d]);
        qs[t * heads + g] = qg;
        o[t * heads + g] = op + qr * hd;
      }
      chunk[t] = r.s->kv_chunk > 0 && r.s->n == 1 ? r.s->kv_chunk : r.n_seen();
    }
    attend_rows(rows.back().s->kv, h, qs, heads, n_rows, hd, rows.front().n_seen(), chunk, scale, o);
  }, [&](std::span<const Row> rows, std::int64_t h) {
    // That task's first run into L2 (this task streams more than L1 holds before it starts).
    prefetch_rows<2>(rows.back().s->kv, h, 0, std::min(rows.front().n_seen(), kRun), hd);
  });
  return out;
}

Tensor<"seq", "kvh", "grp", "hd"> flash_attention_q8_0(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q_in,
                                                       std::span<const AttentionRows> seqs, float scale) {
  using quant::BlockQ8_0;
  constexpr std::int64_t kBlock = 32, kUnits = sizeof(BlockQ8_0) / sizeof(Half);
  const auto q = contiguous(ctx, q_in);
  const std::int64_t kvh = q.size<"kvh">(), grp = q.size<"grp">(), hd = q.size<"hd">();
  FUCINA_CHECK(hd % kBlock == 0, Unsupported, "[flash_attention] a q8_0 cache needs a head size that is a multiple of 32");
  check_rows(q, seqs, KvType::q8_0, hd / kBlock * kUnits);
  for (const AttentionRows& s : seqs)
    FUCINA_CHECK(s.new_k == nullptr && s.new_v == nullptr, Unsupported, "[flash_attention] a q8_0 cache is stored before");
  auto out = Tensor<"seq", "kvh", "grp", "hd">::empty(ctx, q.sizes());
  const float* qp = q.data().data();
  float* op = out.mutable_data().data();
  const auto alone = [](const Row&, const Row&) { return false; };
  for_each_task(ctx, seqs, kvh, grp, 1, 1, alone, [&](std::span<const Row> rows, std::int64_t h, std::int64_t g, int) {
    const AttentionRows& s = *rows.front().s;
    const std::int64_t i = rows.front().i;
    const RawTensor& kr = s.kv.keys;
    const RawTensor& vr = s.kv.values;
    const Half* k0 = head_row(kr, 0, h);
    const Half* v0 = head_row(vr, 0, h);
    const std::int64_t r = ((s.r0 + i) * kvh + h) * grp + g;
    thread_local std::vector<BlockQ8_0> q8;
    thread_local std::vector<float> acc, v;
    q8.resize(static_cast<std::size_t>(hd / kBlock));
    acc.assign(static_cast<std::size_t>(hd), 0.f);
    v.resize(static_cast<std::size_t>(hd));
    quant::quantize_act_q8_0(qp + r * hd, q8.data(), hd);  // ggml's from_float for Q8_0's vec_dot_type
    SoftmaxState st;
    for (std::int64_t p = 0; p <= s.n_past + i; ++p) {
      const std::int64_t row = s.kv.row(p);
      const float sc = quant::vec_dot_q8_0_q8_0(hd, k0 + row * kr.strides[0], q8.data()) * scale;
      float ms = 1.f, vs = 1.f;
      if (sc > st.max) {
        ms = std::exp(st.max - sc);
        st.max = sc;
        for (float& a : acc) a *= ms;  // ggml_vec_scale_f32
      } else {
        vs = std::exp(sc - st.max);
      }
      quant::dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(v0 + row * vr.strides[0]), v.data(), hd);
      for (std::int64_t d = 0; d < hd; ++d) acc[d] = std::fma(v[d], vs, acc[d]);  // ggml_vec_mad_f32
      st.sum = std::fma(st.sum, ms, vs);
    }
    const float inv = inverse(st.sum);
    for (std::int64_t d = 0; d < hd; ++d) op[r * hd + d] = acc[d] * inv;
  }, [](std::span<const Row>, std::int64_t) {});
  return out;
}

Tensor<"seq", "kvh", "grp", "hd"> flash_attention_f16(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& keys,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& values,
                                                      std::int64_t n_past, float scale, std::int64_t kv_chunk) {
  const std::int64_t n = q.size<"seq">(), n_kv = keys.size<"kseq">();
  FUCINA_CHECK(values.size<"kseq">() == n_kv, ShapeMismatch, "[flash_attention] {} keys but {} values", n_kv,
               values.size<"kseq">());
  FUCINA_CHECK(n_past >= 0 && n_past + n <= n_kv, InvalidArgument, "[flash_attention] {} past + {} new > {} keys", n_past,
               n, n_kv);
  const AttentionRows rows{.r0 = 0, .n = n, .n_past = n_past, .kv_chunk = kv_chunk, .kv = {keys.raw(), values.raw()}};
  return flash_attention_f16(ctx, q, std::span(&rows, 1), scale);
}

}  // namespace fucina::model
