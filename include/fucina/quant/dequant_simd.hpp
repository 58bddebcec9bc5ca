#pragma once
// SIMD decoders for the formats prompt processing decodes most (Q8_0, Q4_0, Q4_K, Q6_K):
// the blocked GEMM decodes every weight once per product (Note [Quantized GEMM]). Each
// computes exactly the scalar twin's arithmetic (same operations, same order, no fused
// multiply-add), so the outputs are bit-identical; tests compare them.
#include <cstdint>

#include "fucina/quant/traits.hpp"

namespace fucina::quant {

// Decodes n elements with a SIMD arm; false when this build has none for `type`.
// dequantize_row tries this first; tests compare it with the per-format scalar decoders.
bool dequantize_row_simd(QuantType type, const void* src, float* dst, std::int64_t n);

}  // namespace fucina::quant
