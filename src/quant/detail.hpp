#pragma once
// Private helpers shared by the encoders in src/quant (not installed API).
#include <bit>
#include <climits>
#include <cstdint>
#include <cstring>

namespace fucina::quant::detail {

// ggml's nearest_int: round-to-nearest-even through the 1.5*2^23 magic constant. Only
// meaningful for |x| < 2^22; outside it returns the same bit garbage ggml does.
inline int nearest_int(float x) {
  const float v = x + 12582912.f;
  const std::uint32_t i = std::bit_cast<std::uint32_t>(v);
  return static_cast<int>(i & 0x007fffffu) - 0x00400000;
}

// C's float -> integer conversion as x86 cvttss2si performs it (truncation; NaN and
// out-of-range give INT_MIN), without the C++ undefined behaviour.
inline int trunc_to_int(float x) {
  if (!(x > -2147483904.0f && x < 2147483648.0f)) return INT_MIN;
  return static_cast<int>(x);
}

inline float fabs_bits(float x) {
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) & 0x7fffffffu);
}

}  // namespace fucina::quant::detail
