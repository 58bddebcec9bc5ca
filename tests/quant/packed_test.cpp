// Packed (interleaved) weight kernels, Q8_0 and Q4_0: the AVX512-VNNI arm equals the scalar
// arm bit for bit; both equal the one-row dot kernels up to float summation order; the
// integer part is exact; padding rows of a partial group are never written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/quant/packed.hpp"
#include "fucina/quant/traits.hpp"
#include "fucina/quant/vec_dot.hpp"
#include "packed_case.hpp"

namespace fucina::quant::test {
namespace {

using Case = PackedCase;
constexpr auto make_case = make_packed_case;

std::vector<float> run(PackedKernel k, const PackedMatrix& m, const Case& c, float fill) {
  const std::int64_t ldy = c.rows + 3;  // a stride wider than the row: padding must stay untouched
  std::vector<float> y(static_cast<std::size_t>(c.n_act * ldy), fill);
  k(m, 0, m.groups(), c.acts.data(), c.n_act, y.data(), ldy);
  for (std::int64_t i = 0; i < c.n_act; ++i)
    for (std::int64_t o = c.rows; o < ldy; ++o) EXPECT_EQ(y[i * ldy + o], fill) << "wrote past the last row";
  return y;
}

class PackedTest : public ::testing::TestWithParam<QuantType> {};

TEST_P(PackedTest, ArmsAgreeAndMatchOneRowDots) {
  const QuantType t = GetParam();
  for (const std::int64_t cols : {256, 1024}) {
    for (const std::int64_t n_act : kActRowCounts) {
      const std::int64_t rows = 40;  // two full groups and a partial one
      const Case c = make_case(t, rows, cols, n_act, static_cast<unsigned>(cols + n_act));
      const PackedMatrix m = pack_matrix(t, c.weights.data(), rows, cols, row_bytes(t, cols));
      const auto ref = run(packed_kernel(DotArm::Scalar, t), m, c, -7.f);
      if (PackedKernel fast = packed_kernel(DotArm::Avx512Vnni, t)) {
        const auto got = run(fast, m, c, -7.f);
        ASSERT_EQ(std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float)), 0) << "cols " << cols << " n_act " << n_act;
      }
      const DotFn dot = dot_kernel(DotArm::Scalar, t);
      const std::int64_t ab = row_bytes(codec_traits(t).vec_dot_type, cols);
      for (std::int64_t i = 0; i < n_act; ++i)
        for (std::int64_t o = 0; o < rows; ++o) {
          double mag = 0;
          for (std::int64_t k = 0; k < cols; ++k) mag += std::fabs(c.wf[o * cols + k] * c.af[i * cols + k]);
          const float want = dot(cols, c.weights.data() + o * row_bytes(t, cols), c.dot_acts.data() + i * ab);
          EXPECT_NEAR(ref[i * (rows + 3) + o], want, 1e-5 * mag + 1e-30) << "row " << o << " act " << i;
        }
    }
  }
}

// Both arms, at every row count: a batch row's outputs are the row's solo outputs, bit for bit.
TEST_P(PackedTest, BatchRowsEqualSoloRuns) {
  const QuantType t = GetParam();
  for (const std::int64_t cols : {256, 1024})
    for (const std::int64_t n_act : kActRowCounts) {
      const std::int64_t rows = 40;
      const Case c = make_case(t, rows, cols, n_act, static_cast<unsigned>(cols + 101 + n_act));
      const PackedMatrix m = pack_matrix(t, c.weights.data(), rows, cols, row_bytes(t, cols));
      for (const DotArm arm : {DotArm::Scalar, DotArm::Avx512Vnni})
        if (PackedKernel k = packed_kernel(arm, t)) expect_rows_equal_solo_runs(k, c, m);
    }
}

// Scales of 1 and small integers: every float is exact, so any integer slip shows.
TEST_P(PackedTest, IntegerPartIsExact) {
  const QuantType t = GetParam();
  const std::int64_t rows = 16, cols = 128;
  std::mt19937 rng(5);
  std::vector<float> x(cols);
  std::vector<std::byte> w(static_cast<std::size_t>(rows * row_bytes(t, cols)));
  std::vector<float> wf(rows * cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    // Integers with the format's extreme value in every block, so the scale is 1.
    const bool q4 = t == QuantType::Q4_0;
    const int span = q4 ? 15 : 255;
    for (std::int64_t k = 0; k < cols; ++k)
      x[k] = k % 32 == 0 ? (q4 ? -8.f : 127.f) : static_cast<float>(static_cast<int>(rng() % span) - span / 2);
    quantize_row(t, x.data(), w.data() + r * row_bytes(t, cols), cols);
    dequantize_row(t, w.data() + r * row_bytes(t, cols), wf.data() + r * cols, cols);
  }
  std::vector<float> a(cols);
  for (std::int64_t k = 0; k < cols; ++k) a[k] = k % 32 == 0 ? 127.f : static_cast<float>(static_cast<int>(rng() % 255) - 127);
  std::vector<std::byte> act(static_cast<std::size_t>(packed_act_bytes(t, cols)));
  quantize_packed_act(t, a.data(), act.data(), cols);
  const PackedMatrix m = pack_matrix(t, w.data(), rows, cols, row_bytes(t, cols));
  for (DotArm arm : {DotArm::Scalar, DotArm::Avx512Vnni}) {
    PackedKernel k = packed_kernel(arm, t);
    if (k == nullptr) continue;
    std::vector<float> y(rows);
    k(m, 0, 1, act.data(), 1, y.data(), rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t want = 0;
      for (std::int64_t k2 = 0; k2 < cols; ++k2) want += static_cast<std::int64_t>(wf[r * cols + k2]) * static_cast<std::int64_t>(a[k2]);
      EXPECT_EQ(y[r], static_cast<float>(want)) << "row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, PackedTest, ::testing::Values(QuantType::Q8_0, QuantType::Q4_0),
                         [](const auto& info) { return std::string(codec_traits(info.param).name); });

// Matrices carved from one arena region: aligned, disjoint, and alive after the arena goes.
TEST(Packed, ArenaCarvesAlignedDisjointBlocksThatOutliveIt) {
  const std::int64_t rows = 40, cols = 256;
  const Case c = make_case(QuantType::Q4_0, rows, cols, 2, 9);
  const PackedMatrix alone = pack_matrix(QuantType::Q4_0, c.weights.data(), rows, cols, row_bytes(QuantType::Q4_0, cols));
  std::vector<PackedMatrix> ms;
  {
    PackedArena arena;
    for (int i = 0; i < 3; ++i)
      ms.push_back(pack_matrix(QuantType::Q4_0, c.weights.data(), rows, cols, row_bytes(QuantType::Q4_0, cols), nullptr, &arena));
    auto big = arena.allocate(std::size_t{20} << 20);  // past a quarter region: its own block
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.get()) % (std::uintptr_t{2} << 20), 0u);
  }
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const auto* p = ms[i].group(0);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
    if (i > 0) {
      EXPECT_GE(p, ms[i - 1].group(0) + ms[i - 1].bytes()) << "blocks overlap";
    }
    ASSERT_EQ(std::memcmp(p, alone.group(0), static_cast<std::size_t>(alone.bytes())), 0);
  }
}

TEST(Packed, RejectsWhatItCannotPack) {
  EXPECT_FALSE(packable(QuantType::Q5_1, 256));
  EXPECT_FALSE(packable(QuantType::Q8_0, 48));
  std::vector<std::byte> w(static_cast<std::size_t>(row_bytes(QuantType::Q5_1, 256)));
  EXPECT_THROW(pack_matrix(QuantType::Q5_1, w.data(), 1, 256, row_bytes(QuantType::Q5_1, 256)), Error);
  EXPECT_THROW(pack_matrix(QuantType::Q8_0, w.data(), 1, 256, 7), Error);
}

}  // namespace
}  // namespace fucina::quant::test
