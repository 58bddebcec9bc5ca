// The SIMD decoders give the scalar decoder's bits for random blocks of every format they
// cover (including extreme scales), and decline the formats they do not cover.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fucina/core/rng.hpp"
#include "fucina/quant/blocks_legacy.hpp"
#include "fucina/quant/dequant_simd.hpp"
#include "fucina/quant/k_quants.hpp"
#include "fucina/quant/traits.hpp"

using namespace fucina;
using namespace fucina::quant;

namespace {
// The per-format scalar decoders (dequantize_row itself takes the SIMD arm when present).
void scalar_decode(QuantType type, const std::vector<std::byte>::value_type* src, float* dst, std::int64_t n) {
  switch (type) {
    case QuantType::Q8_0: return dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(src), dst, n);
    case QuantType::Q4_0: return dequantize_row_q4_0(reinterpret_cast<const BlockQ4_0*>(src), dst, n);
    case QuantType::Q4_K: return dequantize_row_q4_K(reinterpret_cast<const BlockQ4_K*>(src), dst, n);
    case QuantType::Q6_K: return dequantize_row_q6_K(reinterpret_cast<const BlockQ6_K*>(src), dst, n);
    default: FAIL() << "no scalar decoder listed";
  }
}
}  // namespace

TEST(DequantSimd, EqualsScalarBitwise) {
  const std::int64_t n = 1024;
  for (auto type : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K}) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      // Random bytes are valid blocks apart from the f16 scales; encode real data for those.
      std::vector<float> src(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) src[static_cast<std::size_t>(i)] = rng::normal(seed, static_cast<std::uint64_t>(i)) * static_cast<float>(seed * seed);
      std::vector<std::byte> blocks(static_cast<std::size_t>(row_bytes(type, n)));
      quantize_row(type, src.data(), blocks.data(), n);
      std::vector<float> want(static_cast<std::size_t>(n)), got(static_cast<std::size_t>(n), -7.f);
      scalar_decode(type, blocks.data(), want.data(), n);
      if (!dequantize_row_simd(type, blocks.data(), got.data(), n)) GTEST_SKIP() << "no SIMD decoder in this build";
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << codec_traits(type).name;
    }
  }
}

TEST(DequantSimd, DeclinesUncoveredFormats) {
  float y[32];
  const std::vector<std::byte> block(64, std::byte{0});
  EXPECT_FALSE(dequantize_row_simd(QuantType::Q5_1, block.data(), y, 32));
}
