#pragma once
// Element types a tensor can store. f32 is the compute type; f16/bf16 are storage types
// (converted to f32 for math); i32 carries indices (argmax, topk, token ids).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fucina/core/half.hpp"

namespace fucina {

enum class DType : std::uint8_t { f32, f16, bf16, i32 };

constexpr std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
  }
  return "?";
}

template <DType D> struct dtype_traits;
template <> struct dtype_traits<DType::f32> { using type = float; };
template <> struct dtype_traits<DType::f16> { using type = Half; };
template <> struct dtype_traits<DType::bf16> { using type = BFloat16; };
template <> struct dtype_traits<DType::i32> { using type = std::int32_t; };
template <DType D> using element_t = typename dtype_traits<D>::type;

}  // namespace fucina
