#pragma once
// ggml-named f16/bf16 conversions (the algorithms are in core/half.hpp, bit-exact with
// ggml; see Note [ggml half rounding] there) and row conversions.
#include <cstdint>

#include "fucina/core/half.hpp"

namespace fucina::quant {

using f16_bits = std::uint16_t;
using bf16_bits = std::uint16_t;

inline float fp16_to_fp32(f16_bits h) { return half_to_float(h); }
inline f16_bits fp32_to_fp16(float f) { return float_to_half(f); }
inline float bf16_to_fp32(bf16_bits h) { return bf16_to_float(h); }
inline bf16_bits fp32_to_bf16(float f) { return float_to_bf16(f); }

// Row conversions (n elements, any n).
void fp32_to_fp16_row(const float* x, f16_bits* y, std::int64_t n);
void fp16_to_fp32_row(const f16_bits* x, float* y, std::int64_t n);
void fp32_to_bf16_row(const float* x, bf16_bits* y, std::int64_t n);
void bf16_to_fp32_row(const bf16_bits* x, float* y, std::int64_t n);

}  // namespace fucina::quant
