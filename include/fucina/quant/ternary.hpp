#pragma once
// Ternary formats TQ1_0 (1.6875 bpw) and TQ2_0 (2.0625 bpw), 256-element blocks of
// values in {-1, 0, +1} times an f16 scale.
//
// Note [TQ1_0 packing]: five trits per byte as a base-3 fixed-point fraction,
// byte = ceil(t * 256 / 243) with t = sum t_k 3^(4-k); trit k is recovered as
// ((uint8)(byte * 3^k) * 3) >> 8. qs[0..31] hold elements m + 32n (n=0..4) of the first
// 160, qs[32..47] elements 160 + m + 16n, qh[0..3] four trits each of the last 16
// (element 240 + j + 4m, shifted up one trit). TQ2_0: 2 bits per element, element
// 128*g + 32*l + m at bits 2l of qs[32g + m], stored as t + 1.
#include <cstdint>

#include "fucina/gguf/format.hpp"
#include "fucina/quant/fp16.hpp"

namespace fucina::quant {

struct BlockTQ1_0 {
  std::uint8_t qs[48];
  std::uint8_t qh[4];
  f16_bits d;
};
static_assert(sizeof(BlockTQ1_0) == gguf::type_size(gguf::GgmlType::TQ1_0));

struct BlockTQ2_0 {
  std::uint8_t qs[64];
  f16_bits d;
};
static_assert(sizeof(BlockTQ2_0) == gguf::type_size(gguf::GgmlType::TQ2_0));

// Reference encoders (ggml's quantize_row_tq*_ref). n % 256 == 0.
void quantize_row_tq1_0(const float* x, BlockTQ1_0* y, std::int64_t n);
void quantize_row_tq2_0(const float* x, BlockTQ2_0* y, std::int64_t n);

void dequantize_row_tq1_0(const BlockTQ1_0* x, float* y, std::int64_t n);
void dequantize_row_tq2_0(const BlockTQ2_0* x, float* y, std::int64_t n);

}  // namespace fucina::quant
