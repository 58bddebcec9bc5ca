// ES noise: the f32 Box-Muller against libm in double, chunking invariance of
// fill_noise, moments, and the independence of streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <set>
#include <vector>

#include "fucina/es/noise.hpp"

using namespace fucina;
using namespace fucina::es;

TEST(EsNoise, PolynomialsMatchLibm) {
  for (std::uint32_t k = 1; k <= (1u << 24); k += 97) {
    const float u = static_cast<float>(k) * 0x1p-24f;  // (0, 1]: the u1 domain
    ASSERT_NEAR(fucina::fast_log(u), std::log(static_cast<double>(u)), 3e-7 * (1 + std::fabs(std::log(u)))) << u;
    const float x = static_cast<float>(k) * 1e-3f;
    ASSERT_NEAR(detail::fast_sqrt(x), std::sqrt(static_cast<double>(x)), 2e-7 * std::sqrt(x)) << x;
  }
  for (std::uint32_t k = 0; k < (1u << 24); k += 89) {
    const float u = static_cast<float>(k) * 0x1p-24f;  // [0, 1): the u2 domain
    float c, s;
    detail::fast_cos_sin_2pi(u, c, s);
    ASSERT_NEAR(c, std::cos(6.283185307179586 * u), 1e-6) << u;
    ASSERT_NEAR(s, std::sin(6.283185307179586 * u), 1e-6) << u;
  }
  EXPECT_EQ(fucina::fast_log(1.f), 0.f);
  EXPECT_LT(detail::fast_sqrt(0.f), 1e-15f);
}

TEST(EsNoise, GaussianPairIsBoxMullerOfTheContractUniforms) {
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const std::uint64_t r = rng::bits(123, i);
    const double u1 = (static_cast<double>(r >> 40) + 1) / 16777216.0;
    const double u2 = static_cast<double>(r & 0xffffff) / 16777216.0;
    const double rad = std::sqrt(-2 * std::log(u1));
    float e, o;
    detail::gaussian_pair(r, e, o);
    ASSERT_NEAR(e, rad * std::cos(6.283185307179586 * u2), 5e-6 * (1 + rad)) << i;
    ASSERT_NEAR(o, rad * std::sin(6.283185307179586 * u2), 5e-6 * (1 + rad)) << i;
  }
}

TEST(EsNoise, FillNoiseIsChunkingInvariant) {
  const std::uint64_t key = stream_key(42, 3, 5);
  std::vector<float> ref(1001);
  for (std::uint64_t i = 0; i < ref.size(); ++i) ref[i] = noise(42, 3, 5, 7 + i);
  // Every (start parity, length parity) combination, in pieces.
  for (std::int64_t piece : {1, 2, 3, 16, 17, 1001}) {
    std::vector<float> got(ref.size());
    for (std::int64_t b = 0; b < static_cast<std::int64_t>(got.size()); b += piece) {
      const std::int64_t n = std::min<std::int64_t>(piece, static_cast<std::int64_t>(got.size()) - b);
      fill_noise(key, 7 + static_cast<std::uint64_t>(b), n, got.data() + b);
    }
    for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(ref[i])) << piece << " " << i;
  }
}

TEST(EsNoise, StandardNormalMoments) {
  const std::int64_t n = 1 << 20;
  std::vector<float> v(static_cast<std::size_t>(n));
  fill_noise(stream_key(1, 0, 0), 0, n, v.data());
  double m1 = 0, m2 = 0, m4 = 0, tail = 0;
  for (float x : v) m1 += x, m2 += double(x) * x, m4 += double(x) * x * x * x, tail += std::fabs(x) > 3;
  m1 /= n, m2 /= n, m4 /= n, tail /= n;
  EXPECT_NEAR(m1, 0, 5e-3);
  EXPECT_NEAR(m2, 1, 5e-3);
  EXPECT_NEAR(m4, 3, 5e-2);
  EXPECT_NEAR(tail, 0.0027, 4e-4);
}

TEST(EsNoise, StreamsDependOnSeedIterationAndStream) {
  std::set<std::uint64_t> keys;
  for (std::uint64_t seed : {0, 1, 42})
    for (std::uint64_t it = 0; it < 20; ++it)
      for (std::uint64_t s = 0; s < 20; ++s) keys.insert(stream_key(seed, it, s));
  EXPECT_EQ(keys.size(), 3u * 20 * 20);
  // Two streams are uncorrelated.
  const std::int64_t n = 1 << 16;
  std::vector<float> a(n), b(n);
  fill_noise(stream_key(9, 0, 0), 0, n, a.data());
  fill_noise(stream_key(9, 0, 1), 0, n, b.data());
  double dot = 0;
  for (std::int64_t i = 0; i < n; ++i) dot += double(a[i]) * b[i];
  EXPECT_LT(std::fabs(dot / n), 0.02);
}
