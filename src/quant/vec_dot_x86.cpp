// AVX2 and AVX512-VNNI arms of the dot kernels. Both arms share these templates and differ
// only in the u8 x s8 -> int32 primitive (vpmaddubsw + vpmaddwd vs vpdpbusd); the float
// side is the fixed order of Note [Dot determinism], so results equal the scalar twins.
#include "vec_dot_arms.hpp"

#include "fucina/kernels/arch.hpp"

#if FUCINA_ARCH_AVX2
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "dot_common.hpp"
#endif

namespace fucina::quant::detail {

#if FUCINA_ARCH_AVX2
namespace {

// u8 x s8 products summed in groups of 4 into int32 lanes (lane i <- bytes 4i..4i+3).
struct Avx2Ops {
  static __m256i dot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
  // As dot, times `lo` for bytes 0..15 and `hi` for bytes 16..31 (exact: pairs fit int16).
  static __m256i dot_scaled(__m256i u, __m256i s, int lo, int hi) {
    const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(hi)),
                                        _mm_set1_epi16(static_cast<short>(lo)));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc);
  }
};

#if FUCINA_ARCH_AVX512VNNI
struct VnniOps {
  static __m256i dot(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
  static __m256i dot_scaled(__m256i u, __m256i s, int lo, int hi) {
    return _mm256_mullo_epi32(dot(u, s), _mm256_set_m128i(_mm_set1_epi32(hi), _mm_set1_epi32(lo)));
  }
};
#endif

// Signed x signed via |x| and sign(y, x).
template <class P>
__m256i dot_ss(__m256i x, __m256i y) {
  return P::dot(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}
template <class P>
__m256i dot_ss_scaled(__m256i x, __m256i y, int lo, int hi) {
  return P::dot_scaled(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x), lo, hi);
}

__m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

int hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Lane k of the result = sum of the lanes of v[k].
__m256i transpose_sum8(const __m256i* v) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]);
  const __m256i h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]);
  const __m256i h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23);
  const __m256i b = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// 16 packed nibbles -> 32 bytes: low nibbles (elements 0..15), then high (16..31).
__m256i nibbles32(const std::uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

// Byte i = 0x10 if bit i of the 32-bit little-endian word at qh is set, else 0.
__m256i high_bits32(const std::uint8_t* qh) {
  std::uint32_t x = 0;
  std::memcpy(&x, qh, 4);
  const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  __m256i bytes = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(x)),
      _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll, 0x0303030303030303ll));
  bytes = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, sel), sel);
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x10));
}

__m256i iq4_table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
}

// Eight f16 fields, one per block at a fixed stride, as f32 (built in registers: eight
// 2-byte stores reloaded as one vector would stall store forwarding).
template <class Block, class Field>
__m256 f16x8(const Block* blk, Field field) {
  return _mm256_cvtph_ps(_mm_set_epi16(
      static_cast<short>(field(blk[7])), static_cast<short>(field(blk[6])), static_cast<short>(field(blk[5])),
      static_cast<short>(field(blk[4])), static_cast<short>(field(blk[3])), static_cast<short>(field(blk[2])),
      static_cast<short>(field(blk[1])), static_cast<short>(field(blk[0]))));
}

// Driver for the 32-element formats: eight blocks per step, integer sums transposed into
// one vector, float side vectorised lane-for-lane like the scalar twin.
template <class W, class A, class IntFn, class ScaleFn, class ContribFn>
float dot_blocks32(std::int64_t n, const W* w, const A* a, IntFn block_int, ScaleFn scales8,
                   ContribFn contrib) {
  const std::int64_t nb = n / 32;
  Lanes acc;
  __m256 vacc = _mm256_setzero_ps();
  std::int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    __m256i v[8];
    for (int k = 0; k < 8; ++k) v[k] = block_int(w[b + k], a[b + k]);
    vacc = _mm256_add_ps(vacc, scales8(_mm256_cvtepi32_ps(transpose_sum8(v)), w + b, a + b));
  }
  _mm256_storeu_ps(acc.v, vacc);
  for (; b < nb; ++b) acc.add(b, contrib(hsum(block_int(w[b], a[b])), w[b], a[b]));
  return acc.reduce();
}

// fl(isum) * (d_w * d_a) on eight blocks at once.
template <class W>
__m256 sym_scales8(__m256 isum, const W* w, const BlockQ8_0* a) {
  const __m256 dw = f16x8(w, [](const W& b) { return b.d; });
  const __m256 da = f16x8(a, [](const BlockQ8_0& b) { return b.d; });
  return _mm256_mul_ps(isum, _mm256_mul_ps(dw, da));
}

// (d_w * d_a) * fl(isum) + m_w * s_a on eight blocks at once.
template <class W>
__m256 min_scales8(__m256 isum, const W* w, const BlockQ8_1* a) {
  const __m256 dw = f16x8(w, [](const W& b) { return b.d; });
  const __m256 da = f16x8(a, [](const BlockQ8_1& b) { return b.d; });
  const __m256 mw = f16x8(w, [](const W& b) { return b.m; });
  const __m256 sa = f16x8(a, [](const BlockQ8_1& b) { return b.s; });
  return _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(dw, da), isum), _mm256_mul_ps(mw, sa));
}

template <class W>
float sym_contrib(int isum, const W& w, const BlockQ8_0& a) {
  return contrib_sym(isum, scale_q8_0(w.d, a.d));
}

template <class P>
float dot_q8_0(std::int64_t n, const void* wp, const void* ap) {
  return dot_blocks32(
      n, static_cast<const BlockQ8_0*>(wp), static_cast<const BlockQ8_0*>(ap),
      [](const BlockQ8_0& w, const BlockQ8_0& a) { return dot_ss<P>(load32(w.qs), load32(a.qs)); },
      sym_scales8<BlockQ8_0>, sym_contrib<BlockQ8_0>);
}

template <class P>
float dot_q4_0(std::int64_t n, const void* wp, const void* ap) {
  return dot_blocks32(
      n, static_cast<const BlockQ4_0*>(wp), static_cast<const BlockQ8_0*>(ap),
      [](const BlockQ4_0& w, const BlockQ8_0& a) {
        return dot_ss<P>(_mm256_sub_epi8(nibbles32(w.qs), _mm256_set1_epi8(8)), load32(a.qs));
      },
      sym_scales8<BlockQ4_0>, sym_contrib<BlockQ4_0>);
}

template <class P>
float dot_q5_0(std::int64_t n, const void* wp, const void* ap) {
  return dot_blocks32(
      n, static_cast<const BlockQ5_0*>(wp), static_cast<const BlockQ8_0*>(ap),
      [](const BlockQ5_0& w, const BlockQ8_0& a) {
        const __m256i q = _mm256_or_si256(nibbles32(w.qs), high_bits32(w.qh));
        return dot_ss<P>(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), load32(a.qs));
      },
      sym_scales8<BlockQ5_0>, sym_contrib<BlockQ5_0>);
}

template <class P>
float dot_iq4_nl(std::int64_t n, const void* wp, const void* ap) {
  const __m256i table = iq4_table();
  return dot_blocks32(
      n, static_cast<const BlockIQ4_NL*>(wp), static_cast<const BlockQ8_0*>(ap),
      [table](const BlockIQ4_NL& w, const BlockQ8_0& a) {
        return dot_ss<P>(_mm256_shuffle_epi8(table, nibbles32(w.qs)), load32(a.qs));
      },
      sym_scales8<BlockIQ4_NL>, sym_contrib<BlockIQ4_NL>);
}

template <class P>
float dot_q4_1(std::int64_t n, const void* wp, const void* ap) {
  return dot_blocks32(
      n, static_cast<const BlockQ4_1*>(wp), static_cast<const BlockQ8_1*>(ap),
      [](const BlockQ4_1& w, const BlockQ8_1& a) { return P::dot(nibbles32(w.qs), load32(a.qs)); },
      min_scales8<BlockQ4_1>,
      [](int isum, const BlockQ4_1& w, const BlockQ8_1& a) { return contrib_q8_1(isum, w, a); });
}

template <class P>
float dot_q5_1(std::int64_t n, const void* wp, const void* ap) {
  return dot_blocks32(
      n, static_cast<const BlockQ5_1*>(wp), static_cast<const BlockQ8_1*>(ap),
      [](const BlockQ5_1& w, const BlockQ8_1& a) {
        return P::dot(_mm256_or_si256(nibbles32(w.qs), high_bits32(w.qh)), load32(a.qs));
      },
      min_scales8<BlockQ5_1>,
      [](int isum, const BlockQ5_1& w, const BlockQ8_1& a) { return contrib_q8_1(isum, w, a); });
}

// ---- 256-element super-block formats: integer part vectorised, float part per block.

// The 16 signed Q3_K scales (-32..31) as bytes, decoded with 32-bit word operations.
void q3_scales16(const std::uint8_t* packed, std::int8_t* out) {
  std::uint32_t u[3];
  std::memcpy(u, packed, 12);
  const std::uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const std::uint32_t w[4] = {(u[0] & m4) | ((u[2] & m2) << 4), (u[1] & m4) | (((u[2] >> 2) & m2) << 4),
                              ((u[0] >> 4) & m4) | (((u[2] >> 4) & m2) << 4),
                              ((u[1] >> 4) & m4) | (((u[2] >> 6) & m2) << 4)};
  std::memcpy(out, w, 16);
  for (int j = 0; j < 16; ++j) out[j] = static_cast<std::int8_t>(out[j] - 32);
}

int q2_isum_avx2(const BlockQ2_K& w, const BlockQ8_K& a) {
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256i s = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load32(w.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      const __m256i x = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
      const int k = 8 * h + 2 * j;
      s = _mm256_add_epi32(s, Avx2Ops::dot_scaled(x, load32(a.qs + 128 * h + 32 * j), w.scales[k] & 0xF,
                                                  w.scales[k + 1] & 0xF));
    }
  }
  return hsum(s);
}

int q3_isum_avx2(const BlockQ3_K& w, const BlockQ8_K& a) {
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
  std::int8_t sc[16];
  q3_scales16(w.scales, sc);
  const __m256i hm = load32(w.hmask);
  __m256i s = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load32(w.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      const __m256i low = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
      const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), one);
      const __m256i x = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(hb, 2)), four);
      const int k = 8 * h + 2 * j;
      s = _mm256_add_epi32(s, dot_ss_scaled<Avx2Ops>(x, load32(a.qs + 128 * h + 32 * j), sc[k], sc[k + 1]));
    }
  }
  return hsum(s);
}

#if FUCINA_ARCH_AVX512VNNI
// Scale index of int32 lane group i (elements 16i..16i+15) of 64 elements starting at 16*base.
__m512i scale_lanes(const __m512i& scales, int base) {
  const __m512i idx = _mm512_set_epi32(base + 3, base + 3, base + 3, base + 3, base + 2, base + 2, base + 2,
                                       base + 2, base + 1, base + 1, base + 1, base + 1, base, base, base, base);
  return _mm512_permutexvar_epi32(idx, scales);
}

// Byte vector (32 bytes broadcast to both halves) shifted right per half, as 16-bit lanes.
__m512i srl_halves(const __m512i& v, int lo, int hi) {
  return _mm512_srlv_epi16(v, _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(lo)),
                                                 _mm256_set1_epi16(static_cast<short>(hi)), 1));
}

int q2_isum_avx512(const BlockQ2_K& w, const BlockQ8_K& a) {
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m512i scales = _mm512_and_si512(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales))), _mm512_set1_epi32(0xF));
  __m512i acc = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    const __m512i q = _mm512_broadcast_i64x4(load32(w.qs + 32 * h));
    for (int m = 0; m < 2; ++m) {
      const __m512i x = _mm512_and_si512(srl_halves(q, 4 * m, 4 * m + 2), m3);
      const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, _mm512_loadu_si512(a.qs + 128 * h + 64 * m));
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(d, scale_lanes(scales, 8 * h + 4 * m)));
    }
  }
  return _mm512_reduce_add_epi32(acc);
}

int q3_isum_avx512(const BlockQ3_K& w, const BlockQ8_K& a) {
  const __m512i m3 = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1), c4 = _mm512_set1_epi8(4);
  alignas(16) std::int8_t sc[16];
  q3_scales16(w.scales, sc);
  const __m512i scales = _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc)));
  const __m512i hm = _mm512_broadcast_i64x4(load32(w.hmask));
  __m512i acc = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    const __m512i q = _mm512_broadcast_i64x4(load32(w.qs + 32 * h));
    for (int m = 0; m < 2; ++m) {
      const int j = 2 * m;  // groups j, j+1 of this half
      const __m512i low = _mm512_and_si512(srl_halves(q, 2 * j, 2 * j + 2), m3);
      const __m512i hb = _mm512_and_si512(srl_halves(hm, 4 * h + j, 4 * h + j + 1), one);
      const __m512i u = _mm512_or_si512(low, _mm512_slli_epi16(hb, 2));  // code + 4, in 0..7
      const __m512i av = _mm512_loadu_si512(a.qs + 128 * h + 64 * m);
      const __m512i d = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u, av),
                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), c4, av));
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(d, scale_lanes(scales, 8 * h + 4 * m)));
    }
  }
  return _mm512_reduce_add_epi32(acc);
}
#endif

template <class P>
float dot_q2_K(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ2_K*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    int isum = 0;
#if FUCINA_ARCH_AVX512VNNI
    if constexpr (std::is_same_v<P, VnniOps>) isum = q2_isum_avx512(w[b], a[b]);
    else isum = q2_isum_avx2(w[b], a[b]);
#else
    isum = q2_isum_avx2(w[b], a[b]);
#endif
    const __m128i mins = _mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales)), 4);
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(mins, _mm_set1_epi8(0x0F)));
    const int summs = hsum(_mm256_madd_epi16(load32(a[b].bsums), m16));
    acc.add(b, contrib_k_min(isum, summs, w[b].d, w[b].dmin, a[b].d));
  }
  return acc.reduce();
}

template <class P>
float dot_q3_K(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ3_K*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    int isum = 0;
#if FUCINA_ARCH_AVX512VNNI
    if constexpr (std::is_same_v<P, VnniOps>) isum = q3_isum_avx512(w[b], a[b]);
    else isum = q3_isum_avx2(w[b], a[b]);
#else
    isum = q3_isum_avx2(w[b], a[b]);
#endif
    acc.add(b, contrib_k(isum, w[b].d, a[b].d));
  }
  return acc.reduce();
}

// Q4_K/Q5_K packed 6-bit scales and mins as bytes: sc[0..7] in `sc`, mins in `mn`
// (little-endian u64), decoded with 32-bit word operations.
struct K4Scales {
  std::uint64_t sc;
  std::uint64_t mn;
};

K4Scales k4_scales_packed(const std::uint8_t* q) {
  std::uint32_t u[3];
  std::memcpy(u, q, 12);
  const std::uint32_t s03 = u[0] & 0x3f3f3f3fu;
  const std::uint32_t s47 = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  const std::uint32_t m03 = u[1] & 0x3f3f3f3fu;
  const std::uint32_t m47 = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
  return {s03 | (static_cast<std::uint64_t>(s47) << 32), m03 | (static_cast<std::uint64_t>(m47) << 32)};
}

// sum_j bsums[j] * mins[j / 2], exact in int32.
int k4_min_sum_simd(const BlockQ8_K& a, std::uint64_t mins) {
  const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(mins)));
  const __m256i pairs = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
  return hsum(_mm256_madd_epi16(load32(a.bsums), pairs));
}

int byte_at(std::uint64_t v, int j) { return static_cast<int>((v >> (8 * j)) & 0xFF); }

template <bool kFiveBit, class Block>
int q45_isum_avx2(const Block& w, const BlockQ8_K& a, std::uint64_t sc) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  __m256i hbits = _mm256_setzero_si256();
  if constexpr (kFiveBit) hbits = load32(w.qh);
  __m256i s = _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k) {
    const __m256i q = load32(w.qs + 32 * k);
    __m256i lo = _mm256_and_si256(q, m4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if constexpr (kFiveBit) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * k), one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * k + 1), one), 4));
    }
    const int s0 = byte_at(sc, 2 * k), s1 = byte_at(sc, 2 * k + 1);
    s = _mm256_add_epi32(s, Avx2Ops::dot_scaled(lo, load32(a.qs + 64 * k), s0, s0));
    s = _mm256_add_epi32(s, Avx2Ops::dot_scaled(hi, load32(a.qs + 64 * k + 32), s1, s1));
  }
  return hsum(s);
}

#if FUCINA_ARCH_AVX512VNNI
// 512-bit body: sub-blocks 2k and 2k+1 (64 contiguous activations) per vpdpbusd.
template <bool kFiveBit, class Block>
int q45_isum_avx512(const Block& w, const BlockQ8_K& a, std::uint64_t sc) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
  const __m512i scales = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc)));
  __m512i hz = _mm512_setzero_si512();
  if constexpr (kFiveBit) {
    const __m256i qh = load32(w.qh);
    hz = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 1), 1);
  }
  __m512i acc = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    const __m256i q = load32(w.qs + 32 * k);
    __m512i qq = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
    if constexpr (kFiveBit)
      qq = _mm512_or_si512(qq, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hz, 2 * k), one), 4));
    const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qq, _mm512_loadu_si512(a.qs + 64 * k));
    const __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * k)),
                                           _mm256_set1_epi32(2 * k + 1), 1);
    acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(d, _mm512_permutexvar_epi32(idx, scales)));
  }
  return _mm512_reduce_add_epi32(acc);
}
#endif

template <class P, class Block, bool kFiveBit>
float dot_q45_K(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const Block*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    const K4Scales s = k4_scales_packed(w[b].scales);
    int isum = 0;
#if FUCINA_ARCH_AVX512VNNI
    if constexpr (std::is_same_v<P, VnniOps>) isum = q45_isum_avx512<kFiveBit>(w[b], a[b], s.sc);
    else isum = q45_isum_avx2<kFiveBit>(w[b], a[b], s.sc);
#else
    isum = q45_isum_avx2<kFiveBit>(w[b], a[b], s.sc);
#endif
    acc.add(b, contrib_k_min(isum, k4_min_sum_simd(a[b], s.mn), w[b].d, w[b].dmin, a[b].d));
  }
  return acc.reduce();
}

int q6_isum_avx2(const BlockQ6_K& w, const BlockQ8_K& a) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), m32 = _mm256_set1_epi8(32);
  __m256i s = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i ql0 = load32(w.ql + 64 * h);
    const __m256i ql1 = load32(w.ql + 64 * h + 32);
    const __m256i qh = load32(w.qh + 32 * h);
    __m256i x[4];
    x[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    x[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    x[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
    x[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    for (int g = 0; g < 4; ++g) {
      const int k = 8 * h + 2 * g;
      s = _mm256_add_epi32(s, dot_ss_scaled<Avx2Ops>(_mm256_sub_epi8(x[g], m32), load32(a.qs + 128 * h + 32 * g),
                                                     w.scales[k], w.scales[k + 1]));
    }
  }
  return hsum(s);
}

#if FUCINA_ARCH_AVX512VNNI
// 512-bit body: 64 contiguous elements per vpdpbusd on the unsigned codes (0..63), with
// 32 * sum(a) subtracted per 16-element group before scaling.
int q6_isum_avx512(const BlockQ6_K& w, const BlockQ8_K& a) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), c32 = _mm512_set1_epi8(32);
  const __m512i scales = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
  const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  __m512i acc = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    const __m512i ql = _mm512_loadu_si512(w.ql + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(load32(w.qh + 32 * h));
    __m512i x[2];
    x[0] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
    x[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                           _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
    for (int m = 0; m < 2; ++m) {
      const __m512i av = _mm512_loadu_si512(a.qs + 128 * h + 64 * m);
      const __m512i d = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x[m], av),
                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), c32, av));
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(d, scale_lanes(scales, 8 * h + 4 * m)));
    }
  }
  return _mm512_reduce_add_epi32(acc);
}
#endif

template <class P>
float dot_q6_K(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockQ6_K*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    int isum = 0;
#if FUCINA_ARCH_AVX512VNNI
    if constexpr (std::is_same_v<P, VnniOps>) isum = q6_isum_avx512(w[b], a[b]);
    else isum = q6_isum_avx2(w[b], a[b]);
#else
    isum = q6_isum_avx2(w[b], a[b]);
#endif
    acc.add(b, contrib_k(isum, w[b].d, a[b].d));
  }
  return acc.reduce();
}

template <class P>
float dot_iq4_xs(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockIQ4_XS*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  const __m256i table = iq4_table();
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    __m256i s = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((w[b].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((w[b].scales_h >> 2 * ib) & 3) << 4);
      const __m256i x = _mm256_shuffle_epi8(table, nibbles32(w[b].qs + 16 * ib));
      s = _mm256_add_epi32(s, dot_ss_scaled<P>(x, load32(a[b].qs + 32 * ib), ls - 32, ls - 32));
    }
    acc.add(b, contrib_k(hsum(s), w[b].d, a[b].d));
  }
  return acc.reduce();
}

template <class P>
float dot_tq2_0(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockTQ2_0*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  Lanes acc;
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    __m256i s = _mm256_setzero_si256();
    for (int g = 0; g < 2; ++g) {
      const __m256i q = load32(w[b].qs + 32 * g);
      for (int l = 0; l < 4; ++l) {
        const __m256i x = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, 2 * l), m3), one);
        s = _mm256_add_epi32(s, dot_ss<P>(x, load32(a[b].qs + 128 * g + 32 * l)));
      }
    }
    acc.add(b, contrib_k(hsum(s), w[b].d, a[b].d));
  }
  return acc.reduce();
}

template <class P>
float dot_tq1_0(std::int64_t n, const void* wp, const void* ap) {
  const auto* w = static_cast<const BlockTQ1_0*>(wp);
  const auto* a = static_cast<const BlockQ8_K*>(ap);
  Lanes acc;
  alignas(32) std::int8_t t[kQK_K];
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    tq1_unpack(w[b], t);  // base-3 digits: unpacked in scalar, multiplied in SIMD
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) s = _mm256_add_epi32(s, dot_ss<P>(load32(t + 32 * k), load32(a[b].qs + 32 * k)));
    acc.add(b, contrib_k(hsum(s), w[b].d, a[b].d));
  }
  return acc.reduce();
}

#if FUCINA_ARCH_AVX512VNNI
// Note [Multi-row dots]: prompts multiply each weight row by many activation rows. These
// kernels take up to kMaxDotRows activation rows per weight row and share the weight-side
// work (unpacking, scales); every output still gets exactly its single-row kernel's
// arithmetic (exact integer block sums, the same float contributions into the same Lanes),
// so results are bit-identical to dot_kernel's.
template <class W, class Decode>
void rows_blocks32(std::int64_t n, const W* w, const void* const* acts, int rm, float* out, Decode decode) {
  const std::int64_t nb = n / 32;
  Lanes acc[kMaxDotRows];
  __m256 vacc[kMaxDotRows];
  for (int r = 0; r < rm; ++r) vacc[r] = _mm256_setzero_ps();
  const auto act = [&](int r) { return static_cast<const BlockQ8_0*>(acts[r]); };
  std::int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    __m256i ax[8], sx[8];
    for (int k = 0; k < 8; ++k) {
      sx[k] = decode(w[b + k]);
      ax[k] = _mm256_sign_epi8(sx[k], sx[k]);
    }
    const __m256 dw = f16x8(w + b, [](const W& blk) { return blk.d; });
    for (int r = 0; r < rm; ++r) {
      const BlockQ8_0* a = act(r) + b;
      __m256i v[8];
      for (int k = 0; k < 8; ++k) v[k] = VnniOps::dot(ax[k], _mm256_sign_epi8(load32(a[k].qs), sx[k]));
      const __m256 da = f16x8(a, [](const BlockQ8_0& blk) { return blk.d; });
      vacc[r] = _mm256_add_ps(vacc[r], _mm256_mul_ps(_mm256_cvtepi32_ps(transpose_sum8(v)), _mm256_mul_ps(dw, da)));
    }
  }
  for (int r = 0; r < rm; ++r) _mm256_storeu_ps(acc[r].v, vacc[r]);
  for (; b < nb; ++b) {
    const __m256i x = decode(w[b]);
    for (int r = 0; r < rm; ++r)
      acc[r].add(b, sym_contrib(hsum(dot_ss<VnniOps>(x, load32(act(r)[b].qs))), w[b], act(r)[b]));
  }
  for (int r = 0; r < rm; ++r) out[r] = acc[r].reduce();
}

void rows_q8_0(std::int64_t n, const void* wp, const void* const* acts, int rm, float* out) {
  rows_blocks32(n, static_cast<const BlockQ8_0*>(wp), acts, rm, out, [](const BlockQ8_0& w) { return load32(w.qs); });
}

void rows_q4_0(std::int64_t n, const void* wp, const void* const* acts, int rm, float* out) {
  rows_blocks32(n, static_cast<const BlockQ4_0*>(wp), acts, rm, out, [](const BlockQ4_0& w) {
    return _mm256_sub_epi8(nibbles32(w.qs), _mm256_set1_epi8(8));
  });
}

void rows_q4_K(std::int64_t n, const void* wp, const void* const* acts, int rm, float* out) {
  const auto* w = static_cast<const BlockQ4_K*>(wp);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  Lanes acc[kMaxDotRows];
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    const K4Scales s = k4_scales_packed(w[b].scales);
    const __m512i scales = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(s.sc)));
    __m512i qq[4], sk[4];
    for (int k = 0; k < 4; ++k) {  // as q45_isum_avx512
      const __m256i q = load32(w[b].qs + 32 * k);
      qq[k] = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
      const __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * k)),
                                             _mm256_set1_epi32(2 * k + 1), 1);
      sk[k] = _mm512_permutexvar_epi32(idx, scales);
    }
    for (int r = 0; r < rm; ++r) {
      const BlockQ8_K& a = static_cast<const BlockQ8_K*>(acts[r])[b];
      __m512i sum = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k)
        sum = _mm512_add_epi32(
            sum, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), qq[k], _mm512_loadu_si512(a.qs + 64 * k)),
                                    sk[k]));
      acc[r].add(b, contrib_k_min(_mm512_reduce_add_epi32(sum), k4_min_sum_simd(a, s.mn), w[b].d, w[b].dmin, a.d));
    }
  }
  for (int r = 0; r < rm; ++r) out[r] = acc[r].reduce();
}

void rows_q6_K(std::int64_t n, const void* wp, const void* const* acts, int rm, float* out) {
  const auto* w = static_cast<const BlockQ6_K*>(wp);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), c32 = _mm512_set1_epi8(32);
  const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  Lanes acc[kMaxDotRows];
  for (std::int64_t b = 0; b < n / kQK_K; ++b) {
    const __m512i scales = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales)));
    __m512i x[4], sl[4];
    for (int h = 0; h < 2; ++h) {  // as q6_isum_avx512
      const __m512i ql = _mm512_loadu_si512(w[b].ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(load32(w[b].qh + 32 * h));
      x[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
      x[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                     _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
      for (int m = 0; m < 2; ++m) sl[2 * h + m] = scale_lanes(scales, 8 * h + 4 * m);
    }
    for (int r = 0; r < rm; ++r) {
      const BlockQ8_K& a = static_cast<const BlockQ8_K*>(acts[r])[b];
      __m512i sum = _mm512_setzero_si512();
      for (int j = 0; j < 4; ++j) {
        const __m512i av = _mm512_loadu_si512(a.qs + 64 * j);
        const __m512i d = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x[j], av),
                                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), c32, av));
        sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(d, sl[j]));
      }
      acc[r].add(b, contrib_k(_mm512_reduce_add_epi32(sum), w[b].d, a.d));
    }
  }
  for (int r = 0; r < rm; ++r) out[r] = acc[r].reduce();
}
#endif

template <class P>
constexpr DotTable make_table() {
  return {{dot_q4_0<P>, dot_q4_1<P>, dot_q5_0<P>, dot_q5_1<P>, dot_q8_0<P>, dot_iq4_nl<P>,
           dot_q2_K<P>, dot_q3_K<P>, dot_q45_K<P, BlockQ4_K, false>, dot_q45_K<P, BlockQ5_K, true>,
           dot_q6_K<P>, dot_iq4_xs<P>, dot_tq1_0<P>, dot_tq2_0<P>}};
}

constexpr DotTable kAvx2Table = make_table<Avx2Ops>();
#if FUCINA_ARCH_AVX512VNNI
constexpr DotTable kVnniTable = make_table<VnniOps>();
#endif

}  // namespace

const DotTable* avx2_dot_table() { return &kAvx2Table; }

DotRowsFn avx512vnni_rows_kernel(QuantType type) {
#if FUCINA_ARCH_AVX512VNNI
  switch (type) {
    case QuantType::Q8_0: return rows_q8_0;
    case QuantType::Q4_0: return rows_q4_0;
    case QuantType::Q4_K: return rows_q4_K;
    case QuantType::Q6_K: return rows_q6_K;
    default: return nullptr;
  }
#else
  (void)type;
  return nullptr;
#endif
}
const DotTable* avx512vnni_dot_table() {
#if FUCINA_ARCH_AVX512VNNI
  return &kVnniTable;
#else
  return nullptr;
#endif
}

#else

const DotTable* avx2_dot_table() { return nullptr; }
const DotTable* avx512vnni_dot_table() { return nullptr; }
DotRowsFn avx512vnni_rows_kernel(QuantType) { return nullptr; }

#endif

}  // namespace fucina::quant::detail
