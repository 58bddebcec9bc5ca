// TQ1_0 / TQ2_0 encoders and decoders; see ternary.hpp for the packing.
#include <cmath>

#include "detail.hpp"
#include "fucina/quant/k_quants.hpp"
#include "fucina/quant/ternary.hpp"

namespace fucina::quant {

using detail::fabs_bits;

namespace {

constexpr std::uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};

float absmax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float a = fabs_bits(x[j]);
    amax = amax > a ? amax : a;
  }
  return amax;
}

// lroundf(v) + 1: the trit code 0, 1, 2 of v in [-1, 1].
int trit(float v) { return detail::trunc_to_int(std::round(v)) + 1; }

// Five (or four, pre-shifted) trits as a ceil(t * 256 / 243) fixed-point byte.
std::uint8_t pack_trits(const float* x, int stride, int count, float id) {
  std::uint8_t q = 0;
  for (int k = 0; k < count; ++k) q = static_cast<std::uint8_t>(q * 3 + trit(x[k * stride] * id));
  if (count == 4) q = static_cast<std::uint8_t>(q * 3);
  return static_cast<std::uint8_t>((static_cast<std::uint16_t>(q) * 256 + (243 - 1)) / 243);
}

int unpack_trit(std::uint8_t byte, int k) {
  const auto q = static_cast<std::uint8_t>(byte * kPow3[k]);
  return ((static_cast<std::uint16_t>(q) * 3) >> 8) - 1;
}

}  // namespace

void quantize_row_tq1_0(const float* x, BlockTQ1_0* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const float d = absmax(x, kQK_K);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int m = 0; m < 32; ++m) y[i].qs[m] = pack_trits(x + m, 32, 5, id);
    for (int m = 0; m < 16; ++m) y[i].qs[32 + m] = pack_trits(x + 160 + m, 16, 5, id);
    for (int j = 0; j < 4; ++j) y[i].qh[j] = pack_trits(x + 240 + j, 4, 4, id);
  }
}

void quantize_row_tq2_0(const float* x, BlockTQ2_0* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const float d = absmax(x, kQK_K);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 64; j += 32) {
      for (int m = 0; m < 32; ++m) {
        int q = 0;
        for (int l = 0; l < 4; ++l) q += (trit(x[4 * j + m + 32 * l] * id) & 3) << (2 * l);
        y[i].qs[j + m] = static_cast<std::uint8_t>(q);
      }
    }
  }
}

void dequantize_row_tq1_0(const BlockTQ1_0* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(unpack_trit(x[i].qs[m], k)) * d;
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 16; ++m) *y++ = static_cast<float>(unpack_trit(x[i].qs[32 + m], k)) * d;
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4; ++j) *y++ = static_cast<float>(unpack_trit(x[i].qh[j], k)) * d;
  }
}

void dequantize_row_tq2_0(const BlockTQ2_0* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 64; j += 32)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m)
          *y++ = static_cast<float>(((x[i].qs[j + m] >> (2 * l)) & 3) - 1) * d;
  }
}

}  // namespace fucina::quant
