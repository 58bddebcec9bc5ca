// kernels::expf_glibc's SIMD arms vs libm's expf, bit for bit: the special values and the
// edges of glibc's special cases, every float in [-16, -2^-6] and [-128, -64] (the softmax's
// factors and the underflow edge), a sweep over all bit patterns, and every tail length.
// expf_slow_test.cpp compares all 2^32 floats.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/expf_sweep.hpp"

namespace fucina::kernels {
namespace {

using expf_check::sweep;

template <class Arch>
class ExpfGlibc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Arch::compiled) GTEST_SKIP() << Arch::name << " is not compiled into this build";
  }
};
using Arms = ::testing::Types<arch::avx2, arch::avx512>;
TYPED_TEST_SUITE(ExpfGlibc, Arms);

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

TYPED_TEST(ExpfGlibc, SpecialValuesAndEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                          std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(), -std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(), 88.f, -88.f,
                          0x1.62e42ep6f, -0x1.9fe368p6f, -0x1.9d1d9ep6f, 1.f, -1.f};
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; ++i)  // each edge's neighbours
    if (std::isfinite(x[i])) x.insert(x.end(), {std::nextafter(x[i], inf), std::nextafter(x[i], -inf)});
  std::vector<float> got(x.size());
  expf_glibc(TypeParam{}, x.data(), got.data(), static_cast<std::int64_t>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(bits(got[i]), bits(expf(x[i]))) << "x = " << x[i];
  // The edges land where glibc puts them: inf, the least subnormal, zero.
  auto one = [](float v) {
    float y = 0;
    expf_glibc(TypeParam{}, &v, &y, 1);
    return y;
  };
  EXPECT_TRUE(std::isfinite(one(0x1.62e42ep6f)));
  EXPECT_EQ(one(std::nextafter(0x1.62e42ep6f, inf)), inf);
  EXPECT_EQ(one(std::nextafter(-0x1.9d1d9ep6f, -inf)), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(one(std::nextafter(-0x1.9fe368p6f, -inf)), 0.f);
  EXPECT_EQ(one(-inf), 0.f);
  EXPECT_TRUE(std::isnan(one(std::numeric_limits<float>::quiet_NaN())));
}

TYPED_TEST(ExpfGlibc, EveryFloatInSoftmaxRanges) {
  for (auto [lo, hi] : {std::pair{-0x1p-6f, -16.f}, std::pair{-64.f, -128.f}}) {
    const auto m = sweep<TypeParam>(bits(lo), bits(hi) - bits(lo) + 1);
    EXPECT_EQ(m.count, 0u) << "[" << hi << ", " << lo << "]\n" << m.first;
  }
}

TYPED_TEST(ExpfGlibc, SweepOverAllBitPatterns) {
  const auto m = sweep<TypeParam>(12345, (std::uint64_t{1} << 32) / 251, 251);
  EXPECT_EQ(m.count, 0u) << m.first;
}

TYPED_TEST(ExpfGlibc, EveryLengthAndInPlace) {
  for (int n = 0; n <= 40; ++n) {
    std::vector<float> x(static_cast<std::size_t>(n)), y(x.size());
    for (int i = 0; i < n; ++i)  // every 7th lane one of glibc's special cases (libm redoes it)
      x[static_cast<std::size_t>(i)] = i % 7 == 3 ? -100.f - static_cast<float>(i) : -0.37f * static_cast<float>(i) + 1.5f;
    expf_glibc(TypeParam{}, x.data(), y.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_EQ(bits(y[static_cast<std::size_t>(i)]), bits(expf(x[static_cast<std::size_t>(i)])));
    expf_glibc(TypeParam{}, x.data(), x.data(), n);
    EXPECT_EQ(x, y);
  }
}

}  // namespace
}  // namespace fucina::kernels
