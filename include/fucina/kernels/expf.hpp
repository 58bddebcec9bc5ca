#pragma once
// glibc's expf over arrays, vectorized, returning libm's bits.
//
// Note [glibc expf]: glibc (2.27 on; checked on 2.36) computes expf in double (ARM's
// optimized-routines, sysdeps/ieee754/flt-32/e_expf.c): k = round(x·32/ln2) by the
// 0x1.8p52 shift trick, r = x·32/ln2 - k, exp(x) = 2^(k/32) · p(r) with 2^(i/32) from a
// 32-entry table (the exponent added as an integer) and p a degree-3 polynomial, then
// rounded to float once. On x86-64 an ifunc picks the build compiled with FMA
// (__expf_fma) on CPUs with FMA and AVX2, which is every CPU our AVX2 and AVX-512 arms run
// on; its contractions, read from its disassembly, are
//   kd = fma(InvLn2N, x, Shift); r = fma(InvLn2N, x, -(kd - Shift));
//   y = fma(fma(C0, r, C1), r·r, fma(C2, r, 1)) · s;   s = T[k % 32] + (k << 47)
// Double arithmetic is deterministic, so the same operations in the same order, lane by
// lane, give the same floats. Lanes with |x| >= 88 or NaN, where glibc branches to its
// special cases (overflow, underflow, -inf, NaN; rare in a softmax: its first key's
// exp(-inf), far-off scores), are handed to libm itself. tests/kernels/expf_test.cpp and
// expf_slow_test.cpp compare every arm with the running libm bit for bit. The scalar twin
// is libm.
#include <cmath>
#include <cstdint>

#include "fucina/kernels/arch.hpp"

#if FUCINA_ARCH_AVX2
#include <immintrin.h>
#endif

namespace fucina::kernels {

namespace expf_detail {
// __exp2f_data.tab: bits of 2^(i/32) minus i << 47, so adding k << 47 makes 2^(k/32).
inline constexpr std::uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
inline constexpr double kInvLn2N = 0x1.71547652b82fep+5;  // 32 / ln 2
inline constexpr double kShift = 0x1.8p+52;
inline constexpr double kC0 = 0x1.c6af84b912394p-20, kC1 = 0x1.ebfce50fac4f3p-13, kC2 = 0x1.62e42ff0c52d6p-6;
inline constexpr std::uint32_t kSpecialAbs = 0x42b00000;  // |x| >= 88 (glibc's top12 test) or NaN

// The lanes of y marked in `special` (bit i: lane i) recomputed by libm from x.
inline void libm_lanes(const float* x, float* y, unsigned special) {
  for (; special != 0; special &= special - 1) {
    const int i = __builtin_ctz(special);
    y[i] = std::exp(x[i]);
  }
}
}  // namespace expf_detail

// y[i] = expf(x[i]) for i < n (x and y may be the same array). The scalar twin.
inline void expf_glibc(arch::scalar, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

#if FUCINA_ARCH_AVX2
namespace expf_detail {
// glibc's main path for 4 lanes (exact for |x| < 88; the other lanes are redone by libm).
inline __m128 main_path4(__m128 x) {
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d inv = _mm256_set1_pd(kInvLn2N), shift = _mm256_set1_pd(kShift);
  const __m256d kd = _mm256_fmadd_pd(inv, xd, shift);
  const __m256i ki = _mm256_castpd_si256(kd);
  const __m256d r = _mm256_fmsub_pd(inv, xd, _mm256_sub_pd(kd, shift));
  const __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable), idx, 8),
                                     _mm256_slli_epi64(ki, 47));
  const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(kC0), _mm256_set1_pd(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  const __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(kC2), _mm256_set1_pd(1.0));
  return _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_fmadd_pd(z, r2, y), _mm256_castsi256_pd(t)));
}

// glibc's main path on 8 lanes, and the mask of lanes libm must redo.
inline __m256 main_path(__m256 x, unsigned& special) {
  const __m256i abs = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
  const __m256i big = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(static_cast<int>(kSpecialAbs) - 1));
  special = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(big)));
  return _mm256_set_m128(main_path4(_mm256_extractf128_ps(x, 1)), main_path4(_mm256_castps256_ps128(x)));
}
}  // namespace expf_detail

inline void expf_glibc(arch::avx2, const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    alignas(32) float xs[8];  // x's lanes kept for libm (y may be x)
    unsigned special = 0;
    const __m256 xv = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(y + i, expf_detail::main_path(xv, special));
    if (special != 0) _mm256_store_ps(xs, xv), expf_detail::libm_lanes(xs, y + i, special);
  }
  expf_glibc(arch::scalar{}, x + i, y + i, n - i);
}
#endif

#if FUCINA_ARCH_AVX512
namespace expf_detail {
// glibc's main path for 8 lanes (exact for |x| < 88; the other lanes are redone by libm).
inline __m256 main_path8(__m256 x) {
  const __m512d xd = _mm512_cvtps_pd(x);
  const __m512d inv = _mm512_set1_pd(kInvLn2N), shift = _mm512_set1_pd(kShift);
  const __m512d kd = _mm512_fmadd_pd(inv, xd, shift);
  const __m512i ki = _mm512_castpd_si512(kd);
  const __m512d r = _mm512_fmsub_pd(inv, xd, _mm512_sub_pd(kd, shift));
  // T[k % 32]: two 16-entry permutes, picked by bit 4 of k.
  const __m512i t0 = _mm512_loadu_si512(kTable), t1 = _mm512_loadu_si512(kTable + 8);
  const __m512i t2 = _mm512_loadu_si512(kTable + 16), t3 = _mm512_loadu_si512(kTable + 24);
  const __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1), hi = _mm512_permutex2var_epi64(t2, ki, t3);
  const __m512i tk = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
  const __m512i t = _mm512_add_epi64(tk, _mm512_slli_epi64(ki, 47));
  const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(kC0), _mm512_set1_pd(kC1));
  const __m512d r2 = _mm512_mul_pd(r, r);
  const __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(kC2), _mm512_set1_pd(1.0));
  return _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_fmadd_pd(z, r2, y), _mm512_castsi512_pd(t)));
}

// glibc's main path on 16 lanes, and the mask of lanes libm must redo.
inline __m512 main_path(__m512 x, unsigned& special) {
  const __m512i abs = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
  special = _mm512_cmpge_epu32_mask(abs, _mm512_set1_epi32(kSpecialAbs));
  const __m512 lo = _mm512_castps256_ps512(main_path8(_mm512_castps512_ps256(x)));
  return _mm512_insertf32x8(lo, main_path8(_mm512_extractf32x8_ps(x, 1)), 1);
}
}  // namespace expf_detail

inline void expf_glibc(arch::avx512, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 16) {
    alignas(64) float xs[16];  // x's lanes kept for libm (y may be x)
    unsigned special = 0;
    const auto lanes = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(lanes, x + i);
    _mm512_mask_storeu_ps(y + i, lanes, expf_detail::main_path(xv, special));
    if ((special &= lanes) != 0) _mm512_store_ps(xs, xv), expf_detail::libm_lanes(xs, y + i, special);
  }
}
#endif

// The best compiled arm.
inline void expf_glibc(const float* x, float* y, std::int64_t n) { expf_glibc(arch::best_arch{}, x, y, n); }

}  // namespace fucina::kernels
