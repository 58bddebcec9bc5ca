#pragma once
// IEEE binary16 and bfloat16 storage types and their scalar conversions, bit-exact with ggml.
//
// Note [ggml half rounding]: f32->f16 rounds to nearest even (a branch-free scale-and-add
// formulation), overflow goes to +-inf and every NaN becomes the quiet NaN 0x7E00 with the
// input's sign. f32->bf16 rounds to nearest even and forces NaNs quiet by OR-ing 0x40 into
// the truncated pattern. The reverse conversions are exact. quant/fp16.hpp builds on these.
#include <bit>
#include <cstdint>

namespace fucina {

struct Half {
  std::uint16_t bits = 0;
};
struct BFloat16 {
  std::uint16_t bits = 0;
};

constexpr float half_to_float(std::uint16_t h) {
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

constexpr std::uint16_t float_to_half(float f) {
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
  return static_cast<std::uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

constexpr float bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

constexpr std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 64u);
  return static_cast<std::uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace fucina
