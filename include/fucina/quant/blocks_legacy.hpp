#pragma once
// The 32-element ggml block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
//
// Note [Legacy block layout]: byte-for-byte the layouts of ggml-common.h. Scales are f16
// bit patterns (see fp16.hpp). In the 4/5-bit formats byte j of `qs` holds element j in
// its low nibble and element j+16 in its high nibble; Q5's 32-bit `qh` holds bit 4 of
// element j at bit j. `_0` formats are symmetric (x = d*(q-8) or d*(q-16)), `_1` formats
// carry a min (x = d*q + m). Q8_1's `s` is d*sum(qs), used by the Q4_1/Q5_1 dot.
#include <cstdint>

#include "fucina/gguf/format.hpp"
#include "fucina/quant/fp16.hpp"

namespace fucina::quant {

inline constexpr int kQK32 = 32;

struct BlockQ4_0 {
  f16_bits d;
  std::uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == gguf::type_size(gguf::GgmlType::Q4_0));

struct BlockQ4_1 {
  f16_bits d;
  f16_bits m;
  std::uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == gguf::type_size(gguf::GgmlType::Q4_1));

struct BlockQ5_0 {
  f16_bits d;
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == gguf::type_size(gguf::GgmlType::Q5_0));

struct BlockQ5_1 {
  f16_bits d;
  f16_bits m;
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == gguf::type_size(gguf::GgmlType::Q5_1));

struct BlockQ8_0 {
  f16_bits d;
  std::int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == gguf::type_size(gguf::GgmlType::Q8_0));

struct BlockQ8_1 {
  f16_bits d;
  f16_bits s;
  std::int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1) == gguf::type_size(gguf::GgmlType::Q8_1));

// Reference encoders (ggml's quantize_row_*_ref; what llama-quantize writes). n % 32 == 0.
void quantize_row_q4_0(const float* x, BlockQ4_0* y, std::int64_t n);
void quantize_row_q4_1(const float* x, BlockQ4_1* y, std::int64_t n);
void quantize_row_q5_0(const float* x, BlockQ5_0* y, std::int64_t n);
void quantize_row_q5_1(const float* x, BlockQ5_1* y, std::int64_t n);
void quantize_row_q8_0(const float* x, BlockQ8_0* y, std::int64_t n);
void quantize_row_q8_1(const float* x, BlockQ8_1* y, std::int64_t n);

// Activation encoders matching ggml's CPU backend (x86): scale by 127/amax and round half to
// even, whereas the reference encoders multiply by 1/d and round half away from zero.
void quantize_act_q8_0(const float* x, BlockQ8_0* y, std::int64_t n);
void quantize_act_q8_1(const float* x, BlockQ8_1* y, std::int64_t n);

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, std::int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, std::int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, std::int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, std::int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, std::int64_t n);
void dequantize_row_q8_1(const BlockQ8_1* x, float* y, std::int64_t n);

}  // namespace fucina::quant
