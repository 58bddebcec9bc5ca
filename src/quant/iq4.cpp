// IQ4_NL / IQ4_XS encoders and decoders; see iq4.hpp. Float expressions follow ggml's
// quantize_row_iq4_nl_impl (no imatrix) operation for operation.
#include <cstring>

#include "detail.hpp"
#include "fucina/quant/iq4.hpp"
#include "fucina/quant/k_quants.hpp"

namespace fucina::quant {

using detail::fabs_bits;
using detail::nearest_int;

namespace {

constexpr float kGroupMaxEps = 1e-15f;

float fl(int v) { return static_cast<float>(v); }

// Index of the codebook level nearest to x (ties toward the upper level).
int best_index(float x) {
  const std::int8_t* val = kIq4nlValues;
  if (x <= fl(val[0])) return 0;
  if (x >= fl(val[15])) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < fl(val[mav])) mu = mav;
    else ml = mav;
  }
  return x - fl(val[mu - 1]) < fl(val[mu]) - x ? mu - 1 : mu;
}

// One super-block of `sb` elements in 32-element sub-blocks. For IQ4_XS (sb > 32) the
// sub-block scales are re-quantized to 6 bits; ntry > 0 searches 2*ntry+1 extra scales.
void quantize_iq4_impl(int sb, const float* x, f16_bits* dh, std::uint8_t* q4,
                       std::uint16_t* scales_h, std::uint8_t* scales_l, int ntry) {
  float scales[kQK_K / 32];
  float weight[32];
  std::uint8_t L[kQK_K] = {};
  std::memset(q4, 0, static_cast<std::size_t>(sb / 2));
  *dh = fp32_to_fp16(0.f);
  const std::int8_t* values = kIq4nlValues;
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < sb / 32; ++ib) {
    const float* xb = x + ib * 32;
    std::uint8_t* Lb = L + ib * 32;
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
      const float ax = fabs_bits(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax < kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    float d = ntry > 0 ? -max / fl(values[0]) : max / fl(values[0]);
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = best_index(id * xb[j]);
      Lb[j] = static_cast<std::uint8_t>(l);
      const float q = fl(values[l]);
      sumqx += weight[j] * q * xb[j];
      sumq2 += weight[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
      id = fl(itry + values[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < 32; ++j) {
        const float q = fl(values[best_index(id * xb[j])]);
        sumqx += weight[j] * q * xb[j];
        sumq2 += weight[j] * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    const float abs_d = fabs_bits(d);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = d;
    }
  }
  if (sb > 32) {
    *scales_h = 0;
    const float d = -max_scale / 32;
    *dh = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1 / d : 0.f;
    for (int ib = 0; ib < sb / 32; ++ib) {
      int l = nearest_int(id * scales[ib]);
      l = l < -32 ? -32 : (l > 31 ? 31 : l);
      const float dl = d * fl(l);
      const float idl = dl != 0.0f ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[ib * 32 + j] = static_cast<std::uint8_t>(best_index(idl * x[ib * 32 + j]));
      l += 32;
      const auto l_l = static_cast<std::uint8_t>(l & 0xf);
      const auto l_h = static_cast<std::uint8_t>(l >> 4);
      if (ib % 2 == 0) scales_l[ib / 2] = l_l;
      else scales_l[ib / 2] |= static_cast<std::uint8_t>(l_l << 4);
      *scales_h = static_cast<std::uint16_t>(*scales_h | (l_h << 2 * (ib % 8)));
    }
  } else {
    *dh = fp32_to_fp16(scales[0]);
    if (ntry > 0) {
      const float id = scales[0] != 0.0f ? 1 / scales[0] : 0;
      for (int j = 0; j < 32; ++j) L[j] = static_cast<std::uint8_t>(best_index(id * x[j]));
    }
  }
  for (int i = 0; i < sb / 32; ++i)
    for (int j = 0; j < 16; ++j)
      q4[16 * i + j] = static_cast<std::uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

}  // namespace

void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / 32; ++i)
    quantize_iq4_impl(32, x + 32 * i, &y[i].d, y[i].qs, nullptr, nullptr, 7);
}

void quantize_row_iq4_nl_fast(const float* x, BlockIQ4_NL* y, std::int64_t n) {
  // ggml's _ref leaves the codes of an all-(near-)zero block uninitialised (stale stack);
  // here such a block gets d = 0 and all codes 0.
  for (std::int64_t i = 0; i < n / 32; ++i)
    quantize_iq4_impl(32, x + 32 * i, &y[i].d, y[i].qs, nullptr, nullptr, -1);
}

void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i)
    quantize_iq4_impl(kQK_K, x + kQK_K * i, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l, 7);
}

void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / 32; ++i, y += 32) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * fl(kIq4nlValues[x[i].qs[j] & 0xf]);
      y[j + 16] = d * fl(kIq4nlValues[x[i].qs[j] >> 4]);
    }
  }
}

void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i) {
    const std::uint8_t* qs = x[i].qs;
    const float d = fp16_to_fp32(x[i].d);
    for (int ib = 0; ib < 8; ++ib, y += 32, qs += 16) {
      const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * fl(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * fl(kIq4nlValues[qs[j] & 0xf]);
        y[j + 16] = dl * fl(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace fucina::quant
