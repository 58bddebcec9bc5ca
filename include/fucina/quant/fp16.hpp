#pragma once
// IEEE half (f16) and bfloat16 scalar conversions, bit-exact with ggml.
//
// Note [ggml half rounding]: f32->f16 rounds to nearest even (the branch-free
// Maratyszcza algorithm ggml-base uses), overflow goes to +-inf and every NaN becomes the
// quiet NaN 0x7E00 with the input's sign (F16C hardware would keep the payload, so it is
// not used here). f32->bf16 rounds to nearest even and forces NaNs quiet by OR-ing 0x40
// into the truncated pattern. The reverse conversions are exact.
#include <bit>
#include <cstdint>

namespace fucina::quant {

using f16_bits = std::uint16_t;
using bf16_bits = std::uint16_t;

inline float fp16_to_fp32(f16_bits h) {
  const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
  const std::uint32_t sign = w & 0x80000000u;
  const std::uint32_t two_w = w + w;
  // Normals: move the exponent into place and rescale by 2^-112 (exact).
  const float normalized = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  // Subnormals: the mantissa is placed under 0.5's exponent, then 0.5 is subtracted (exact).
  const float denormalized = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const std::uint32_t result =
      sign | (two_w < (1u << 27) ? std::bit_cast<std::uint32_t>(denormalized)
                                 : std::bit_cast<std::uint32_t>(normalized));
  return std::bit_cast<float>(result);
}

inline f16_bits fp32_to_fp16(float f) {
  const float abs_f = std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) & 0x7fffffffu);
  // Scaling up then down lets the FPU do the round-to-nearest-even on the mantissa.
  float base = (abs_f * 0x1.0p+112f) * 0x1.0p-110f;
  const std::uint32_t w = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t shl1_w = w + w;
  const std::uint32_t sign = w & 0x80000000u;
  std::uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(base);
  const std::uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const std::uint32_t mantissa_bits = bits & 0x00000FFFu;
  const std::uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<f16_bits>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

inline float bf16_to_fp32(bf16_bits h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

inline bf16_bits fp32_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((u >> 16) | 64u);
  return static_cast<bf16_bits>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// Row conversions (n elements, any n).
void fp32_to_fp16_row(const float* x, f16_bits* y, std::int64_t n);
void fp16_to_fp32_row(const f16_bits* x, float* y, std::int64_t n);
void fp32_to_bf16_row(const float* x, bf16_bits* y, std::int64_t n);
void bf16_to_fp32_row(const bf16_bits* x, float* y, std::int64_t n);

}  // namespace fucina::quant
