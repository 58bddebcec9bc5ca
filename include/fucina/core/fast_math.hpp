#pragma once
// Branch-free float math for the deterministic noise generators (ES perturbations,
// synthetic weights): plain arithmetic, so loops over it vectorize and give the same bits
// on every machine (no libm, whose results vary by version and arch). (The exp that
// attention and SwiGLU need is ggml's own, model/ggml_math.hpp.)
#include <bit>
#include <cstdint>

namespace fucina {

// ln(x) for normal x > 0 (Cephes logf: x = m·2^e, m in [√½, √2)). |err| < 2 ulp.
inline float fast_log(float x) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  float e = static_cast<float>(static_cast<int>((b >> 23) & 0xffu) - 126);
  float m = std::bit_cast<float>((b & 0x007fffffu) | 0x3f000000u);  // [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1.f : e;
  m = low ? (m + m) - 1.f : m - 1.f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y = y + -2.12194440e-4f * e;
  y = y + -0.5f * z;
  return (m + y) + 0.693359375f * e;
}

}  // namespace fucina
