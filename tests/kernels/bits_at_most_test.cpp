// kernels::bits_at_most: the scalar twin against a plain count of each bit, and the build's
// best arm against the scalar twin, over lengths that end inside and on word boundaries.
#include "fucina/kernels/bits_at_most.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

namespace k = fucina::kernels;

TEST(BitsAtMost, ScalarAndBestArmAgreeWithEachBit) {
  std::mt19937 rng(5);
  for (const std::size_t n : {0, 1, 31, 32, 63, 64, 65, 127, 128, 129, 1000}) {
    std::vector<std::uint8_t> values(n);
    for (auto& v : values) v = static_cast<std::uint8_t>(rng() % 4 ? rng() % 12 : rng());  // mostly near the limits
    for (const int limit : {0, 5, 128, 254, 255}) {
      const std::size_t words = (n + 63) / 64;
      std::vector<std::uint64_t> scalar(words, 0xA5A5A5A5A5A5A5A5ull), best(words, 0x5A5A5A5A5A5A5A5Aull);
      k::bits_at_most(k::arch::scalar{}, values.data(), n, static_cast<std::uint8_t>(limit), scalar.data());
      k::bits_at_most(k::arch::best_arch{}, values.data(), n, static_cast<std::uint8_t>(limit), best.data());
      for (std::size_t i = 0; i < words * 64; ++i) {
        const bool want = i < n && values[i] <= limit;
        ASSERT_EQ(((scalar[i / 64] >> (i % 64)) & 1) != 0, want) << "scalar n=" << n << " limit=" << limit << " i=" << i;
      }
      EXPECT_EQ(best, scalar) << k::arch::best_arch::name << " n=" << n << " limit=" << limit;
    }
  }
}

}  // namespace
