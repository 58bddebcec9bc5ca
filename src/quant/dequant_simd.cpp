#include "fucina/quant/dequant_simd.hpp"

#include "fucina/kernels/arch.hpp"
#include "fucina/quant/blocks_legacy.hpp"
#include "fucina/quant/fp16.hpp"
#include "fucina/quant/k_quants.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::quant {

#if FUCINA_ARCH_AVX512
namespace {

inline __m512 i8x16_to_ps(const void* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
}

void q8_0(const BlockQ8_0* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / 32; ++i, y += 32) {
    const __m512 d = _mm512_set1_ps(fp16_to_fp32(x[i].d));
    _mm512_storeu_ps(y, _mm512_mul_ps(i8x16_to_ps(x[i].qs), d));
    _mm512_storeu_ps(y + 16, _mm512_mul_ps(i8x16_to_ps(x[i].qs + 16), d));
  }
}

void q4_0(const BlockQ4_0* x, float* y, std::int64_t n) {
  const __m512i low = _mm512_set1_epi32(0x0F), eight = _mm512_set1_epi32(8);
  for (std::int64_t i = 0; i < n / 32; ++i, y += 32) {
    const __m512 d = _mm512_set1_ps(fp16_to_fp32(x[i].d));
    const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].qs)));
    const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(q, low), eight);
    const __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
    _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d));
    _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
  }
}

void q4_K(const BlockQ4_K* x, float* y, std::int64_t n) {
  const __m512i low = _mm512_set1_epi32(0x0F);
  for (std::int64_t i = 0; i < n / 256; ++i) {
    const std::uint8_t* q = x[i].qs;
    const float d = fp16_to_fp32(x[i].d), mn = fp16_to_fp32(x[i].dmin);
    for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
      std::uint8_t sc = 0, m = 0;
      unpack_scale_min_k4(is, x[i].scales, sc, m);
      const __m512 d1 = _mm512_set1_ps(d * static_cast<float>(sc)), m1 = _mm512_set1_ps(mn * static_cast<float>(m));
      unpack_scale_min_k4(is + 1, x[i].scales, sc, m);
      const __m512 d2 = _mm512_set1_ps(d * static_cast<float>(sc)), m2 = _mm512_set1_ps(mn * static_cast<float>(m));
      for (int h = 0; h < 2; ++h) {
        const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * h)));
        const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(b, low));
        const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
        _mm512_storeu_ps(y + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d1, lo), m1));
        _mm512_storeu_ps(y + 32 + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d2, hi), m2));
      }
    }
  }
}

void q6_K(const BlockQ6_K* x, float* y, std::int64_t n) {
  const __m512i low = _mm512_set1_epi32(0x0F), three = _mm512_set1_epi32(3), off = _mm512_set1_epi32(32);
  const auto load = [](const std::uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  };
  for (std::int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const std::uint8_t* ql = x[i].ql;
    const std::uint8_t* qh = x[i].qh;
    const std::int8_t* sc = x[i].scales;
    for (int nn = 0; nn < 256; nn += 128, y += 128, ql += 64, qh += 32, sc += 8)
      for (int h = 0; h < 2; ++h) {  // l = 16h .. 16h + 15, scale index is = h
        const __m512i a = load(ql + 16 * h), b = load(ql + 32 + 16 * h), hb = load(qh + 16 * h);
        const __m512i q1 = _mm512_sub_epi32(
            _mm512_or_si512(_mm512_and_si512(a, low), _mm512_slli_epi32(_mm512_and_si512(hb, three), 4)), off);
        const __m512i q2 = _mm512_sub_epi32(
            _mm512_or_si512(_mm512_and_si512(b, low),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, 2), three), 4)),
            off);
        const __m512i q3 = _mm512_sub_epi32(
            _mm512_or_si512(_mm512_srli_epi32(a, 4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, 4), three), 4)),
            off);
        const __m512i q4 = _mm512_sub_epi32(
            _mm512_or_si512(_mm512_srli_epi32(b, 4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, 6), three), 4)),
            off);
        const __m512i qs[4] = {q1, q2, q3, q4};
        for (int g = 0; g < 4; ++g) {
          const __m512 s = _mm512_set1_ps(d * static_cast<float>(sc[h + 2 * g]));
          _mm512_storeu_ps(y + 32 * g + 16 * h, _mm512_mul_ps(s, _mm512_cvtepi32_ps(qs[g])));
        }
      }
  }
}

}  // namespace
#endif

bool dequantize_row_simd(QuantType type, const void* src, float* dst, std::int64_t n) {
#if FUCINA_ARCH_AVX512
  switch (type) {
    case QuantType::Q8_0: return q8_0(static_cast<const BlockQ8_0*>(src), dst, n), true;
    case QuantType::Q4_0: return q4_0(static_cast<const BlockQ4_0*>(src), dst, n), true;
    case QuantType::Q4_K: return q4_K(static_cast<const BlockQ4_K*>(src), dst, n), true;
    case QuantType::Q6_K: return q6_K(static_cast<const BlockQ6_K*>(src), dst, n), true;
    default: return false;
  }
#else
  (void)type, (void)src, (void)dst, (void)n;
  return false;
#endif
}

}  // namespace fucina::quant
