#include "fucina/model/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fucina/kernels/arch.hpp"
#include "fucina/model/f16_matmul.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::model {

namespace {

inline float h2f(Half h) { return half_to_float(h.bits); }
inline Half f2h(float f) { return Half{float_to_half(f)}; }
inline float round_half(float f) { return half_to_float(float_to_half(f)); }

// acc <- f16(acc * s), element by element (ggml_vec_scale_f16).
void scale_f16(Half* acc, std::int64_t n, float s) {
  std::int64_t d = 0;
#if FUCINA_ARCH_AVX512
  const __m512 vs = _mm512_set1_ps(s);
  for (; d + 16 <= n; d += 16) {
    auto* a = reinterpret_cast<__m256i*>(acc + d);
    const __m512 x = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(a)), vs);
    _mm256_storeu_si256(a, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; d < n; ++d) acc[d] = f2h(h2f(acc[d]) * s);
}

// acc <- f16(fma(v, s, acc)), element by element (ggml_vec_mad_f16).
void mad_f16(Half* acc, const Half* v, std::int64_t n, float s) {
  std::int64_t d = 0;
#if FUCINA_ARCH_AVX512
  const __m512 vs = _mm512_set1_ps(s);
  for (; d + 16 <= n; d += 16) {
    auto* a = reinterpret_cast<__m256i*>(acc + d);
    const __m512 vv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + d)));
    const __m512 x = _mm512_fmadd_ps(vv, vs, _mm512_cvtph_ps(_mm256_loadu_si256(a)));
    _mm256_storeu_si256(a, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; d < n; ++d) acc[d] = f2h(std::fma(h2f(v[d]), s, h2f(acc[d])));
}

// The online softmax's per-key factors of one query row, computed before any value is
// touched: the running max only depends on the scores. Key j (score dots[j] · scale)
// rescales the running output by ms[j] (1 unless it is a new max) and adds value j weighted
// by vs[j]; returns the final max and the sum of weights.
struct SoftmaxTotals {
  float max, sum;
};
SoftmaxTotals softmax_steps(const float* dots, float scale, std::int64_t n, float* ms, float* vs) {
  float m = -std::numeric_limits<float>::infinity(), s_sum = 0.f;
  for (std::int64_t j = 0; j < n; ++j) {
    const float s = dots[j] * scale;
    float a = 1.f, b = 1.f;
    if (s > m) {
      a = std::exp(m - s);
      m = s;
    } else {
      b = std::exp(s - m);
    }
    ms[j] = a;
    vs[j] = b;
    s_sum = std::fma(s_sum, a, b);
  }
  return {m, s_sum};
}
float inverse(float sum) { return sum == 0.f ? 0.f : 1.f / sum; }

#if FUCINA_ARCH_AVX512
inline __m512 round_f16(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// The f16 accumulation of G query rows that share one KV head, the running outputs held in
// registers (hd = 16 V) as f32 values rounded to f16 after every step: the values
// scale_f16 / mad_f16 produce through memory. The rows' chains are independent, so
// interleaving them hides the round trip's latency; each value row is widened once for all G.
// Skipping a rescale by exactly 1 leaves an f16 value unchanged, so it changes no bits.
template <int V, int G>
void accumulate_in_registers(const float* const* ms, const float* const* vs, const float* inv, std::int64_t n,
                             const Half* v0, std::int64_t v_stride, float* const* out) {
  __m512 acc[G][V];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < V; ++c) acc[g][c] = _mm512_setzero_ps();
  for (std::int64_t j = 0; j < n; ++j) {
    const Half* v = v0 + j * v_stride;
    __m512 vv[V];
    for (int c = 0; c < V; ++c) vv[c] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 16 * c)));
    for (int g = 0; g < G; ++g) {
      if (ms[g][j] != 1.f) {
        const __m512 vms = _mm512_set1_ps(ms[g][j]);
        for (int c = 0; c < V; ++c) acc[g][c] = round_f16(_mm512_mul_ps(acc[g][c], vms));
      }
      const __m512 vvs = _mm512_set1_ps(vs[g][j]);
      for (int c = 0; c < V; ++c) acc[g][c] = round_f16(_mm512_fmadd_ps(vv[c], vvs, acc[g][c]));
    }
  }
  for (int g = 0; g < G; ++g) {
    const __m512 vinv = _mm512_set1_ps(inv[g]);
    for (int c = 0; c < V; ++c) _mm512_storeu_ps(out[g] + 16 * c, _mm512_mul_ps(acc[g][c], vinv));
  }
}

// Rows per task: two rows' chains fill the pipeline; more would spill the 32 registers.
template <int V>
void accumulate_rows(int g_count, const float* const* ms, const float* const* vs, const float* inv, std::int64_t n,
                     const Half* v0, std::int64_t v_stride, float* const* out) {
  if (g_count == 2) return accumulate_in_registers<V, 2>(ms, vs, inv, n, v0, v_stride, out);
  accumulate_in_registers<V, 1>(ms, vs, inv, n, v0, v_stride, out);
}
#endif

}  // namespace

Tensor<"seq", "kvh", "grp", "hd"> flash_attention_f16(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q_in,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& keys,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& values,
                                                      std::int64_t n_past, float scale, std::int64_t kv_chunk) {
  const auto q = contiguous(ctx, q_in);
  const std::int64_t n = q.size<"seq">(), kvh = q.size<"kvh">(), grp = q.size<"grp">(), hd = q.size<"hd">();
  const std::int64_t n_kv = keys.size<"kseq">();
  FUCINA_CHECK(keys.size<"kvh">() == kvh && keys.size<"hd">() == hd && values.size<"kvh">() == kvh &&
                   values.size<"hd">() == hd && values.size<"kseq">() == n_kv,
               ShapeMismatch, "[flash_attention] q has {} kv heads of {} dims, the cache {} of {}", kvh, hd,
               keys.size<"kvh">(), keys.size<"hd">());
  FUCINA_CHECK(n_past >= 0 && n_past + n <= n_kv, InvalidArgument, "[flash_attention] {} past + {} new > {} keys", n_past,
               n, n_kv);
  const RawTensor& kr = keys.raw();
  const RawTensor& vr = values.raw();
  FUCINA_ASSERT(kr.strides[2] == 1 && vr.strides[2] == 1);
  const Half* kp = kr.data<Half>();
  const Half* vp = vr.data<Half>();
  auto out = Tensor<"seq", "kvh", "grp", "hd">::empty(ctx, {n, kvh, grp, hd});
  const float* qp = q.data().data();
  float* op = out.mutable_data().data();
  // One task: a pair of query rows of one KV head (they share every value row it reads).
  constexpr std::int64_t kPair = kMaxVecRowQueries;
  const std::int64_t pairs = (grp + kPair - 1) / kPair;
  ctx.pool().parallel_for(n * kvh * pairs, [&](std::int64_t t) {
    const std::int64_t i = t / (kvh * pairs), h = (t / pairs) % kvh, g0 = (t % pairs) * kPair, n_seen = n_past + i + 1;
    const int g_count = static_cast<int>(std::min(kPair, grp - g0));
    thread_local std::vector<float> qh, scores;
    thread_local std::vector<Half> acc;
    qh.resize(static_cast<std::size_t>(kPair * hd));
    scores.resize(static_cast<std::size_t>(3 * kPair * n_seen));
    const float* qs[kPair];
    float* dots[kPair];  // each row's scratch: dots, then ms, then vs (n_seen each)
    float* ms[kPair];
    float* vs[kPair];
    float inv[kPair];
    float* o[kPair];
    for (int g = 0; g < g_count; ++g) {
      const std::int64_t r = (i * kvh + h) * grp + g0 + g;
      float* qg = qh.data() + g * hd;
      for (std::int64_t d = 0; d < hd; ++d) qg[d] = round_half(qp[r * hd + d]);
      qs[g] = qg;
      dots[g] = scores.data() + 3 * g * n_seen;
      ms[g] = dots[g] + n_seen;
      vs[g] = dots[g] + 2 * n_seen;
      o[g] = op + r * hd;
    }
    // ggml_vec_dot_f16 on the f16 query: its 64-blocks in f32 lanes, the rest in double.
    dot_f16_vec_rows(kp + h * kr.strides[1], kr.strides[0], qs, g_count, hd, n_seen, dots);
    const Half* v0 = vp + h * vr.strides[1];
    // The f16 chain over keys [a, b) of each row from a zero accumulator, times inv[g], into
    // out[g] (ggml_vec_scale_f16 / ggml_vec_mad_f16 per key).
    const auto accumulate = [&](std::int64_t a, std::int64_t b, const float* inv, float* const* out) {
      const float* msa[kPair];
      const float* vsa[kPair];
      for (int g = 0; g < g_count; ++g) msa[g] = ms[g] + a, vsa[g] = vs[g] + a;
      const Half* va = v0 + a * vr.strides[0];
#if FUCINA_ARCH_AVX512
      if (hd == 128) return accumulate_rows<8>(g_count, msa, vsa, inv, b - a, va, vr.strides[0], out);
      if (hd == 64) return accumulate_rows<4>(g_count, msa, vsa, inv, b - a, va, vr.strides[0], out);
#endif
      for (int g = 0; g < g_count; ++g) {
        acc.assign(static_cast<std::size_t>(hd), Half{0});
        for (std::int64_t j = 0; j < b - a; ++j) {
          if (msa[g][j] != 1.f) scale_f16(acc.data(), hd, msa[g][j]);
          mad_f16(acc.data(), va + j * vr.strides[0], hd, vsa[g][j]);
        }
        for (std::int64_t d = 0; d < hd; ++d) out[g][d] = h2f(acc[static_cast<std::size_t>(d)]) * inv[g];
      }
    };
    if (kv_chunk <= 0 || n != 1) {
      for (int g = 0; g < g_count; ++g) inv[g] = inverse(softmax_steps(dots[g], scale, n_seen, ms[g], vs[g]).sum);
      return accumulate(0, n_seen, inv, o);
    }
    // Note [split decode]: one chunk of kv_chunk keys at a time, each with its own max, sum
    // and f16 chain, merged in f32 in chunk order (ggml_flash_attn_ext_reduce_partials).
    thread_local std::vector<float> part, total;
    part.resize(static_cast<std::size_t>(kPair * hd));
    total.assign(static_cast<std::size_t>(kPair * hd), 0.f);
    float* parts[kPair];
    float m_tot[kPair], s_tot[kPair];
    const float ones[kPair] = {1.f, 1.f};
    for (int g = 0; g < g_count; ++g) {
      parts[g] = part.data() + g * hd;
      m_tot[g] = -std::numeric_limits<float>::infinity(), s_tot[g] = 0.f;
    }
    for (std::int64_t a = 0; a < n_seen; a += kv_chunk) {
      const std::int64_t b = std::min(a + kv_chunk, n_seen);
      SoftmaxTotals t[kPair];
      for (int g = 0; g < g_count; ++g) t[g] = softmax_steps(dots[g] + a, scale, b - a, ms[g] + a, vs[g] + a);
      accumulate(a, b, ones, parts);
      for (int g = 0; g < g_count; ++g) {
        if (t[g].sum == 0.f) continue;
        const float m_new = std::max(m_tot[g], t[g].max);
        const float s_old = std::exp(m_tot[g] - m_new), s_new = std::exp(t[g].max - m_new);
        float* tg = total.data() + g * hd;
        for (std::int64_t d = 0; d < hd; ++d) tg[d] = std::fma(tg[d], s_old, parts[g][d] * s_new);
        s_tot[g] = std::fma(s_tot[g], s_old, t[g].sum * s_new);
        m_tot[g] = m_new;
      }
    }
    for (int g = 0; g < g_count; ++g) {
      const float iv = inverse(s_tot[g]);
      for (std::int64_t d = 0; d < hd; ++d) o[g][d] = total[static_cast<std::size_t>(g * hd + d)] * iv;
    }
  });
  return out;
}

}  // namespace fucina::model
