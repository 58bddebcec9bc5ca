// Packed Q4_K weights (Note [Interleaved weights] in fucina/quant/packed.hpp) against Q8_K
// activations.
//
// Note [Packed Q4_K layout]: a group is cols / 256 super-block records of 2368 bytes (37 x 64),
// one per ggml super-block, each holding the 16 rows side by side:
//   [0, 32)       d[16] f16, row r's super-block scale
//   [32, 64)      dmin[16] f16
//   [64, 192)     sc[s][r] u8, s = 0..7: the 6-bit sub-block scales, unpacked
//   [192, 320)    mn[p][r][e] u8 = min of sub-block 2p + e of row r: the pairs interleave so
//                 that one widening to int16 gives each lane (mn[2p], mn[2p+1]) for vpdpwssd
//   [320, 2368)   nibbles: 32 chunks of 64 bytes, chunk 8j + c (j = 0..3, c = 0..7), lane r,
//                 byte t = ggml's qs[32j + 4c + t] of row r, i.e. low nibble = element
//                 64j + 4c + t (sub-block 2j), high nibble = element 64j + 32 + 4c + t (2j + 1).
// Padding rows are all zero (d = dmin = 0), so their outputs are exactly 0.
//
// Note [Packed Q4_K order]: per row and super-block, with da the activation scale,
//   isum = sum_s sc_s * dot(q_s, a_s)  and  msum = sum_s mn_s * (bsums[2s] + bsums[2s+1])
// are exact int32 (|isum| <= 8 * 63 * 32 * 15 * 127), then, super-block after super-block,
//   acc = fma((float)isum, d * da, acc);  acc = fma((float)msum, -(dmin * da), acc).
// The scalar and the AVX512-VNNI arm both follow it, so they agree bit for bit.
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

constexpr std::int64_t kRecord = 2368;
constexpr std::int64_t kScOff = 64, kMnOff = 192, kQsOff = 320;
static_assert(kRecord % 64 == 0 && kQsOff + 32 * 64 == kRecord);

std::int64_t group_bytes_q4_K(std::int64_t cols) { return cols / kQK_K * kRecord; }

void pack_group_q4_K(const std::byte* const* rows, std::int64_t cols, std::byte* dst) {
  const std::int64_t nsb = cols / kQK_K;
  std::memset(dst, 0, static_cast<std::size_t>(group_bytes_q4_K(cols)));
  for (std::int64_t b = 0; b < nsb; ++b) {
    auto* rec = reinterpret_cast<std::uint8_t*>(dst + b * kRecord);
    auto* d = reinterpret_cast<f16_bits*>(rec);
    for (int r = 0; r < kPackRows; ++r) {
      if (rows[r] == nullptr) continue;
      const BlockQ4_K& w = reinterpret_cast<const BlockQ4_K*>(rows[r])[b];
      d[r] = w.d;
      d[kPackRows + r] = w.dmin;
      for (int s = 0; s < 8; ++s) {
        std::uint8_t sc = 0, m = 0;
        unpack_scale_min_k4(s, w.scales, sc, m);
        rec[kScOff + s * kPackRows + r] = sc;
        rec[kMnOff + ((s / 2) * kPackRows + r) * 2 + s % 2] = m;
      }
      for (int j = 0; j < 4; ++j)
        for (int c = 0; c < 8; ++c) std::memcpy(rec + kQsOff + (8 * j + c) * 64 + 4 * r, w.qs + 32 * j + 4 * c, 4);
    }
  }
}

// The reference: one output at a time, in the order of Note [Packed Q4_K order].
void kernel_scalar_q4_K(const PackedMatrix& w, std::int64_t g0, std::int64_t g1, const std::byte* act,
                        std::int64_t n_act, float* y, std::int64_t ldy) {
  const std::int64_t nsb = w.cols() / kQK_K;
  const std::int64_t act_stride = nsb * static_cast<std::int64_t>(sizeof(BlockQ8_K));
  for (std::int64_t g = g0; g < g1; ++g) {
    for (std::int64_t i = 0; i < n_act; ++i) {
      const auto* a = reinterpret_cast<const BlockQ8_K*>(act + i * act_stride);
      for (int r = 0; r < kPackRows && g * kPackRows + r < w.rows(); ++r) {
        float acc = 0.f;
        for (std::int64_t b = 0; b < nsb; ++b) {
          const auto* rec = reinterpret_cast<const std::uint8_t*>(w.group(g) + b * kRecord);
          const auto* d = reinterpret_cast<const f16_bits*>(rec);
          int isum = 0, msum = 0;
          for (int s = 0; s < 8; ++s) {
            const int j = s / 2, high = s % 2;
            int dot = 0;
            for (int k = 0; k < 32; ++k) {
              const int c = k / 4, t = k % 4;
              const std::uint8_t byte = rec[kQsOff + (8 * j + c) * 64 + 4 * r + t];
              dot += (high ? byte >> 4 : byte & 0xF) * a[b].qs[64 * j + 32 * high + k];
            }
            isum += rec[kScOff + s * kPackRows + r] * dot;
            msum += rec[kMnOff + (j * kPackRows + r) * 2 + high] * (a[b].bsums[2 * s] + a[b].bsums[2 * s + 1]);
          }
          const float dw = fp16_to_fp32(d[r]), mw = fp16_to_fp32(d[kPackRows + r]);
          acc = std::fma(static_cast<float>(isum), dw * a[b].d, acc);
          acc = std::fma(static_cast<float>(msum), -(mw * a[b].d), acc);
        }
        y[i * ldy + g * kPackRows + r] = acc;
      }
    }
  }
}

#if FUCINA_ARCH_AVX512VNNI

// Software prefetch distance: measured best for one-row products streamed from memory.
constexpr std::int64_t kPrefetch = 8192;

// Non-temporal hint: the streamed weights are read once per token, and keeping them out of
// the cache's long-lived ways measured +3-5% decode over prefetcht0 (in-process A/B, Qwen3
// and Llama-1B Q4_K_M; the legacy formats' T0 hint measured the same either way).
inline void prefetch(const std::byte* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_NTA); }
inline __m128i load128(const std::byte* p) { return _mm_load_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load256(const std::byte* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }

inline __m512i act_word(const std::int8_t* q) {
  std::int32_t v;
  std::memcpy(&v, q, 4);
  return _mm512_set1_epi32(v);
}

// T activation rows against one group: every weight chunk is unpacked once for all T.
template <int T>
void tile_q4_K(const std::byte* group, std::int64_t nsb, const BlockQ8_K* const* a, float* const* out,
               __mmask16 mask) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  // Per dword lane (m0 | m1 << 16): byte shuffles giving (m0, m0) and (m1, m1).
  const __m512i dup_even = _mm512_broadcast_i32x4(_mm_set_epi64x(0x0D0C0D0C09080908LL, 0x0504050401000100LL));
  const __m512i dup_odd = _mm512_broadcast_i32x4(_mm_set_epi64x(0x0F0E0F0E0B0A0B0ALL, 0x0706070603020302LL));
  // The float sums live in memory (touched once per super-block): at T = 8 the dot chains
  // and the integer sums need the registers.
  alignas(64) float acc[T][kPackRows] = {};
  escape(acc);
  for (std::int64_t b = 0; b < nsb; ++b) {
    const std::byte* rec = group + b * kRecord;
    for (int l = 0; l < kQsOff / 64; ++l) prefetch(rec + l * 64 + kPrefetch);
    __m512i isum[T];
    for (int i = 0; i < T; ++i) isum[i] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m512i sl = _mm512_cvtepu8_epi32(load128(rec + kScOff + 32 * j));
      const __m512i sh = _mm512_cvtepu8_epi32(load128(rec + kScOff + 32 * j + 16));
      const std::byte* chunks = rec + kQsOff + 8 * j * 64;
      for (int c = 0; c < 8; ++c) prefetch(chunks + c * 64 + kPrefetch);
      // Both sub-blocks of the chunks at once: each chunk is loaded once, and the 2T dot chains
      // are twice as many independent vpdpbusd chains for the multiply pipes (in-process A/B of
      // the 8-row tile: 4% faster than one sub-block at a time, which needed half the registers).
      __m512i dot_l[T], dot_h[T];
      for (int i = 0; i < T; ++i) dot_l[i] = dot_h[i] = _mm512_setzero_si512();
#pragma GCC unroll 8  // constant offsets from each row's pointer (otherwise reloaded from the stack)
      for (int c = 0; c < 8; ++c) {
        const __m512i x = _mm512_load_si512(chunks + c * 64);
        const __m512i ql = _mm512_and_si512(x, low), qh = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
        for (int i = 0; i < T; ++i) {
          const std::int8_t* q = a[i][b].qs + 64 * j + 4 * c;
          dot_l[i] = _mm512_dpbusd_epi32(dot_l[i], ql, act_word(q));
          dot_h[i] = _mm512_dpbusd_epi32(dot_h[i], qh, act_word(q + 32));
        }
      }
      for (int i = 0; i < T; ++i)
        isum[i] = _mm512_add_epi32(isum[i], _mm512_add_epi32(_mm512_mullo_epi32(dot_l[i], sl), _mm512_mullo_epi32(dot_h[i], sh)));
    }
    __m512i msum[T];
    for (int i = 0; i < T; ++i) msum[i] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const __m512i m = _mm512_cvtepu8_epi16(load256(rec + kMnOff + 32 * p));
      const __m512i me = _mm512_shuffle_epi8(m, dup_even), mo = _mm512_shuffle_epi8(m, dup_odd);
      for (int i = 0; i < T; ++i) {
        // Each broadcast dword is the pair (bsums[2s], bsums[2s+1]) of sub-block s.
        std::int32_t be, bo;
        std::memcpy(&be, a[i][b].bsums + 4 * p, 4);
        std::memcpy(&bo, a[i][b].bsums + 4 * p + 2, 4);
        msum[i] = _mm512_dpwssd_epi32(msum[i], me, _mm512_set1_epi32(be));
        msum[i] = _mm512_dpwssd_epi32(msum[i], mo, _mm512_set1_epi32(bo));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(load256(rec));
    const __m512 mw = _mm512_cvtph_ps(load256(rec + 32));
    for (int i = 0; i < T; ++i) {
      const __m512 da = _mm512_set1_ps(a[i][b].d);
      __m512 sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(dw, da), _mm512_load_ps(acc[i]));
      // -(x * y) + acc fused: the scalar arm's fma(x, -y, acc), since negation is exact.
      sum = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[i]), _mm512_mul_ps(mw, da), sum);
      _mm512_store_ps(acc[i], sum);
    }
  }
  for (int i = 0; i < T; ++i) _mm512_mask_storeu_ps(out[i], mask, _mm512_load_ps(acc[i]));
}

void kernel_avx512_q4_K(const PackedMatrix& w, std::int64_t g0, std::int64_t g1, const std::byte* act,
                        std::int64_t n_act, float* y, std::int64_t ldy) {
  const std::int64_t nsb = w.cols() / kQK_K;
  for_each_act_tile<BlockQ8_K>(w, g0, g1, act, nsb * static_cast<std::int64_t>(sizeof(BlockQ8_K)), n_act, y, ldy,
                               [&](auto t, std::int64_t g, const BlockQ8_K* const* a, float* const* out, std::uint16_t mask) {
                                 tile_q4_K<decltype(t)::value>(w.group(g), nsb, a, out, mask);
                               });
}

#endif

}  // namespace

const PackedFormat& packed_q4_K() {
  static const PackedFormat f{QuantType::Q4_K, group_bytes_q4_K, pack_group_q4_K, kernel_scalar_q4_K,
#if FUCINA_ARCH_AVX512VNNI
                              kernel_avx512_q4_K
#else
                              nullptr
#endif
  };
  return f;
}

}  // namespace fucina::quant::detail
