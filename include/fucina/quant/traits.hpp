#pragma once
// Row dispatchers for the ggml tensor types this module handles, and what it knows of
// each beyond the file format.
//
// Note [Type ids]: QuantType is the GGUF module's GgmlType (ggml's `enum ggml_type`, also
// the GGUF wire ids): one table (gguf/format.hpp) gives each type its id, name and block
// layout; this module adds which ones it decodes and their matmul activation format.
#include <cstdint>
#include <optional>
#include <string_view>

#include "fucina/gguf/format.hpp"

namespace fucina::quant {

using QuantType = gguf::GgmlType;

struct CodecTraits {
  QuantType type;
  std::string_view name;       // ggml's spelling, e.g. "q4_K" (from gguf::ggml_type_table)
  std::int64_t block_size;     // elements per block (from gguf::ggml_type_table)
  std::int64_t block_bytes;    // bytes per block (from gguf::ggml_type_table)
  bool can_quantize;           // quantize_row supports it
  QuantType vec_dot_type;      // activation format ggml pairs it with in matmul
};

// Traits of a supported type; nullopt for ids this module does not handle.
std::optional<CodecTraits> find_codec_traits(std::uint32_t ggml_id);
// Throws fucina::Error(Unsupported) for ids this module does not handle.
const CodecTraits& codec_traits(QuantType type);
// Bytes of a row of n elements (gguf::row_size); throws InvalidArgument unless n is a
// multiple of the block.
std::int64_t row_bytes(QuantType type, std::int64_t n);

// Decode n elements (a whole number of blocks) to f32.
void dequantize_row(QuantType type, const void* src, float* dst, std::int64_t n);
// Encode n elements with ggml's reference encoder (byte-identical to llama-quantize
// without an imatrix). Q8_1 and Q8_K use their reference encoders too.
void quantize_row(QuantType type, const float* src, void* dst, std::int64_t n);
// Encode activations as ggml's CPU backend does for matmul (Q8_0, Q8_1, Q8_K only).
void quantize_row_activation(QuantType type, const float* src, void* dst, std::int64_t n);

}  // namespace fucina::quant
