#pragma once
// Private per-format pieces of the packed kernels (fucina/quant/packed.hpp): each format
// gives its group size, its group packer and its kernels; packed.cpp dispatches on them.
#include <cstdint>

#include "fucina/quant/packed.hpp"

namespace fucina::quant::detail {

// The Q8_0-paired activation block of the packed kernels: ggml's Q8_0 values, the scale
// widened to f32 and the block's int8 sum (which removes the weights' unsigned offset).
struct PackedActQ8 {
  float d;
  std::int32_t sum;
  std::int8_t q[32];
};
static_assert(sizeof(PackedActQ8) == 40);

struct PackedFormat {
  QuantType type;
  std::int64_t (*group_bytes)(std::int64_t cols);
  // One group from kPackRows ggml rows; rows[r] == nullptr is a padding row (all zero).
  void (*pack_group)(const std::byte* const* rows, std::int64_t cols, std::byte* dst);
  PackedKernel scalar;
  PackedKernel avx512vnni;  // nullptr when compiled out
};

const PackedFormat& packed_q8_0();
const PackedFormat& packed_q4_0();
const PackedFormat& packed_q4_K();
const PackedFormat& packed_q6_K();

}  // namespace fucina::quant::detail
