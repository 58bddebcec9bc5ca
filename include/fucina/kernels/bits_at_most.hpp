#pragma once
// A bitset of the bytes of an array that are at most a limit: bit i (of word i / 64) is set
// when values[i] <= limit. A grammar mask inside a string is this over the vocabulary's
// plain-token lengths (Note [Plain tokens] in fucina/grammar/matcher.hpp), 152k bytes per
// mask, so the wide arms compare 32 or 64 bytes at once into a word of the bitset.
#include <cstddef>
#include <cstdint>

#include "fucina/kernels/arch.hpp"

#if FUCINA_ARCH_AVX2
#include <immintrin.h>
#endif

namespace fucina::kernels {

// words: (n + 63) / 64 of them, all written (bits past n clear). The scalar twin.
inline void bits_at_most(arch::scalar, const std::uint8_t* values, std::size_t n, std::uint8_t limit,
                         std::uint64_t* words) {
  for (std::size_t w = 0; w * 64 < n; ++w) {
    std::uint64_t word = 0;
    const std::size_t base = w * 64, len = n - base < 64 ? n - base : 64;
    for (std::size_t i = 0; i < len; ++i) word |= std::uint64_t{values[base + i] <= limit} << i;
    words[w] = word;
  }
}

#if FUCINA_ARCH_AVX2
inline void bits_at_most(arch::avx2, const std::uint8_t* values, std::size_t n, std::uint8_t limit,
                         std::uint64_t* words) {
  const __m256i lim = _mm256_set1_epi8(static_cast<char>(limit));
  std::size_t w = 0;
  for (; (w + 1) * 64 <= n; ++w) {
    // v <= limit exactly when min(v, limit) == v (unsigned).
    const auto half = [&](std::size_t at) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + at));
      return static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(v, lim), v)));
    };
    words[w] = half(w * 64) | std::uint64_t{half(w * 64 + 32)} << 32;
  }
  if (w * 64 < n) bits_at_most(arch::scalar{}, values + w * 64, n - w * 64, limit, words + w);
}
#endif

#if FUCINA_ARCH_AVX512
inline void bits_at_most(arch::avx512, const std::uint8_t* values, std::size_t n, std::uint8_t limit,
                         std::uint64_t* words) {
  const __m512i lim = _mm512_set1_epi8(static_cast<char>(limit));
  std::size_t w = 0;
  for (; (w + 1) * 64 <= n; ++w)
    words[w] = _mm512_cmple_epu8_mask(_mm512_loadu_si512(values + w * 64), lim);
  if (w * 64 < n) {
    const __mmask64 tail = (std::uint64_t{1} << (n - w * 64)) - 1;
    words[w] = _mm512_mask_cmple_epu8_mask(tail, _mm512_maskz_loadu_epi8(tail, values + w * 64), lim);
  }
}
#endif

}  // namespace fucina::kernels
