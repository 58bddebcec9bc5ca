#pragma once
// GGUF wire format: constants, metadata value types and the ggml tensor type table.
//
// Note [GGUF layout]
// A GGUF file (v2 and v3; little-endian; no field is naturally aligned) is, in order:
//  1. magic: the 4 bytes "GGUF" (u32 0x46554747 read little-endian).
//  2. version: u32. 1 (u32 counts) is obsolete; 2 and 3 share one layout (v3 only added
//     big-endian files, which we reject: their version reads as 0x03000000).
//  3. n_tensors: u64 (written as i64 by ggml; must be >= 0).
//  4. n_kv: u64, the number of metadata key/value pairs.
//  5. n_kv pairs, each: key (string), value type (u32, ValueType), payload.
//     - string: u64 byte length, then that many bytes (UTF-8, no terminator).
//     - scalar payloads: the value in its natural width (bool is 1 byte).
//     - array payload: element type (u32), element count (u64), then the elements'
//       payloads back to back. An array of arrays nests this recursively.
//     Keys are unique and non-empty; llama.cpp keeps them in file order.
//  6. n_tensors tensor infos, each: name (string), n_dims (u32, <= 4), n_dims dims as
//     u64/i64 in ggml order (ne[0] is the contiguous row length), ggml type (u32, GgmlType),
//     offset (u64) of the tensor's bytes relative to the start of the data section.
//  7. zero padding up to the next multiple of the alignment, measured from the file start.
//     The alignment is metadata key "general.alignment" (u32, power of two), default 32.
//  8. data section: each tensor's bytes at its offset; ne[0] must be a multiple of the type's
//     block size and a tensor holds (n_elements / block_size) * type_size bytes. ggml writes
//     the tensors back to back in info order, each one (the last included) zero-padded to the
//     alignment, so offset[i] is the padded running total.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fucina::gguf {

inline constexpr std::array<char, 4> gguf_magic = {'G', 'G', 'U', 'F'};
inline constexpr std::uint32_t gguf_version_min = 2;
inline constexpr std::uint32_t gguf_version_max = 3;
inline constexpr std::uint32_t default_alignment = 32;
inline constexpr std::string_view alignment_key = "general.alignment";
inline constexpr std::uint32_t max_dims = 4;

// Metadata value types (wire ids).
enum class ValueType : std::uint32_t {
  Uint8 = 0,
  Int8 = 1,
  Uint16 = 2,
  Int16 = 3,
  Uint32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  Uint64 = 10,
  Int64 = 11,
  Float64 = 12,
};
inline constexpr std::uint32_t value_type_count = 13;

constexpr bool is_valid_value_type(std::uint32_t id) { return id < value_type_count; }

// Short names as llama.cpp's gguf dump prints them ("u32", "str", "arr", ...).
constexpr std::string_view to_string(ValueType t) {
  switch (t) {
    case ValueType::Uint8: return "u8";
    case ValueType::Int8: return "i8";
    case ValueType::Uint16: return "u16";
    case ValueType::Int16: return "i16";
    case ValueType::Uint32: return "u32";
    case ValueType::Int32: return "i32";
    case ValueType::Float32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "str";
    case ValueType::Array: return "arr";
    case ValueType::Uint64: return "u64";
    case ValueType::Int64: return "i64";
    case ValueType::Float64: return "f64";
  }
  return "?";
}

// Payload size of a fixed-size type; 0 for String and Array (variable length).
constexpr std::uint32_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::Uint8:
    case ValueType::Int8:
    case ValueType::Bool: return 1;
    case ValueType::Uint16:
    case ValueType::Int16: return 2;
    case ValueType::Uint32:
    case ValueType::Int32:
    case ValueType::Float32: return 4;
    case ValueType::Uint64:
    case ValueType::Int64:
    case ValueType::Float64: return 8;
    case ValueType::String:
    case ValueType::Array: return 0;
  }
  return 0;
}

constexpr bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::Uint8:
    case ValueType::Int8:
    case ValueType::Uint16:
    case ValueType::Int16:
    case ValueType::Uint32:
    case ValueType::Int32:
    case ValueType::Uint64:
    case ValueType::Int64: return true;
    default: return false;
  }
}

// The C++ type whose ValueType is exact: value_type_of<float> == Float32.
template <class T>
struct ValueTypeOf;
template <> struct ValueTypeOf<std::uint8_t> { static constexpr ValueType value = ValueType::Uint8; };
template <> struct ValueTypeOf<std::int8_t> { static constexpr ValueType value = ValueType::Int8; };
template <> struct ValueTypeOf<std::uint16_t> { static constexpr ValueType value = ValueType::Uint16; };
template <> struct ValueTypeOf<std::int16_t> { static constexpr ValueType value = ValueType::Int16; };
template <> struct ValueTypeOf<std::uint32_t> { static constexpr ValueType value = ValueType::Uint32; };
template <> struct ValueTypeOf<std::int32_t> { static constexpr ValueType value = ValueType::Int32; };
template <> struct ValueTypeOf<float> { static constexpr ValueType value = ValueType::Float32; };
template <> struct ValueTypeOf<bool> { static constexpr ValueType value = ValueType::Bool; };
template <> struct ValueTypeOf<std::uint64_t> { static constexpr ValueType value = ValueType::Uint64; };
template <> struct ValueTypeOf<std::int64_t> { static constexpr ValueType value = ValueType::Int64; };
template <> struct ValueTypeOf<double> { static constexpr ValueType value = ValueType::Float64; };

template <class T>
concept ScalarValue = requires { ValueTypeOf<T>::value; };

template <ScalarValue T>
inline constexpr ValueType value_type_of = ValueTypeOf<T>::value;

// ggml tensor types (wire ids, = ggml's enum ggml_type). Gaps are ids ggml removed
// (4, 5: Q4_2/Q4_3; 31-33: Q4_0_4_4/4_8/8_8; 36-38: IQ4_NL_4_4/4_8/8_8); files using them are
// rejected. The Zig Fucina used the private id 43 for tq2_0_fx4; we do not accept it.
enum class GgmlType : std::uint32_t {
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
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};
inline constexpr std::uint32_t ggml_type_count = 43;  // one past the largest id

// One row of the type table. A tensor of n elements (n a multiple of block_size) takes
// n / block_size * type_size bytes. name is ggml's ggml_type_name().
struct TypeTraits {
  std::string_view name;
  std::uint32_t block_size = 0;  // elements per block; 0 marks a removed/unused id
  std::uint32_t type_size = 0;   // bytes per block
  bool quantized = false;        // block-quantized (not a plain int/float element type)
};

namespace detail {
inline constexpr std::uint32_t qk_k = 256;  // super-block size of the K, IQ and TQ formats

constexpr std::array<TypeTraits, ggml_type_count> make_type_table() {
  std::array<TypeTraits, ggml_type_count> t{};
  auto plain = [&](GgmlType id, std::string_view name, std::uint32_t size) {
    t[static_cast<std::uint32_t>(id)] = {name, 1, size, false};
  };
  auto block = [&](GgmlType id, std::string_view name, std::uint32_t blck, std::uint32_t size) {
    t[static_cast<std::uint32_t>(id)] = {name, blck, size, true};
  };
  // Sizes follow the block layouts of ggml-common.h (f16 scales are 2 bytes).
  plain(GgmlType::F32, "f32", 4);
  plain(GgmlType::F16, "f16", 2);
  block(GgmlType::Q4_0, "q4_0", 32, 2 + 16);
  block(GgmlType::Q4_1, "q4_1", 32, 2 + 2 + 16);
  block(GgmlType::Q5_0, "q5_0", 32, 2 + 4 + 16);
  block(GgmlType::Q5_1, "q5_1", 32, 2 + 2 + 4 + 16);
  block(GgmlType::Q8_0, "q8_0", 32, 2 + 32);
  block(GgmlType::Q8_1, "q8_1", 32, 2 + 2 + 32);
  block(GgmlType::Q2_K, "q2_K", qk_k, 2 + 2 + qk_k / 16 + qk_k / 4);
  block(GgmlType::Q3_K, "q3_K", qk_k, 2 + qk_k / 4 + qk_k / 8 + 12);
  block(GgmlType::Q4_K, "q4_K", qk_k, 2 + 2 + 12 + qk_k / 2);
  block(GgmlType::Q5_K, "q5_K", qk_k, 2 + 2 + 12 + qk_k / 2 + qk_k / 8);
  block(GgmlType::Q6_K, "q6_K", qk_k, 2 + qk_k / 16 + 3 * qk_k / 4);
  block(GgmlType::Q8_K, "q8_K", qk_k, 4 + qk_k + qk_k / 16 * 2);
  block(GgmlType::IQ2_XXS, "iq2_xxs", qk_k, 2 + qk_k / 8 * 2);
  block(GgmlType::IQ2_XS, "iq2_xs", qk_k, 2 + qk_k / 8 * 2 + qk_k / 32);
  block(GgmlType::IQ3_XXS, "iq3_xxs", qk_k, 2 + 3 * (qk_k / 8));
  block(GgmlType::IQ1_S, "iq1_s", qk_k, 2 + qk_k / 8 + qk_k / 16);
  block(GgmlType::IQ4_NL, "iq4_nl", 32, 2 + 16);
  block(GgmlType::IQ3_S, "iq3_s", qk_k, 2 + 13 * (qk_k / 32) + 4);
  block(GgmlType::IQ2_S, "iq2_s", qk_k, 2 + qk_k / 4 + qk_k / 16);
  block(GgmlType::IQ4_XS, "iq4_xs", qk_k, 2 + 2 + qk_k / 64 + qk_k / 2);
  plain(GgmlType::I8, "i8", 1);
  plain(GgmlType::I16, "i16", 2);
  plain(GgmlType::I32, "i32", 4);
  plain(GgmlType::I64, "i64", 8);
  plain(GgmlType::F64, "f64", 8);
  block(GgmlType::IQ1_M, "iq1_m", qk_k, qk_k / 8 + qk_k / 16 + qk_k / 32);
  plain(GgmlType::BF16, "bf16", 2);
  block(GgmlType::TQ1_0, "tq1_0", qk_k, 2 + qk_k / 64 + (qk_k - 4 * qk_k / 64) / 5);
  block(GgmlType::TQ2_0, "tq2_0", qk_k, 2 + qk_k / 4);
  block(GgmlType::MXFP4, "mxfp4", 32, 1 + 16);
  block(GgmlType::NVFP4, "nvfp4", 64, 4 + 32);
  block(GgmlType::Q1_0, "q1_0", 128, 2 + 128 / 8);
  block(GgmlType::Q2_0, "q2_0", 64, 2 + 64 / 4);
  return t;
}
}  // namespace detail

// Indexed by wire id; rows of removed ids have block_size == 0.
inline constexpr std::array<TypeTraits, ggml_type_count> ggml_type_table = detail::make_type_table();

constexpr bool is_valid_ggml_type(std::uint32_t id) {
  return id < ggml_type_count && ggml_type_table[id].block_size != 0;
}

// Traits of a known type (precondition: a GgmlType enumerator).
constexpr const TypeTraits& type_traits(GgmlType t) {
  return ggml_type_table[static_cast<std::uint32_t>(t)];
}
constexpr std::string_view to_string(GgmlType t) {
  return is_valid_ggml_type(static_cast<std::uint32_t>(t)) ? type_traits(t).name : "?";
}
constexpr std::uint32_t block_size(GgmlType t) { return type_traits(t).block_size; }
constexpr std::uint32_t type_size(GgmlType t) { return type_traits(t).type_size; }

// Parses ggml's type name ("q4_K", "bf16"); nullopt when unknown.
constexpr std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (std::uint32_t id = 0; id < ggml_type_count; ++id)
    if (is_valid_ggml_type(id) && ggml_type_table[id].name == name) return static_cast<GgmlType>(id);
  return std::nullopt;
}

// Bytes of one row of n elements, as ggml_row_size (precondition: n % block_size == 0, no
// overflow). quant::row_bytes is the checked form for the types quant/ decodes.
constexpr std::uint64_t row_size(GgmlType t, std::uint64_t n) {
  return n / block_size(t) * type_size(t);
}

static_assert(type_size(GgmlType::Q4_K) == 144 && type_size(GgmlType::Q6_K) == 210);
static_assert(type_size(GgmlType::Q8_K) == 292 && type_size(GgmlType::TQ1_0) == 54);

}  // namespace fucina::gguf
