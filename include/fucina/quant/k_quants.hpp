#pragma once
// The 256-element "K" super-block formats: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K.
//
// Note [K-quant layout]: byte-for-byte ggml-common.h. Q4_K/Q5_K pack 8 (scale, min) pairs
// of 6 bits into 12 bytes (`unpack_scale_min_k4`); Q3_K packs 16 signed 6-bit scales
// (offset 32) into 12 bytes; Q2_K keeps (scale | min<<4) per 16 elements; Q6_K has int8
// scales per 16. Q8_K (activations only) carries an f32 scale and per-16 sums `bsums`
// that fold the mins into the dot products.
#include <cstdint>

#include "fucina/gguf/format.hpp"
#include "fucina/quant/fp16.hpp"

namespace fucina::quant {

inline constexpr int kQK_K = 256;

struct BlockQ2_K {
  std::uint8_t scales[16];
  std::uint8_t qs[64];
  f16_bits d;
  f16_bits dmin;
};
static_assert(sizeof(BlockQ2_K) == gguf::type_size(gguf::GgmlType::Q2_K));

struct BlockQ3_K {
  std::uint8_t hmask[32];
  std::uint8_t qs[64];
  std::uint8_t scales[12];
  f16_bits d;
};
static_assert(sizeof(BlockQ3_K) == gguf::type_size(gguf::GgmlType::Q3_K));

struct BlockQ4_K {
  f16_bits d;
  f16_bits dmin;
  std::uint8_t scales[12];
  std::uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == gguf::type_size(gguf::GgmlType::Q4_K));

struct BlockQ5_K {
  f16_bits d;
  f16_bits dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[32];
  std::uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == gguf::type_size(gguf::GgmlType::Q5_K));

struct BlockQ6_K {
  std::uint8_t ql[128];
  std::uint8_t qh[64];
  std::int8_t scales[16];
  f16_bits d;
};
static_assert(sizeof(BlockQ6_K) == gguf::type_size(gguf::GgmlType::Q6_K));

struct BlockQ8_K {
  float d;
  std::int8_t qs[256];
  std::int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_K) == gguf::type_size(gguf::GgmlType::Q8_K));

// Sub-block j (0..7) 6-bit scale and min of a Q4_K/Q5_K block.
inline void unpack_scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& sc, std::uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Sub-block j (0..15) signed scale of a Q3_K block, in [-32, 31].
inline int unpack_scale_q3_k(int j, const std::uint8_t* s) {
  const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Reference encoders (ggml's quantize_row_*_ref without importance matrix). n % 256 == 0.
void quantize_row_q2_K(const float* x, BlockQ2_K* y, std::int64_t n);
void quantize_row_q3_K(const float* x, BlockQ3_K* y, std::int64_t n);
void quantize_row_q4_K(const float* x, BlockQ4_K* y, std::int64_t n);
void quantize_row_q5_K(const float* x, BlockQ5_K* y, std::int64_t n);
void quantize_row_q6_K(const float* x, BlockQ6_K* y, std::int64_t n);
// Q8_K is also what ggml's CPU backend uses for activations.
void quantize_row_q8_K(const float* x, BlockQ8_K* y, std::int64_t n);
// Its AVX-512 twin, bit-identical (same roundings, the first largest magnitude picked as
// max); false when this build has no such arm. Activations go through it: a batched decode
// step quantizes every row before each of its ~200 products.
bool quantize_row_q8_K_simd(const float* x, BlockQ8_K* y, std::int64_t n);

void dequantize_row_q2_K(const BlockQ2_K* x, float* y, std::int64_t n);
void dequantize_row_q3_K(const BlockQ3_K* x, float* y, std::int64_t n);
void dequantize_row_q4_K(const BlockQ4_K* x, float* y, std::int64_t n);
void dequantize_row_q5_K(const BlockQ5_K* x, float* y, std::int64_t n);
void dequantize_row_q6_K(const BlockQ6_K* x, float* y, std::int64_t n);
void dequantize_row_q8_K(const BlockQ8_K* x, float* y, std::int64_t n);

}  // namespace fucina::quant
