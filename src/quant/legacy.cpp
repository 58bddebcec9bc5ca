// Encoders and decoders of the 32-element formats; see blocks_legacy.hpp.
// The float expressions keep ggml's operand order so results are bit-identical.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "detail.hpp"
#include "fucina/quant/blocks_legacy.hpp"

namespace fucina::quant {

using detail::fabs_bits;
using detail::trunc_to_int;

namespace {

// Signed value of largest magnitude (first one wins ties), as the symmetric formats use.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < fabs_bits(x[j])) {
      amax = fabs_bits(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, int n, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

float absmax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float a = fabs_bits(x[j]);
    amax = amax > a ? amax : a;
  }
  return amax;
}

// (int8_t)v as C performs it on x86, then MIN(hi, .) and the store into a uint8_t.
std::uint8_t clamp_code(float v, int hi) {
  const auto q = static_cast<std::int8_t>(trunc_to_int(v));
  return static_cast<std::uint8_t>(std::min(hi, static_cast<int>(q)));
}

std::int8_t round_away(float v) {
  return static_cast<std::int8_t>(trunc_to_int(std::round(v)));
}

}  // namespace

void quantize_row_q4_0(const float* x, BlockQ4_0* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    const float max = signed_absmax(x, kQK32);
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const std::uint8_t lo = clamp_code(x[j] * id + 8.5f, 15);
      const std::uint8_t hi = clamp_code(x[j + 16] * id + 8.5f, 15);
      y[i].qs[j] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_q4_1(const float* x, BlockQ4_1* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    float min = 0.0f, max = 0.0f;
    min_max(x, kQK32, min, max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < 16; ++j) {
      const std::uint8_t lo = clamp_code((x[j] - min) * id + 0.5f, 15);
      const std::uint8_t hi = clamp_code((x[j + 16] - min) * id + 0.5f, 15);
      y[i].qs[j] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_q5_0(const float* x, BlockQ5_0* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    const float max = signed_absmax(x, kQK32);
    const float d = max / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    std::uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const std::uint8_t lo = clamp_code(x[j] * id + 16.5f, 31);
      const std::uint8_t hi = clamp_code(x[j + 16] * id + 16.5f, 31);
      y[i].qs[j] = static_cast<std::uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh |= ((lo & 0x10u) >> 4) << j;
      qh |= ((hi & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quantize_row_q5_1(const float* x, BlockQ5_1* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    float min = 0.0f, max = 0.0f;
    min_max(x, kQK32, min, max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    std::uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      // ggml converts straight to uint8_t here (no MIN): same truncation, low byte kept.
      const auto lo = static_cast<std::uint8_t>(trunc_to_int((x[j] - min) * id + 0.5f));
      const auto hi = static_cast<std::uint8_t>(trunc_to_int((x[j + 16] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<std::uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh |= ((lo & 0x10u) >> 4) << j;
      qh |= ((hi & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quantize_row_q8_0(const float* x, BlockQ8_0* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    const float d = absmax(x, kQK32) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK32; ++j) y[i].qs[j] = round_away(x[j] * id);
  }
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    const float d = absmax(x, kQK32) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK32; ++j) {
      y[i].qs[j] = round_away(x[j] * id);
      sum += y[i].qs[j];
    }
    y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

namespace {

// The CPU backend's activation rounding: x*(127/amax), round half to even, saturate.
int act_round(float v) {
  const float r = std::nearbyint(v);
  if (!(r > -2147483904.0f && r < 2147483648.0f)) return INT_MIN;  // cvtps_epi32's overflow
  return static_cast<int>(r);
}

std::int8_t saturate_i8(int v) { return static_cast<std::int8_t>(std::clamp(v, -128, 127)); }

}  // namespace

void quantize_act_q8_0(const float* x, BlockQ8_0* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    const float amax = absmax(x, kQK32);
    y[i].d = fp32_to_fp16(amax / 127.f);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    for (int j = 0; j < kQK32; ++j) y[i].qs[j] = saturate_i8(act_round(x[j] * id));
  }
}

void quantize_act_q8_1(const float* x, BlockQ8_1* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    const float amax = absmax(x, kQK32);
    const float d = amax / 127.f;
    y[i].d = fp32_to_fp16(d);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    // ggml sums the int32 values before they saturate to int8, with wrapping vector adds
    // (only non-finite input, converted to INT_MIN, can wrap).
    std::uint32_t sum = 0;
    for (int j = 0; j < kQK32; ++j) {
      const int q = act_round(x[j] * id);
      sum += static_cast<std::uint32_t>(q);
      y[i].qs[j] = saturate_i8(q);
    }
    y[i].s = fp32_to_fp16(d * static_cast<float>(static_cast<std::int32_t>(sum)));
  }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, y += kQK32) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, y += kQK32) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
      y[j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

namespace {
int q5_high(std::uint32_t qh, int j) { return static_cast<int>(((qh >> j) << 4) & 0x10); }
}  // namespace

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, y += kQK32) {
    const float d = fp16_to_fp32(x[i].d);
    std::uint32_t qh = 0;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(((x[i].qs[j] & 0x0F) | q5_high(qh, j)) - 16) * d;
      y[j + 16] = static_cast<float>(((x[i].qs[j] >> 4) | q5_high(qh, j + 16)) - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, y += kQK32) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    std::uint32_t qh = 0;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) | q5_high(qh, j)) * d + m;
      y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) | q5_high(qh, j + 16)) * d + m;
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, y += kQK32) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK32; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void dequantize_row_q8_1(const BlockQ8_1* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK32; ++i, y += kQK32) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK32; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

}  // namespace fucina::quant
