#pragma once
// Branch-free float math shared by the deterministic noise generators (ES perturbations,
// synthetic weights) and prefill attention's softmax: plain arithmetic, so loops over it
// vectorize and give the same bits on every machine (no libm, whose results vary by
// version and arch).
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
//
// One body for every lane width: `L` supplies the float (L::F) and int32 (L::I) lane
// operations, so a SIMD instantiation (prefill attention's 16 lanes) runs the same
// operations in the same order as the scalar fast_exp and gives the same bits. L::max(a, b)
// and L::min(a, b) are a > b ? a : b and a < b ? a : b (NaN in b passes, as x86's max/min).
template <class L>
typename L::F fast_exp_lanes(typename L::F x) {
  using F = typename L::F;
  x = L::max(L::set(-104.f), x);
  x = L::min(L::set(89.f), x);
  const F round = L::set(12582912.f);  // 1.5·2^23: adding it rounds to an integer, to even
  const F t = L::add(L::mul(x, L::set(1.44269504088896341f)), round);
  const F n = L::sub(t, round);
  const typename L::I ni = L::isub(L::bits(t), L::bits(round));
  F r = L::sub(x, L::mul(n, L::set(0.693359375f)));  // ln2 split Cody-Waite: n·0.693359375 is exact
  r = L::sub(r, L::mul(n, L::set(-2.12194440e-4f)));
  F y = L::set(1.9875691500e-4f);
  y = L::add(L::mul(y, r), L::set(1.3981999507e-3f));
  y = L::add(L::mul(y, r), L::set(8.3334519073e-3f));
  y = L::add(L::mul(y, r), L::set(4.1665795894e-2f));
  y = L::add(L::mul(y, r), L::set(1.6666665459e-1f));
  y = L::add(L::mul(y, r), L::set(5.0000001201e-1f));
  y = L::add(L::mul(y, L::mul(r, r)), r);
  y = L::add(y, L::set(1.f));
  const typename L::I n1 = L::sra1(ni), n2 = L::isub(ni, n1);
  return L::mul(L::mul(y, L::pow2(n1)), L::pow2(n2));
}

// The scalar lane type of fast_exp_lanes.
struct ScalarLanes {
  using F = float;
  using I = std::int32_t;
  static F set(float v) { return v; }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F max(F a, F b) { return a > b ? a : b; }
  static F min(F a, F b) { return a < b ? a : b; }
  static I bits(F a) { return std::bit_cast<I>(a); }
  static I isub(I a, I b) { return a - b; }
  static I sra1(I a) { return a >> 1; }
  static F pow2(I n) { return std::bit_cast<F>(static_cast<std::uint32_t>(n + 127) << 23); }  // 2^n, n normal
};

inline float fast_exp(float x) { return fast_exp_lanes<ScalarLanes>(x); }

}  // namespace fucina
