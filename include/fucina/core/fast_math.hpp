#pragma once
// Branch-free float math shared by the deterministic noise generators (ES perturbations,
// synthetic weights): plain arithmetic, so loops over it vectorize and give the same bits
// on every machine (no libm, whose results vary by version and arch).
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

// e^x (Cephes expf: x = n·ln2 + r, |r| <= ½ln2, degree-7 polynomial in r), |err| <= 2 ulp
// for results >= FLT_MIN; subnormal results are rounded once, and x <= -104 (true result
// below half the smallest subnormal, including -inf) gives +0. Overflows to +inf above
// ~88.72; NaN stays NaN. The 2^n scale is split in two factors so n in [-150, 128] never
// leaves the normal exponent range before the last multiply.
inline float fast_exp(float x) {
  x = x < -104.f ? -104.f : x;  // NaN fails both tests and passes through
  x = x > 89.f ? 89.f : x;
  constexpr float kRound = 12582912.f;  // 1.5·2^23: adding it rounds to an integer, to even
  const float t = x * 1.44269504088896341f + kRound;
  const float n = t - kRound;
  const std::int32_t ni = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(t) - std::bit_cast<std::uint32_t>(kRound));
  float r = x - n * 0.693359375f;  // ln2 split Cody-Waite: n·0.693359375 is exact
  r = r - n * -2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r;
  y = y + 1.f;
  const std::int32_t n1 = ni >> 1, n2 = ni - n1;
  const float p1 = std::bit_cast<float>(static_cast<std::uint32_t>(n1 + 127) << 23);
  const float p2 = std::bit_cast<float>(static_cast<std::uint32_t>(n2 + 127) << 23);
  return (y * p1) * p2;
}

}  // namespace fucina
