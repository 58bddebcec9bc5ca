// kernels::expf_glibc's SIMD arms vs libm's expf over all 2^32 floats, bit for bit
// (Note [glibc expf]; ~25 s per arm).
#include <gtest/gtest.h>

#include "kernels/expf_sweep.hpp"

namespace fucina::kernels {
namespace {

template <class Arch>
void expect_every_float() {
  if (!Arch::compiled) GTEST_SKIP() << Arch::name << " is not compiled into this build";
  const auto m = expf_check::sweep<Arch>(0, std::uint64_t{1} << 32);
  EXPECT_EQ(m.count, 0u) << m.first;
}

TEST(ExpfGlibcSlow, EveryFloatAvx512) { expect_every_float<arch::avx512>(); }
TEST(ExpfGlibcSlow, EveryFloatAvx2) { expect_every_float<arch::avx2>(); }

}  // namespace
}  // namespace fucina::kernels
