#pragma once
// The non-linear 4-bit formats IQ4_NL (32-element blocks) and IQ4_XS (256-element
// super-blocks of eight 32-element sub-blocks with 6-bit scales).
//
// Note [IQ4 codebook]: a 4-bit index selects one of 16 fixed int8 levels
// (kIq4nlValues); x = d * level. Nibble layout as in Q4_0 (element j low, j+16 high).
// IQ4_XS sub-block ib has scale ((scales_l nibble) | (2 bits of scales_h) << 4) - 32.
#include <cstdint>

#include "fucina/gguf/format.hpp"
#include "fucina/quant/fp16.hpp"

namespace fucina::quant {

inline constexpr std::int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

struct BlockIQ4_NL {
  f16_bits d;
  std::uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == gguf::type_size(gguf::GgmlType::IQ4_NL));

struct BlockIQ4_XS {
  f16_bits d;
  std::uint16_t scales_h;
  std::uint8_t scales_l[4];
  std::uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == gguf::type_size(gguf::GgmlType::IQ4_XS));

// What llama-quantize writes without an imatrix (ggml_quantize_chunk: 7 scale trials each
// side). n % 32 == 0 (IQ4_NL) or n % 256 == 0 (IQ4_XS).
void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, std::int64_t n);
void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, std::int64_t n);
// ggml's quantize_row_iq4_nl_ref: no scale search (the CPU backend's from_float for IQ4_NL).
void quantize_row_iq4_nl_fast(const float* x, BlockIQ4_NL* y, std::int64_t n);

void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, std::int64_t n);
void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, std::int64_t n);

}  // namespace fucina::quant
