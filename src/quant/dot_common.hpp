#pragma once
// Shared float side of the dot kernels (Note [Dot determinism] in vec_dot.hpp) and the
// per-block integer unpacking used by the scalar twins.
#include <cstdint>

#include "fucina/quant/blocks_legacy.hpp"
#include "fucina/quant/iq4.hpp"
#include "fucina/quant/k_quants.hpp"
#include "fucina/quant/ternary.hpp"

namespace fucina::quant::detail {

// Eight partial sums; block b goes to lane b % 8.
struct Lanes {
  float v[8] = {};
  void add(std::int64_t b, float c) { v[b & 7] += c; }
  float reduce() const { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }
};

inline float fl(int v) { return static_cast<float>(v); }

// Per-block float contributions.
inline float scale_q8_0(f16_bits dw, f16_bits da) { return fp16_to_fp32(dw) * fp16_to_fp32(da); }
inline float contrib_sym(int isum, float scale) { return fl(isum) * scale; }
inline float contrib_q8_1(int isum, const BlockQ4_1& w, const BlockQ8_1& a) {
  return (fp16_to_fp32(w.d) * fp16_to_fp32(a.d)) * fl(isum) + fp16_to_fp32(w.m) * fp16_to_fp32(a.s);
}
inline float contrib_q8_1(int isum, const BlockQ5_1& w, const BlockQ8_1& a) {
  return (fp16_to_fp32(w.d) * fp16_to_fp32(a.d)) * fl(isum) + fp16_to_fp32(w.m) * fp16_to_fp32(a.s);
}
// K formats with mins: d*isum - dmin*summs (scales multiplied by the Q8_K f32 scale).
inline float contrib_k_min(int isum, int summs, f16_bits d, f16_bits dmin, float da) {
  return (fp16_to_fp32(d) * da) * fl(isum) - (fp16_to_fp32(dmin) * da) * fl(summs);
}
inline float contrib_k(int isum, f16_bits d, float da) { return (fp16_to_fp32(d) * da) * fl(isum); }

// Q4_K/Q5_K: the 8 sub-block scales and mins, unpacked.
inline void k4_scales(const std::uint8_t* packed, int* sc, int* mn) {
  for (int j = 0; j < 8; ++j) {
    std::uint8_t s = 0, m = 0;
    unpack_scale_min_k4(j, packed, s, m);
    sc[j] = s;
    mn[j] = m;
  }
}

// sum_j bsums[j] * mins[j / 2] (Q4_K/Q5_K) -- the mins' share of the dot.
inline int k4_min_sum(const BlockQ8_K& a, const int* mn) {
  int s = 0;
  for (int j = 0; j < 16; ++j) s += a.bsums[j] * mn[j / 2];
  return s;
}

inline int q2k_min_sum(const BlockQ2_K& w, const BlockQ8_K& a) {
  int s = 0;
  for (int j = 0; j < 16; ++j) s += a.bsums[j] * (w.scales[j] >> 4);
  return s;
}

// Signed trit values of a TQ1_0 block in element order.
inline void tq1_unpack(const BlockTQ1_0& w, std::int8_t* out) {
  constexpr std::uint8_t pow3[5] = {1, 3, 9, 27, 81};
  auto trit = [&](std::uint8_t byte, int k) {
    const auto q = static_cast<std::uint8_t>(byte * pow3[k]);
    return static_cast<std::int8_t>(((static_cast<std::uint16_t>(q) * 3) >> 8) - 1);
  };
  int e = 0;
  for (int k = 0; k < 5; ++k)
    for (int m = 0; m < 32; ++m) out[e++] = trit(w.qs[m], k);
  for (int k = 0; k < 5; ++k)
    for (int m = 0; m < 16; ++m) out[e++] = trit(w.qs[32 + m], k);
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 4; ++j) out[e++] = trit(w.qh[j], k);
}

}  // namespace fucina::quant::detail
