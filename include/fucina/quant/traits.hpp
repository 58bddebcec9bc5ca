#pragma once
// Traits table and row dispatchers for the ggml tensor types this module handles.
//
// Note [Type ids]: QuantType values are ggml's `enum ggml_type` ids (also the GGUF wire
// ids), so a GGUF tensor's type converts with a range-checked cast (quant_type_from_id).
#include <cstdint>
#include <optional>
#include <string_view>

namespace fucina::quant {

enum class QuantType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
};

struct TypeTraits {
  QuantType type;
  std::string_view name;       // ggml's spelling, e.g. "q4_K"
  std::int64_t block_size;     // elements per block
  std::int64_t block_bytes;    // bytes per block
  bool can_quantize;           // quantize_row supports it
  QuantType vec_dot_type;      // activation format ggml pairs it with in matmul
};

// Traits of a supported type; nullopt for ids this module does not handle.
std::optional<TypeTraits> find_type_traits(std::uint32_t ggml_id);
// Throws fucina::Error(Unsupported) for ids this module does not handle.
const TypeTraits& type_traits(QuantType type);
// Bytes of a row of n elements; throws InvalidArgument unless n is a multiple of the block.
std::int64_t row_bytes(QuantType type, std::int64_t n);

// Decode n elements (a whole number of blocks) to f32.
void dequantize_row(QuantType type, const void* src, float* dst, std::int64_t n);
// Encode n elements with ggml's reference encoder (byte-identical to llama-quantize
// without an imatrix). Q8_1 and Q8_K use their reference encoders too.
void quantize_row(QuantType type, const float* src, void* dst, std::int64_t n);
// Encode activations as ggml's CPU backend does for matmul (Q8_0, Q8_1, Q8_K only).
void quantize_row_activation(QuantType type, const float* src, void* dst, std::int64_t n);

}  // namespace fucina::quant
