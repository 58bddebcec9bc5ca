// f16/bf16 conversions: decoding checked against independent math for all 65536 patterns,
// encoding against ggml's row converters on specials and random bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "fucina/quant/fp16.hpp"
#include "golden.hpp"

namespace fucina::quant::test {
namespace {

float bits_to_float(std::uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 by definition: (-1)^s * 2^(e-15) * 1.m, subnormals 2^-14 * 0.m.
double half_by_definition(std::uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double sign = s ? -1.0 : 1.0;
  if (e == 0) return sign * std::ldexp(m, -24);
  if (e == 31) return m == 0 ? sign * INFINITY : NAN;
  return sign * std::ldexp(1024 + m, e - 25);
}

TEST(Fp16, DecodeAllPatterns) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float got = fp16_to_fp32(static_cast<f16_bits>(h));
    const double want = half_by_definition(static_cast<std::uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << h;
      EXPECT_EQ(std::signbit(got), (h & 0x8000) != 0) << h;
    }
  }
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    const f16_bits back = fp32_to_fp16(fp16_to_fp32(static_cast<f16_bits>(h)));
    if (nan) EXPECT_EQ(back, static_cast<f16_bits>((h & 0x8000) | 0x7E00)) << h;
    else EXPECT_EQ(back, h) << h;
  }
}

TEST(Bf16, DecodeIsTheHighHalf) {
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xC000), -2.0f);
  EXPECT_TRUE(std::isinf(bf16_to_fp32(0x7F80)));
}

TEST(Fp16Golden, EncodersMatchGgml) {
  const auto raw = read_all("fp16.bin");
  ASSERT_GE(raw.size(), 8u);
  ASSERT_EQ(std::memcmp(raw.data(), "FQH1", 4), 0);
  std::uint32_t n = 0;
  std::memcpy(&n, raw.data() + 4, 4);
  ASSERT_EQ(raw.size(), 8 + n * 8ull);
  std::vector<std::uint32_t> bits(n);
  std::vector<std::uint16_t> h(n), b(n);
  std::memcpy(bits.data(), raw.data() + 8, n * 4);
  std::memcpy(h.data(), raw.data() + 8 + n * 4, n * 2);
  std::memcpy(b.data(), raw.data() + 8 + n * 6, n * 2);
  int bad_h = 0, bad_b = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const float x = bits_to_float(bits[i]);
    bad_h += fp32_to_fp16(x) == h[i] ? 0 : 1;
    bad_b += fp32_to_bf16(x) == b[i] ? 0 : 1;
  }
  EXPECT_EQ(bad_h, 0);
  EXPECT_EQ(bad_b, 0);
  EXPECT_GT(n, 4000u);
}

TEST(Fp16, RoundsHalfToEven) {
  EXPECT_EQ(fp32_to_fp16(bits_to_float(0x3F801000u)), 0x3C00);  // 1 + 2^-11: tie -> even (1.0)
  EXPECT_EQ(fp32_to_fp16(bits_to_float(0x3F803000u)), 0x3C02);  // 1 + 3*2^-11: tie -> even
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);                     // rounds up to +inf
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x3F808000u)), 0x3F80);  // bf16 tie -> even
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x3F818000u)), 0x3F82);
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x7F800001u)), 0x7FC0);  // signalling NaN made quiet
}

}  // namespace
}  // namespace fucina::quant::test
