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
    const std::int64_t i = r / (kvh * grp), h = (r / grp) % kvh;
    thread_local std::vector<float> qh;
    thread_local std::vector<Half> acc;
    qh.resize(static_cast<std::size_t>(hd));
    acc.assign(static_cast<std::size_t>(hd), Half{0});
    for (std::int64_t d = 0; d < hd; ++d) qh[static_cast<std::size_t>(d)] = round_half(qp[r * hd + d]);
    float m = -std::numeric_limits<float>::infinity(), s_sum = 0.f;
    for (std::int64_t j = 0; j <= n_past + i; ++j) {
      const Half* k = kp + j * kr.strides[0] + h * kr.strides[1];
      const Half* v = vp + j * vr.strides[0] + h * vr.strides[1];
      // ggml_vec_dot_f16 on the f16 query: its 64-blocks in f32 lanes, the rest in double.
      const float s = dot_f16(k, qh.data(), hd, F16DotOrder::vec) * scale;
      float ms = 1.f, vs = 1.f;
      if (s > m) {
        const float m_old = m;
        m = s;
        ms = std::exp(m_old - m);
        scale_f16(acc.data(), hd, ms);
      } else {
        vs = std::exp(s - m);
      }
      mad_f16(acc.data(), v, hd, vs);
      s_sum = std::fma(s_sum, ms, vs);
    }
    const float inv = s_sum == 0.f ? 0.f : 1.f / s_sum;
    for (std::int64_t d = 0; d < hd; ++d) op[r * hd + d] = h2f(acc[static_cast<std::size_t>(d)]) * inv;
  });
  return out;
}

}  // namespace fucina::model
