#include "fucina/model/flash_attention.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "fucina/model/f16_matmul.hpp"

#if !defined(FUCINA_SCALAR) && defined(__AVX512F__)
#include <immintrin.h>
#define FUCINA_FA_AVX512 1
#endif

namespace fucina::model {

namespace {

inline float h2f(Half h) { return half_to_float(h.bits); }
inline Half f2h(float f) { return Half{float_to_half(f)}; }
inline float round_half(float f) { return half_to_float(float_to_half(f)); }

// acc <- f16(acc * s), element by element (ggml_vec_scale_f16).
void scale_f16(Half* acc, std::int64_t n, float s) {
  std::int64_t d = 0;
#if defined(FUCINA_FA_AVX512)
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
#if defined(FUCINA_FA_AVX512)
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

#if defined(FUCINA_FA_AVX512)
inline __m512 round_f16(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// The online-softmax accumulation of one query row with the f16 running output held in
// V registers (hd = 16 V) as f32 values rounded to f16 after every step: the same values
// scale_f16 / mad_f16 produce through memory, without a store-to-load round trip per key.
template <int V>
void accumulate_in_registers(const float* scores, std::int64_t n, const Half* v0, std::int64_t v_stride, float* out) {
  __m512 acc[V];
  for (int c = 0; c < V; ++c) acc[c] = _mm512_setzero_ps();
  float m = -std::numeric_limits<float>::infinity(), s_sum = 0.f;
  for (std::int64_t j = 0; j < n; ++j) {
    const float s = scores[j];
    float ms = 1.f, vs = 1.f;
    if (s > m) {
      const float m_old = m;
      m = s;
      ms = std::exp(m_old - m);
      const __m512 vms = _mm512_set1_ps(ms);
      for (int c = 0; c < V; ++c) acc[c] = round_f16(_mm512_mul_ps(acc[c], vms));
    } else {
      vs = std::exp(s - m);
    }
    const __m512 vvs = _mm512_set1_ps(vs);
    const Half* v = v0 + j * v_stride;
    for (int c = 0; c < V; ++c) {
      const __m512 vv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 16 * c)));
      acc[c] = round_f16(_mm512_fmadd_ps(vv, vvs, acc[c]));
    }
    s_sum = std::fma(s_sum, ms, vs);
  }
  const __m512 inv = _mm512_set1_ps(s_sum == 0.f ? 0.f : 1.f / s_sum);
  for (int c = 0; c < V; ++c) _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(acc[c], inv));
}
#endif

}  // namespace

Tensor<"seq", "kvh", "grp", "hd"> flash_attention_f16(Context& ctx, const Tensor<"seq", "kvh", "grp", "hd">& q_in,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& keys,
                                                      const TensorT<DType::f16, "kseq", "kvh", "hd">& values,
                                                      std::int64_t n_past, float scale) {
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
  const std::int64_t rows = n * kvh * grp;
  ctx.pool().parallel_for(rows, [&](std::int64_t r) {
    const std::int64_t i = r / (kvh * grp), h = (r / grp) % kvh, n_seen = n_past + i + 1;
    thread_local std::vector<float> qh, scores;
    thread_local std::vector<Half> acc;
    qh.resize(static_cast<std::size_t>(hd));
    scores.resize(static_cast<std::size_t>(n_seen));
    for (std::int64_t d = 0; d < hd; ++d) qh[static_cast<std::size_t>(d)] = round_half(qp[r * hd + d]);
    // The scores do not depend on the running output: all of them first (independent dots
    // overlap), then the sequential f16 accumulation.
    // ggml_vec_dot_f16 on the f16 query: its 64-blocks in f32 lanes, the rest in double.
    dot_f16_vec_rows(kp + h * kr.strides[1], kr.strides[0], qh.data(), hd, n_seen, scores.data());
    for (float& sc : scores) sc *= scale;
    const Half* v0 = vp + h * vr.strides[1];
    float* o = op + r * hd;
#if defined(FUCINA_FA_AVX512)
    if (hd == 128) return accumulate_in_registers<8>(scores.data(), n_seen, v0, vr.strides[0], o);
    if (hd == 64) return accumulate_in_registers<4>(scores.data(), n_seen, v0, vr.strides[0], o);
#endif
    acc.assign(static_cast<std::size_t>(hd), Half{0});
    float m = -std::numeric_limits<float>::infinity(), s_sum = 0.f;
    for (std::int64_t j = 0; j < n_seen; ++j) {
      const float s = scores[static_cast<std::size_t>(j)];
      float ms = 1.f, vs = 1.f;
      if (s > m) {
        const float m_old = m;
        m = s;
        ms = std::exp(m_old - m);
        scale_f16(acc.data(), hd, ms);
      } else {
        vs = std::exp(s - m);
      }
      mad_f16(acc.data(), v0 + j * vr.strides[0], hd, vs);
      s_sum = std::fma(s_sum, ms, vs);
    }
    const float inv = s_sum == 0.f ? 0.f : 1.f / s_sum;
    for (std::int64_t d = 0; d < hd; ++d) o[d] = h2f(acc[static_cast<std::size_t>(d)]) * inv;
  });
  return out;
}

}  // namespace fucina::model
