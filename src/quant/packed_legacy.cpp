// Packed Q8_0 and Q4_0 weights (Note [Interleaved weights] in fucina/quant/packed.hpp).
//
// Group layout, nb = cols / 32 blocks: first nb blocks of quants, each 512 bytes (Q8_0: 8
// chunks) or 256 bytes (Q4_0: 4 chunks), then nb x 16 f16 row scales, padded to 64 bytes.
// Q8_0 chunk c, lane r = row r's bytes 4c..4c+3 xor 0x80 (q + 128, unsigned). Q4_0 chunk c,
// lane r = row r's packed bytes 4c..4c+3 as ggml stores them: low nibbles are elements
// 4c..4c+3, high nibbles elements 16+4c..16+4c+3 (values q + 8). The offset times the
// activation block sum is subtracted from the integer dot. Float side: Note [Packed determinism].
#include <cmath>
#include <cstring>

#include "fucina/kernels/arch.hpp"
#include "fucina/quant/blocks_legacy.hpp"
#include "fucina/quant/fp16.hpp"
#include "packed_formats.hpp"
#include "packed_tiles.hpp"

#if FUCINA_ARCH_AVX512VNNI
#include <immintrin.h>
#endif

namespace fucina::quant::detail {

namespace {

constexpr std::int64_t round64(std::int64_t n) { return (n + 63) / 64 * 64; }

template <int QuantBytes>
std::int64_t group_bytes(std::int64_t cols) {
  const std::int64_t nb = cols / 32;
  return round64(nb * QuantBytes + nb * kPackRows * 2);
}

// Writes the scales region and returns each row's blocks (nullptr rows -> zero).
template <class Block, int QuantBytes>
void pack_scales(const std::byte* const* rows, std::int64_t nb, std::byte* dst) {
  auto* d = reinterpret_cast<f16_bits*>(dst + nb * QuantBytes);
  for (std::int64_t b = 0; b < nb; ++b)
    for (int r = 0; r < kPackRows; ++r)
      d[b * kPackRows + r] = rows[r] == nullptr ? f16_bits{0} : reinterpret_cast<const Block*>(rows[r])[b].d;
  const std::int64_t used = nb * QuantBytes + nb * kPackRows * 2;
  std::memset(dst + used, 0, static_cast<std::size_t>(group_bytes<QuantBytes>(nb * 32) - used));
}

// Lane r of chunk c in block b = 4-byte word c of row r's block b quants, xor `flip`
// (padding rows: the word that decodes to 0).
template <class Block, int Chunks>
void pack_words(const std::byte* const* rows, std::int64_t nb, std::uint32_t flip, std::uint32_t zero, std::byte* dst) {
  for (std::int64_t b = 0; b < nb; ++b)
    for (int r = 0; r < kPackRows; ++r) {
      const Block* blk = rows[r] == nullptr ? nullptr : reinterpret_cast<const Block*>(rows[r]) + b;
      for (int c = 0; c < Chunks; ++c) {
        std::uint32_t w = zero;
        if (blk != nullptr) {
          std::memcpy(&w, reinterpret_cast<const std::uint8_t*>(blk->qs) + 4 * c, 4);
          w ^= flip;
        }
        std::memcpy(dst + (b * Chunks + c) * 64 + r * 4, &w, 4);
      }
    }
}

void pack_group_q8_0(const std::byte* const* rows, std::int64_t cols, std::byte* dst) {
  const std::int64_t nb = cols / 32;
  pack_words<BlockQ8_0, 8>(rows, nb, 0x80808080u, 0x80808080u, dst);
  pack_scales<BlockQ8_0, 512>(rows, nb, dst);
}

void pack_group_q4_0(const std::byte* const* rows, std::int64_t cols, std::byte* dst) {
  const std::int64_t nb = cols / 32;
  pack_words<BlockQ4_0, 4>(rows, nb, 0u, 0x88888888u, dst);
  pack_scales<BlockQ4_0, 256>(rows, nb, dst);
}

// Element k (0..31) of lane r in block b, as the unsigned stored value.
int unsigned_q8_0(const std::byte* quants, int r, int k) {
  return static_cast<std::uint8_t>(quants[(k / 4) * 64 + r * 4 + k % 4]);
}
int unsigned_q4_0(const std::byte* quants, int r, int k) {
  const auto byte = static_cast<std::uint8_t>(quants[((k % 16) / 4) * 64 + r * 4 + k % 4]);
  return k < 16 ? byte & 0x0f : byte >> 4;
}

// The reference: one output at a time, in the order of Note [Packed determinism].
template <int QuantBytes, int Offset, int (*Unsigned)(const std::byte*, int, int)>
void kernel_scalar(const PackedMatrix& w, std::int64_t g0, std::int64_t g1, const std::byte* act, std::int64_t n_act,
                   float* y, std::int64_t ldy) {
  const std::int64_t nb = w.cols() / 32;
  const std::int64_t act_stride = nb * static_cast<std::int64_t>(sizeof(PackedActQ8));
  for (std::int64_t g = g0; g < g1; ++g) {
    const std::byte* quants = w.group(g);
    const auto* scales = reinterpret_cast<const f16_bits*>(quants + nb * QuantBytes);
    for (std::int64_t i = 0; i < n_act; ++i) {
      const auto* a = reinterpret_cast<const PackedActQ8*>(act + i * act_stride);
      for (int r = 0; r < kPackRows && g * kPackRows + r < w.rows(); ++r) {
        float acc = 0.f;
        for (std::int64_t b = 0; b < nb; ++b) {
          int isum = -Offset * a[b].sum;
          for (int k = 0; k < 32; ++k) isum += Unsigned(quants + b * QuantBytes, r, k) * a[b].q[k];
          acc = std::fma(static_cast<float>(isum), fp16_to_fp32(scales[b * kPackRows + r]) * a[b].d, acc);
        }
        y[i * ldy + g * kPackRows + r] = acc;
      }
    }
  }
}

#if FUCINA_ARCH_AVX512VNNI

// The 8 unsigned 64-byte operands of block b: operand c pairs with activation bytes 4c..4c+3.
struct ChunksQ8_0 {
  static void load(const std::byte* q, __m512i* v) {
    for (int c = 0; c < 8; ++c) v[c] = _mm512_load_si512(q + 64 * c);
  }
};
struct ChunksQ4_0 {
  static void load(const std::byte* q, __m512i* v) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m512i x = _mm512_load_si512(q + 64 * c);
      v[c] = _mm512_and_si512(x, low);
      v[c + 4] = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
    }
  }
};

inline __m512i act_word(const PackedActQ8& a, int c) {
  std::int32_t w;
  std::memcpy(&w, a.q + 4 * c, 4);
  return _mm512_set1_epi32(w);
}

// Decode prefetch distance. In-process A/B on Qwen3-0.6B decode (2 threads, alternating
// 32-token windows): 4 KiB over 2 KiB +7-9% on Q4_0, +1% on Q8_0; 8 KiB 1-4% below 4 KiB.
constexpr int kPrefetchAhead = 4096;

// Rows tile of T activation rows against one group: weights unpacked once per block.
template <int QuantBytes, int Offset, class Chunks, int T>
void tile_avx512(const std::byte* quants, const f16_bits* scales, std::int64_t nb, const PackedActQ8* const* a,
                 float* const* out, __mmask16 mask, const f16_bits* next_scales) {
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    // Decode streams weights from DRAM, one row or a batch's 8 rows alike (without this an
    // 8-row tile ran at half the speed): ask for them ahead.
    for (int l = 0; l < QuantBytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(quants + b * QuantBytes + kPrefetchAhead + l), _MM_HINT_T0);
    // The scales sit after a group's quants, a second stream: fetch the next group's
    // during this one, so a group never starts on a missed scale line.
    _mm_prefetch(reinterpret_cast<const char*>(next_scales + b * kPackRows), _MM_HINT_T0);
    __m512i v[8];
    Chunks::load(quants + b * QuantBytes, v);
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales + b * kPackRows)));
    for (int i = 0; i < T; ++i) {
      const PackedActQ8& ab = a[i][b];
      // Two chains of four keep the dependent vpdpbusd latency off the critical path.
      __m512i s0 = _mm512_set1_epi32(-Offset * ab.sum), s1 = _mm512_setzero_si512();
      s0 = _mm512_dpbusd_epi32(s0, v[0], act_word(ab, 0));
      s1 = _mm512_dpbusd_epi32(s1, v[1], act_word(ab, 1));
      s0 = _mm512_dpbusd_epi32(s0, v[2], act_word(ab, 2));
      s1 = _mm512_dpbusd_epi32(s1, v[3], act_word(ab, 3));
      s0 = _mm512_dpbusd_epi32(s0, v[4], act_word(ab, 4));
      s1 = _mm512_dpbusd_epi32(s1, v[5], act_word(ab, 5));
      s0 = _mm512_dpbusd_epi32(s0, v[6], act_word(ab, 6));
      s1 = _mm512_dpbusd_epi32(s1, v[7], act_word(ab, 7));
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(ab.d));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), dd, acc[i]);
    }
  }
  for (int i = 0; i < T; ++i) _mm512_mask_storeu_ps(out[i], mask, acc[i]);
}

template <int QuantBytes, int Offset, class Chunks>
void kernel_avx512(const PackedMatrix& w, std::int64_t g0, std::int64_t g1, const std::byte* act, std::int64_t n_act,
                   float* y, std::int64_t ldy) {
  const std::int64_t nb = w.cols() / 32;
  for_each_act_tile<PackedActQ8>(w, g0, g1, act, nb * static_cast<std::int64_t>(sizeof(PackedActQ8)), n_act, y, ldy,
                                 [&](auto t, std::int64_t g, const PackedActQ8* const* a, float* const* out, std::uint16_t mask) {
                                   const std::byte* quants = w.group(g);
                                   const auto* scales = reinterpret_cast<const f16_bits*>(quants + nb * QuantBytes);
                                   const auto* next_scales = reinterpret_cast<const f16_bits*>(quants + w.group_bytes() + nb * QuantBytes);
                                   tile_avx512<QuantBytes, Offset, Chunks, decltype(t)::value>(quants, scales, nb, a, out, mask, next_scales);
                                 });
}

#endif

}  // namespace

const PackedFormat& packed_q8_0() {
  static const PackedFormat f{QuantType::Q8_0, group_bytes<512>, pack_group_q8_0,
                              kernel_scalar<512, 128, unsigned_q8_0>,
#if FUCINA_ARCH_AVX512VNNI
                              kernel_avx512<512, 128, ChunksQ8_0>
#else
                              nullptr
#endif
  };
  return f;
}

const PackedFormat& packed_q4_0() {
  static const PackedFormat f{QuantType::Q4_0, group_bytes<256>, pack_group_q4_0,
                              kernel_scalar<256, 8, unsigned_q4_0>,
#if FUCINA_ARCH_AVX512VNNI
                              kernel_avx512<256, 8, ChunksQ4_0>
#else
                              nullptr
#endif
  };
  return f;
}

}  // namespace fucina::quant::detail
