// Reference encoders and decoders of the K-quant formats; see k_quants.hpp.
// Every float expression keeps ggml's operand order and association (the project builds
// with -ffp-contract=off, like ggml-base) so the output is byte-identical to
// quantize_row_*_ref; integer conversions mirror C's implicit narrowing.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "detail.hpp"
#include "fucina/kernels/arch.hpp"
#include "fucina/quant/k_quants.hpp"

#if FUCINA_ARCH_AVX512
#include <immintrin.h>
#endif

namespace fucina::quant {

using detail::fabs_bits;
using detail::nearest_int;

namespace {

constexpr float kGroupMaxEps = 1e-15f;

float fl(int v) { return static_cast<float>(v); }

// Symmetric search over 18 scale candidates, weights x^2 (ggml make_qx_quants, rmse_type 1,
// no imatrix). L receives codes offset by nmax.
float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = fabs_bits(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = fl(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<std::int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * fl(l);
    suml2 += w * fl(l) * fl(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(fl(nmax) + 0.1f * fl(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * fl(l);
      suml2 += w * fl(l) * fl(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<std::int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric 3-bit search with coordinate-descent refinement (ggml make_q3_quants, rmse).
float make_q3_quants(int n, int nmax, const float* x, std::int8_t* L) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = fabs_bits(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = fl(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<std::int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * fl(l);
    suml2 += w * fl(l) * fl(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * fl(L[i]);
      if (slx > 0) {
        float sl2 = suml2 - w * fl(L[i]) * fl(L[i]);
        int new_l = nearest_int(x[i] * sl2 / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          slx += w * x[i] * fl(new_l);
          sl2 += w * fl(new_l) * fl(new_l);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<std::int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric (scale, min) search minimising weighted error (ggml make_qkx2_quants).
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L,
                       float* the_min, std::uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = fl(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * fl(L[i]) + min - x[i];
    diff = use_mad ? fabs_bits(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * fl(is) + fl(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<std::uint8_t>(l);
      const float w = weights[i];
      sum_l += w * fl(l);
      sum_l2 += w * fl(l) * fl(l);
      sum_xl += w * fl(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * fl(Laux[i]) + this_min - x[i];
        diff = use_mad ? fabs_bits(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Q4_K/Q5_K: eight 32-element sub-blocks with 6-bit (scale, min) codes. Returns per-element
// codes in L (0..nmax) after re-deriving them from the rounded scales, like ggml.
template <class Block>
void quantize_k4_scales(const float* x, Block& y, std::uint8_t* L, int nmax, float rmin,
                        int nstep) {
  std::uint8_t Laux[32];
  float weights[32];
  float mins[8];
  float scales[8];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + fabs_bits(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    auto ls = static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j]));
    auto lm = static_cast<std::uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<std::uint8_t>(63, ls);
    lm = std::min<std::uint8_t>(63, lm);
    if (j < 4) {
      y.scales[j] = ls;
      y.scales[j + 4] = lm;
    } else {
      y.scales[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      y.scales[j - 4] |= static_cast<std::uint8_t>((ls >> 4) << 6);
      y.scales[j] |= static_cast<std::uint8_t>((lm >> 4) << 6);
    }
  }
  y.d = fp32_to_fp16(max_scale / 63.f);
  y.dmin = fp32_to_fp16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    std::uint8_t sc = 0, m = 0;
    unpack_scale_min_k4(j, y.scales, sc, m);
    const float d = fp16_to_fp32(y.d) * fl(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_fp32(y.dmin) * fl(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

void quantize_row_q2_K(const float* x, BlockQ2_K* y, std::int64_t n) {
  std::uint8_t L[kQK_K];
  std::uint8_t Laux[16];
  float weights[16];
  float mins[16];
  float scales[16];
  constexpr float q4scale = 15.f;
  for (std::int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = fabs_bits(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                   0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < 16; ++j)
        y[i].scales[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
      y[i].d = fp32_to_fp16(max_scale / q4scale);
    } else {
      for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
      y[i].d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < 16; ++j)
        y[i].scales[j] |= static_cast<std::uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y[i].dmin = fp32_to_fp16(max_min / q4scale);
    } else {
      y[i].dmin = fp32_to_fp16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * fl(y[i].scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = fp16_to_fp32(y[i].dmin) * fl(y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<std::uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    for (int j = 0; j < kQK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) |
                                                       (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
      }
    }
  }
}

void quantize_row_q3_K(const float* x, BlockQ3_K* y, std::int64_t n) {
  std::int8_t L[kQK_K];
  float scales[16];
  for (std::int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0;
    float amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
      const float scale = fabs_bits(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, 12);
    if (max_scale != 0.0f) {  // NaN counts as non-zero, as in C
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int l = static_cast<std::int8_t>(nearest_int(iscale * scales[j]));
        l = std::max(-32, std::min(31, l)) + 32;
        if (j < 8) {
          y[i].scales[j] = static_cast<std::uint8_t>(l & 0xF);
        } else {
          y[i].scales[j - 8] |= static_cast<std::uint8_t>((l & 0xF) << 4);
        }
        l >>= 4;
        y[i].scales[j % 4 + 8] |= static_cast<std::uint8_t>(l << (2 * (j / 4)));
      }
      y[i].d = fp32_to_fp16(1 / iscale);
    } else {
      y[i].d = fp32_to_fp16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * fl(unpack_scale_q3_k(j, y[i].scales));
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<std::int8_t>(std::max(-4, std::min(3, l)) + 4);
      }
    }
    std::memset(y[i].hmask, 0, 32);
    int m = 0;
    std::uint8_t hm = 1;
    for (int j = 0; j < kQK_K; ++j) {
      if (L[j] > 3) {
        y[i].hmask[m] |= hm;
        L[j] = static_cast<std::int8_t>(L[j] - 4);
      }
      if (++m == 32) {
        m = 0;
        hm = static_cast<std::uint8_t>(hm << 1);
      }
    }
    for (int j = 0; j < kQK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) |
                                                       (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
      }
    }
  }
}

void quantize_row_q4_K(const float* x, BlockQ4_K* y, std::int64_t n) {
  std::uint8_t L[kQK_K];
  for (std::int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_k4_scales(x, y[i], L, 15, -1.f, 20);
    std::uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void quantize_row_q5_K(const float* x, BlockQ5_K* y, std::int64_t n) {
  std::uint8_t L[kQK_K];
  for (std::int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_k4_scales(x, y[i], L, 31, -0.5f, 15);
    std::uint8_t* qh = y[i].qh;
    std::uint8_t* ql = y[i].qs;
    std::memset(qh, 0, 32);
    std::uint8_t m1 = 1, m2 = 2;
    for (int nn = 0; nn < kQK_K; nn += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[nn + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[nn + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<std::uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<std::uint8_t>(m1 << 2);
      m2 = static_cast<std::uint8_t>(m2 << 2);
    }
  }
}

void quantize_row_q6_K(const float* x, BlockQ6_K* y, std::int64_t n) {
  std::int8_t L[kQK_K];
  float scales[16];
  for (std::int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      const float abs_scale = fabs_bits(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib)
      y[i].scales[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * fl(y[i].scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<std::int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    std::uint8_t* ql = y[i].ql;
    std::uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l] & 0xF;
        const int q2 = L[j + l + 32] & 0xF;
        const int q3 = L[j + l + 64] & 0xF;
        const int q4 = L[j + l + 96] & 0xF;
        ql[l] = static_cast<std::uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<std::uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<std::uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                          ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

void quantize_row_q8_K(const float* x, BlockQ8_K* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max = 0;
    float amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = fabs_bits(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      // ggml leaves bsums unwritten here; zero them so the block is deterministic.
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j)
      y[i].qs[j] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
      y[i].bsums[j] = static_cast<std::int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

bool quantize_row_q8_K_simd(const float* x, BlockQ8_K* y, std::int64_t n) {
#if FUCINA_ARCH_AVX512
  const __m512 sign = _mm512_set1_ps(-0.f), magic = _mm512_set1_ps(12582912.f);
  const __m512i mantissa = _mm512_set1_epi32(0x007fffff), bias = _mm512_set1_epi32(0x00400000);
  const __m512i top = _mm512_set1_epi32(127);
  for (std::int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    // vmaxps returns its second operand when the first is NaN: NaNs are skipped, as the
    // scalar loop's `ax > amax` skips them.
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < kQK_K; j += 16) m = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), m);
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    int first = 0;  // the first element of largest magnitude, as the scalar loop keeps
    for (int j = 0; j < kQK_K; j += 16) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit != 0) {
        first = j + std::countr_zero(static_cast<unsigned>(hit));
        break;
      }
    }
    const float iscale = -127.f / x[first];
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int j = 0; j < kQK_K; j += 16) {
      // nearest_int(iscale * x): the product rounded, then the magic add rounded (no FMA).
      const __m512 v = _mm512_add_ps(_mm512_mul_ps(vs, _mm512_loadu_ps(x + j)), magic);
      const __m512i q = _mm512_min_epi32(_mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v), mantissa), bias), top);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + j), _mm512_cvtepi32_epi8(q));
      y[i].bsums[j / 16] = static_cast<std::int16_t>(_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(_mm512_cvtepi32_epi8(q))));
    }
    y[i].d = 1 / iscale;
  }
  return true;
#else
  (void)x, (void)y, (void)n;
  return false;
#endif
}

void dequantize_row_q2_K(const BlockQ2_K* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    const std::uint8_t* q = x[i].qs;
    int is = 0;
    for (int nn = 0; nn < kQK_K; nn += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const std::uint8_t sc = x[i].scales[is++];
          const float dl = d * fl(sc & 0xF);
          const float ml = min * fl(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * fl((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_row_q3_K(const BlockQ3_K* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i) {
    const float d_all = fp16_to_fp32(x[i].d);
    const std::uint8_t* q = x[i].qs;
    const std::uint8_t* hm = x[i].hmask;
    std::uint8_t m = 1;
    int is = 0;
    for (int nn = 0; nn < kQK_K; nn += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * fl(unpack_scale_q3_k(is++, x[i].scales));
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            *y++ = dl * fl(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
        m = static_cast<std::uint8_t>(m << 1);
      }
    }
  }
}

void dequantize_row_q4_K(const BlockQ4_K* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i) {
    const std::uint8_t* q = x[i].qs;
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    for (int is = 0; is < 8; is += 2, q += 32) {
      std::uint8_t sc = 0, m = 0;
      unpack_scale_min_k4(is, x[i].scales, sc, m);
      const float d1 = d * fl(sc), m1 = min * fl(m);
      unpack_scale_min_k4(is + 1, x[i].scales, sc, m);
      const float d2 = d * fl(sc), m2 = min * fl(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * fl(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * fl(q[l] >> 4) - m2;
    }
  }
}

void dequantize_row_q5_K(const BlockQ5_K* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i) {
    const std::uint8_t* ql = x[i].qs;
    const std::uint8_t* qh = x[i].qh;
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    std::uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32) {
      std::uint8_t sc = 0, m = 0;
      unpack_scale_min_k4(is, x[i].scales, sc, m);
      const float d1 = d * fl(sc), m1 = min * fl(m);
      unpack_scale_min_k4(is + 1, x[i].scales, sc, m);
      const float d2 = d * fl(sc), m2 = min * fl(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * fl((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * fl((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
      u1 = static_cast<std::uint8_t>(u1 << 2);
      u2 = static_cast<std::uint8_t>(u2 << 2);
    }
  }
}

void dequantize_row_q6_K(const BlockQ6_K* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const std::uint8_t* ql = x[i].ql;
    const std::uint8_t* qh = x[i].qh;
    const std::int8_t* sc = x[i].scales;
    for (int nn = 0; nn < kQK_K; nn += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * fl(sc[is]) * fl(q1);
        y[l + 32] = d * fl(sc[is + 2]) * fl(q2);
        y[l + 64] = d * fl(sc[is + 4]) * fl(q3);
        y[l + 96] = d * fl(sc[is + 6]) * fl(q4);
      }
    }
  }
}

void dequantize_row_q8_K(const BlockQ8_K* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i)
    for (int j = 0; j < kQK_K; ++j) *y++ = x[i].d * fl(x[i].qs[j]);
}

}  // namespace fucina::quant
