#include "fucina/model/ggml_math.hpp"

#include <cmath>
#include <limits>

#include "fucina/kernels/arch.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::model {

namespace {
// Note [ggml expf]: the reduction constants and polynomial of ggml_v_expf.
constexpr float kShift = 0x1.8p23f, kLog2e = 0x1.715476p+0f, kLn2Hi = 0x1.62e4p-1f, kLn2Lo = 0x1.7f7d1cp-20f;
constexpr float kC5 = 0x1.0e4020p-7f, kC4 = 0x1.573e2ep-5f, kC3 = 0x1.555e66p-3f, kC2 = 0x1.fffdb6p-2f,
                kC1 = 0x1.ffffecp-1f;
constexpr std::int64_t kLanes = 16;

#if FUCINA_ARCH_AVX512
__m512 vexpf16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(kShift);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(kLog2e), shift), shift);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 hi = _mm512_fmadd_ps(_mm512_set1_ps(kC5), b, _mm512_set1_ps(kC4));
  const __m512 mid = _mm512_fmadd_ps(_mm512_set1_ps(kC3), b, _mm512_set1_ps(kC2));
  const __m512 lo = _mm512_fmadd_ps(_mm512_set1_ps(kC1), b, _mm512_set1_ps(1.f));
  const __m512 j = _mm512_fmadd_ps(_mm512_fmadd_ps(hi, u, mid), u, lo);
  const __m512 res = _mm512_scalef_ps(j, n);
  const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.f), _CMP_GT_OQ);
  if (big == 0) return res;
  const __m512 sat = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                          _mm512_set1_ps(std::numeric_limits<float>::infinity()), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(big, res, sat);
}
#endif
}  // namespace

float ggml_vexpf(float x) {
  const float n = std::fma(x, kLog2e, kShift) - kShift;
  const float b = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(kC5, b, kC4), u, std::fma(kC3, b, kC2)), u, std::fma(kC1, b, 1.f));
  if (std::isnan(n)) return n;
  if (std::fabs(n) > 192.f) return n <= 0.f ? 0.f : std::numeric_limits<float>::infinity();
  return std::ldexp(j, static_cast<int>(n));  // vscalefps: j · 2^n, one rounding
}

void ggml_vexpf_rows(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
#if FUCINA_ARCH_AVX512
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_ps(y + i, vexpf16(_mm512_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = ggml_vexpf(x[i]);
}

void swiglu_ggml(const float* gate, const float* up, float* y, std::int64_t n) {
  std::int64_t i = 0;
#if FUCINA_ARCH_AVX512
  for (; i + kLanes <= n; i += kLanes) {
    const __m512 x = _mm512_loadu_ps(gate + i);
    const __m512 e = vexpf16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.f), e));
    _mm512_storeu_ps(y + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
#else
  for (; i < (n & ~(kLanes - 1)); ++i) y[i] = gate[i] / (1.f + ggml_vexpf(0.f - gate[i])) * up[i];
#endif
  for (; i < n; ++i) y[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
}

void softmax_ggml(const float* x, float* y, std::int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0;
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#if FUCINA_ARCH_AVX512
    _mm512_storeu_ps(y + i, vexpf16(_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(max))));
#else
    for (std::int64_t l = 0; l < kLanes; ++l) y[i + l] = ggml_vexpf(x[i + l] - max);
#endif
    sum += static_cast<double>(fold16(y + i));
  }
  for (; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += static_cast<double>(y[i]);
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (std::int64_t k = 0; k < n; ++k) y[k] *= inv;
}

}  // namespace fucina::model
