#pragma once
// Packing of A and B blocks into micro-panels (Note [Packed panels] in microkernel.hpp).
// Packing absorbs any strides: the contiguous-row cases that need a transpose (row-major A,
// column-major B) use a 16x16 register transpose on AVX-512, plain loops elsewhere.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "fucina/kernels/arch.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::kernels::gemm {

#if FUCINA_ARCH_AVX512
// Reads `rows` (<= 16) rows of 16 floats at src + r * ld (missing rows read as 0) and writes
// column q of that 16x16 block to dst + q * ld_dst, lanes selected by `mask`.
inline void transpose16x16(const float* src, std::int64_t ld, int rows, float* dst,
                           std::int64_t ld_dst, __mmask16 mask) noexcept {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_loadu_ps(src + i * ld) : _mm512_setzero_ps();
  for (int j = 0; j < 8; ++j) {  // per 128-bit lane: a0 b0 a1 b1 | a2 b2 a3 b3
    t[2 * j] = _mm512_unpacklo_ps(r[2 * j], r[2 * j + 1]);
    t[2 * j + 1] = _mm512_unpackhi_ps(r[2 * j], r[2 * j + 1]);
  }
  for (int j = 0; j < 4; ++j) {  // u[4j+e], lane L: element 4L+e of rows 4j..4j+3
    r[4 * j + 0] = _mm512_shuffle_ps(t[4 * j], t[4 * j + 2], 0x44);
    r[4 * j + 1] = _mm512_shuffle_ps(t[4 * j], t[4 * j + 2], 0xEE);
    r[4 * j + 2] = _mm512_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0x44);
    r[4 * j + 3] = _mm512_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0xEE);
  }
  for (int e = 0; e < 4; ++e) {  // gather lane L of the four row quads
    const __m512 v1 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x88);
    const __m512 v2 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xDD);
    const __m512 w1 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x88);
    const __m512 w2 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xDD);
    _mm512_mask_storeu_ps(dst + (0 + e) * ld_dst, mask, _mm512_shuffle_f32x4(v1, w1, 0x88));
    _mm512_mask_storeu_ps(dst + (4 + e) * ld_dst, mask, _mm512_shuffle_f32x4(v2, w2, 0x88));
    _mm512_mask_storeu_ps(dst + (8 + e) * ld_dst, mask, _mm512_shuffle_f32x4(v1, w1, 0xDD));
    _mm512_mask_storeu_ps(dst + (12 + e) * ld_dst, mask, _mm512_shuffle_f32x4(v2, w2, 0xDD));
  }
}
#endif

// dst[p * W + i] = src[i * ld + p] for i < W, p < kb: W rows contiguous along p, transposed.
template <int W>
inline void pack_transposed(const float* src, std::int64_t ld, std::int64_t kb, float* dst) noexcept {
  std::int64_t p = 0;
#if FUCINA_ARCH_AVX512
  if constexpr (W % 16 == 0 || W == 14) {
    constexpr int chunks = (W + 15) / 16;
    for (; p + 16 <= kb; p += 16)
      for (int c = 0; c < chunks; ++c) {
        const int rows = std::min(16, W - 16 * c);
        transpose16x16(src + 16 * c * ld + p, ld, rows, dst + p * W + 16 * c, W,
                       static_cast<__mmask16>((1u << rows) - 1u));
      }
  }
#endif
  for (int i = 0; i < W; ++i) {
    const float* s = src + i * ld;
    for (std::int64_t q = p; q < kb; ++q) dst[q * W + i] = s[q];
  }
}

// Packs an mb x kb block of A (element (i,p) at a[i*rs + p*cs]) into MR-row micro-panels.
template <int MR>
void pack_a(const float* a, std::int64_t rs, std::int64_t cs, std::int64_t mb, std::int64_t kb,
            float* dst) noexcept {
  for (std::int64_t i0 = 0; i0 < mb; i0 += MR, dst += MR * kb) {
    const std::int64_t rows = std::min<std::int64_t>(MR, mb - i0);
    const float* src = a + i0 * rs;
    if (rows == MR && cs == 1) {
      pack_transposed<MR>(src, rs, kb, dst);
    } else if (rows == MR && rs == 1) {
      for (std::int64_t p = 0; p < kb; ++p) std::memcpy(dst + p * MR, src + p * cs, MR * sizeof(float));
    } else {
      for (std::int64_t p = 0; p < kb; ++p) {
        for (std::int64_t i = 0; i < rows; ++i) dst[p * MR + i] = src[i * rs + p * cs];
        for (std::int64_t i = rows; i < MR; ++i) dst[p * MR + i] = 0.0f;
      }
    }
  }
}

// Packs a kb x nb block of B (element (p,j) at b[p*rs + j*cs]) into NR-column micro-panels.
template <int NR>
void pack_b(const float* b, std::int64_t rs, std::int64_t cs, std::int64_t kb, std::int64_t nb,
            float* dst) noexcept {
  for (std::int64_t j0 = 0; j0 < nb; j0 += NR, dst += NR * kb) {
    const std::int64_t cols = std::min<std::int64_t>(NR, nb - j0);
    const float* src = b + j0 * cs;
    if (cols == NR && cs == 1) {
      for (std::int64_t p = 0; p < kb; ++p) std::memcpy(dst + p * NR, src + p * rs, NR * sizeof(float));
    } else if (cols == NR && rs == 1) {
      pack_transposed<NR>(src, cs, kb, dst);
    } else {
      for (std::int64_t p = 0; p < kb; ++p) {
        for (std::int64_t j = 0; j < cols; ++j) dst[p * NR + j] = src[p * rs + j * cs];
        for (std::int64_t j = cols; j < NR; ++j) dst[p * NR + j] = 0.0f;
      }
    }
  }
}

}  // namespace fucina::kernels::gemm
