#include "fucina/quant/fp16.hpp"

namespace fucina::quant {

void fp32_to_fp16_row(const float* x, f16_bits* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void fp16_to_fp32_row(const f16_bits* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

void fp32_to_bf16_row(const float* x, bf16_bits* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

void bf16_to_fp32_row(const bf16_bits* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}

}  // namespace fucina::quant
