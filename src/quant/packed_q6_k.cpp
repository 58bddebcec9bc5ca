// Packed Q6_K weights (Note [Interleaved weights] in fucina/quant/packed.hpp) against Q8_K
// activations. The quants stay 6 bits wide: decode streams the weights once, so bytes are time.
//
// Note [Packed Q6_K layout]: with u = q + 32 in 0..63 the unsigned value of an element, a group
// is the d array, d[b][r] f16 for super-block b and row r padded to 64 bytes, then cols / 256
// super-block records of 3328 bytes. A record is four 832-byte
// (13 x 64) parts, one per 64 elements j = 0..3, laid out in the order the kernel reads them
// (one forward stream keeps the hardware prefetcher ahead):
//   [0, 64)       sc[p][r][e] i8 for p = 2j, 2j + 1 = scale of sub-block 2p + e (16 elements)
//                 of row r: one widening to int16 gives each lane (sc[2p], sc[2p+1]) for vpdpwssd
//   then for q = 0..3, 192 bytes each: high-bit chunk H_q, nibble chunks A = 2q and B = 2q + 1.
//   Nibble chunk c, lane r, byte t: low nibble = u(64j + 4c + t) & 15, high nibble =
//   u(64j + 32 + 4c + t) & 15. H_q, lane r, byte t: bits 0-1 = u >> 4 of A's low element,
//   2-3 of A's high one, 4-5 of B's low one, 6-7 of B's high one.
// Nibble chunks
// 0..3 (low nibbles) hold sub-block 4j, 4..7 sub-block 4j + 1, and their high nibbles
// sub-blocks 4j + 2 and 4j + 3. Padding rows are all zero (scales and d are 0).
//
// Note [Packed Q6_K order]: per row and super-block, with bsum_s the activation sum of
// sub-block s, isum = sum_s sc_s * (dot(u_s, a_s) - 32 * bsum_s) is exact int32 (|isum| <=
// 16 * 128 * 16 * 63 * 127 < 2^31 even counting the two parts apart), then, super-block
// after super-block, acc = fma((float)isum, d * da, acc), in both arms.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "fucina/kernels/arch.hpp"
#include "fucina/quant/fp16.hpp"
#include "fucina/quant/k_quants.hpp"
#include "packed_formats.hpp"
#include "packed_tiles.hpp"

#if FUCINA_ARCH_AVX512VNNI
#include <immintrin.h>
#endif

namespace fucina::quant::detail {

namespace {

constexpr std::int64_t kPart = 832, kRecord = 4 * kPart;
static_assert(kPart == 64 + 4 * 192);

// Byte offsets in a record of the scales of pair p, nibble chunk c and high-bit chunk q of part j.
constexpr std::int64_t sc_off(int p) { return (p / 2) * kPart + (p % 2) * 32; }
constexpr std::int64_t ql_off(int j, int c) { return j * kPart + 64 + (c / 2) * 192 + 64 + (c % 2) * 64; }
constexpr std::int64_t qh_off(int j, int q) { return j * kPart + 64 + q * 192; }

constexpr std::int64_t round64(std::int64_t n) { return (n + 63) / 64 * 64; }

// The d array leads the group; the records follow it.
std::int64_t records_offset(std::int64_t nsb) { return round64(nsb * kPackRows * 2); }

std::int64_t group_bytes_q6_K(std::int64_t cols) {
  const std::int64_t nsb = cols / kQK_K;
  return records_offset(nsb) + nsb * kRecord;
}

// Element k (0..255) of a ggml Q6_K block as u = q + 32.
int q6_unsigned(const BlockQ6_K& w, int k) {
  const int h = k / 128, quarter = (k % 128) / 32, l = k % 32;
  const int nib = quarter % 2 == 0 ? w.ql[64 * h + l] : w.ql[64 * h + 32 + l];
  const int low = quarter < 2 ? nib & 0xF : nib >> 4;
  return low | (((w.qh[32 * h + l] >> (2 * quarter)) & 3) << 4);
}

void pack_group_q6_K(const std::byte* const* rows, std::int64_t cols, std::byte* dst) {
  const std::int64_t nsb = cols / kQK_K;
  std::memset(dst, 0, static_cast<std::size_t>(group_bytes_q6_K(cols)));
  auto* d = reinterpret_cast<f16_bits*>(dst);
  for (std::int64_t b = 0; b < nsb; ++b) {
    auto* rec = reinterpret_cast<std::uint8_t*>(dst + records_offset(nsb) + b * kRecord);
    for (int r = 0; r < kPackRows; ++r) {
      if (rows[r] == nullptr) continue;
      const BlockQ6_K& w = reinterpret_cast<const BlockQ6_K*>(rows[r])[b];
      d[b * kPackRows + r] = w.d;
      for (int s = 0; s < 16; ++s) rec[sc_off(s / 2) + 2 * r + s % 2] = static_cast<std::uint8_t>(w.scales[s]);
      for (int j = 0; j < 4; ++j)
        for (int c = 0; c < 8; ++c)
          for (int t = 0; t < 4; ++t) {
            const int u0 = q6_unsigned(w, 64 * j + 4 * c + t), u1 = q6_unsigned(w, 64 * j + 32 + 4 * c + t);
            rec[ql_off(j, c) + 4 * r + t] = static_cast<std::uint8_t>((u0 & 0xF) | ((u1 & 0xF) << 4));
            const int shift = 4 * (c % 2);
            rec[qh_off(j, c / 2) + 4 * r + t] |= static_cast<std::uint8_t>(((u0 >> 4) | ((u1 >> 4) << 2)) << shift);
          }
    }
  }
}

// Element k of row r of a packed record, as u = q + 32 (the inverse of pack_group_q6_K).
int packed_unsigned(const std::uint8_t* rec, int r, int k) {
  const int j = k / 64, high = (k % 64) / 32, c = (k % 32) / 4, t = k % 4;
  const std::uint8_t nib = rec[ql_off(j, c) + 4 * r + t];
  const std::uint8_t hb = rec[qh_off(j, c / 2) + 4 * r + t];
  return (high ? nib >> 4 : nib & 0xF) | (((hb >> (4 * (c % 2) + 2 * high)) & 3) << 4);
}

// The reference: one output at a time, in the order of Note [Packed Q6_K order].
void kernel_scalar_q6_K(const PackedMatrix& w, std::int64_t g0, std::int64_t g1, const std::byte* act,
                        std::int64_t n_act, float* y, std::int64_t ldy) {
  const std::int64_t nsb = w.cols() / kQK_K;
  const std::int64_t act_stride = nsb * static_cast<std::int64_t>(sizeof(BlockQ8_K));
  for (std::int64_t g = g0; g < g1; ++g) {
    const auto* d = reinterpret_cast<const f16_bits*>(w.group(g));
    for (std::int64_t i = 0; i < n_act; ++i) {
      const auto* a = reinterpret_cast<const BlockQ8_K*>(act + i * act_stride);
      for (int r = 0; r < kPackRows && g * kPackRows + r < w.rows(); ++r) {
        float acc = 0.f;
        for (std::int64_t b = 0; b < nsb; ++b) {
          const auto* rec = reinterpret_cast<const std::uint8_t*>(w.group(g) + records_offset(nsb) + b * kRecord);
          int isum = 0;
          for (int s = 0; s < 16; ++s) {
            int dot = -32 * a[b].bsums[s];
            for (int k = 16 * s; k < 16 * s + 16; ++k) dot += packed_unsigned(rec, r, k) * a[b].qs[k];
            isum += static_cast<std::int8_t>(rec[sc_off(s / 2) + 2 * r + s % 2]) * dot;
          }
          acc = std::fma(static_cast<float>(isum), fp16_to_fp32(d[b * kPackRows + r]) * a[b].d, acc);
        }
        y[i * ldy + g * kPackRows + r] = acc;
      }
    }
  }
}

#if FUCINA_ARCH_AVX512VNNI

// Non-temporal hint: the streamed weights are read once per token, and keeping them out of
// the cache's long-lived ways measured +3-5% decode over prefetcht0 (in-process A/B, Qwen3
// and Llama-1B Q4_K_M; the legacy formats' T0 hint measured the same either way).
inline void prefetch(const std::byte* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_NTA); }
inline __m256i load256(const std::byte* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }

inline __m512i act_word(const void* q) {
  std::int32_t v;
  std::memcpy(&v, q, 4);
  return _mm512_set1_epi32(v);
}

// (x & 0x0F) | h for h holding only bits 4-5 of each byte.
inline __m512i merge(__m512i x, __m512i h, __m512i low) { return _mm512_ternarylogic_epi32(x, h, low, 0xEC); }

// Software prefetch distance: measured best for one-row products streamed from memory.
constexpr std::int64_t kPrefetch = 8192;

// Field f (bits 2f, 2f + 1) of every byte of h moved to bits 4-5, other bits clear. GFNI
// does it in one bit-matrix multiply; the shift-and fallback gives the same bits.
template <int F>
inline __m512i high_bits(__m512i h, __m512i bits45) {
  if constexpr (F == 2) {
    return _mm512_and_si512(h, bits45);
  } else {
#if FUCINA_ARCH_GFNI
    // Result bit i of a byte = parity(matrix byte 7 - i & input byte): bytes 3 and 2 select
    // input bits 2f and 2f + 1 for result bits 4 and 5.
    constexpr long long kMatrix = (1LL << (2 * F)) << 24 | (1LL << (2 * F + 1)) << 16;
    return _mm512_gf2p8affine_epi64_epi8(h, _mm512_set1_epi64(kMatrix), 0);
#else
    const __m512i s = F == 0 ? _mm512_slli_epi16(h, 4) : F == 1 ? _mm512_slli_epi16(h, 2) : _mm512_srli_epi16(h, 2);
    return _mm512_and_si512(s, bits45);
#endif
  }
}

// T activation rows against one group: every weight chunk is decoded once for all T.
template <int T>
void tile_q6_K(const std::byte* group, std::int64_t nsb, const BlockQ8_K* const* a, float* const* out,
               __mmask16 mask) {
  const __m512i low = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  const __m512i minus32 = _mm512_set1_epi16(-32);
  const auto* d = reinterpret_cast<const f16_bits*>(group);
  // Touching the d array first keeps the whole group one forward stream for the prefetcher.
  for (std::int64_t l = 0; l < records_offset(nsb); l += 64) prefetch(group + l);
  alignas(64) float acc[T][kPackRows] = {};
  escape(acc);
  for (std::int64_t b = 0; b < nsb; ++b) {
    const std::byte* rec = group + records_offset(nsb) + b * kRecord;
    __m512i isum[T];
    for (int i = 0; i < T; ++i) isum[i] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < kPart / 64; ++l) prefetch(rec + j * kPart + l * 64 + kPrefetch);
      // Lanes (sc[4j], sc[4j+1]) and (sc[4j+2], sc[4j+3]) as int16 pairs.
      const __m512i w0 = _mm512_cvtepi8_epi16(load256(rec + sc_off(2 * j)));
      const __m512i w1 = _mm512_cvtepi8_epi16(load256(rec + sc_off(2 * j + 1)));
      const __m512i c0 = _mm512_mullo_epi16(w0, minus32), c1 = _mm512_mullo_epi16(w1, minus32);
      for (int i = 0; i < T; ++i) {
        isum[i] = _mm512_dpwssd_epi32(isum[i], c0, act_word(a[i][b].bsums + 4 * j));
        isum[i] = _mm512_dpwssd_epi32(isum[i], c1, act_word(a[i][b].bsums + 4 * j + 2));
      }
      for (int half = 0; half < 2; ++half) {
        // Sub-blocks 4j + half (low nibbles, part 0) and 4j + 2 + half (high nibbles, part 1).
        const __m512i sl = half == 0 ? _mm512_srai_epi32(_mm512_slli_epi32(w0, 16), 16) : _mm512_srai_epi32(w0, 16);
        const __m512i sh = half == 0 ? _mm512_srai_epi32(_mm512_slli_epi32(w1, 16), 16) : _mm512_srai_epi32(w1, 16);
        // One part at a time (each chunk read twice, the second time from L1): T dot chains,
        // so 8 rows fit the registers and every value is decoded once per tile.
#pragma GCC unroll 2
        for (int part = 0; part < 2; ++part) {
          __m512i dot[T];
          for (int i = 0; i < T; ++i) dot[i] = _mm512_setzero_si512();
#pragma GCC unroll 2
          for (int qq = 0; qq < 2; ++qq) {
            const int q = 2 * half + qq;
            const __m512i h = _mm512_load_si512(rec + qh_off(j, q));
            const __m512i xa = _mm512_load_si512(rec + ql_off(j, 2 * q));
            const __m512i xb = _mm512_load_si512(rec + ql_off(j, 2 * q + 1));
            const __m512i va = part == 0 ? merge(xa, high_bits<0>(h, bits45), low)
                                         : merge(_mm512_srli_epi16(xa, 4), high_bits<1>(h, bits45), low);
            const __m512i vb = part == 0 ? merge(xb, high_bits<2>(h, bits45), low)
                                         : merge(_mm512_srli_epi16(xb, 4), high_bits<3>(h, bits45), low);
            for (int i = 0; i < T; ++i) {
              const std::int8_t* qa = a[i][b].qs + 64 * j + 8 * q + 32 * part;
              dot[i] = _mm512_dpbusd_epi32(dot[i], va, act_word(qa));
              dot[i] = _mm512_dpbusd_epi32(dot[i], vb, act_word(qa + 4));
            }
          }
          const __m512i sc = part == 0 ? sl : sh;
          for (int i = 0; i < T; ++i) isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(dot[i], sc));
        }
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d) + b));
    for (int i = 0; i < T; ++i)
      _mm512_store_ps(acc[i], _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(dw, _mm512_set1_ps(a[i][b].d)),
                                              _mm512_load_ps(acc[i])));
  }
  for (int i = 0; i < T; ++i) _mm512_mask_storeu_ps(out[i], mask, _mm512_load_ps(acc[i]));
}

void kernel_avx512_q6_K(const PackedMatrix& w, std::int64_t g0, std::int64_t g1, const std::byte* act,
                        std::int64_t n_act, float* y, std::int64_t ldy) {
  const std::int64_t nsb = w.cols() / kQK_K;
  for_each_act_tile<BlockQ8_K>(w, g0, g1, act, nsb * static_cast<std::int64_t>(sizeof(BlockQ8_K)), n_act, y, ldy,
                               [&](auto t, std::int64_t g, const BlockQ8_K* const* a, float* const* out, std::uint16_t mask) {
                                 tile_q6_K<decltype(t)::value>(w.group(g), nsb, a, out, mask);
                               });
}

#endif

}  // namespace

const PackedFormat& packed_q6_K() {
  static const PackedFormat f{QuantType::Q6_K, group_bytes_q6_K, pack_group_q6_K, kernel_scalar_q6_K,
#if FUCINA_ARCH_AVX512VNNI
                              kernel_avx512_q6_K
#else
                              nullptr
#endif
  };
  return f;
}

}  // namespace fucina::quant::detail
