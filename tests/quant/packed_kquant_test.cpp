// Packed (interleaved) weight kernels, Q4_K and Q6_K: the AVX512-VNNI arm equals the scalar
// arm bit for bit; both equal the one-row dot kernels up to float summation order; the
// integer part is exact; a kernel writes only the valid rows of the groups it is given.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fucina/quant/fp16.hpp"
#include "fucina/quant/k_quants.hpp"
#include "fucina/quant/packed.hpp"
#include "fucina/quant/traits.hpp"
#include "fucina/quant/vec_dot.hpp"
#include "packed_case.hpp"

namespace fucina::quant::test {
namespace {

using Case = PackedCase;
constexpr auto make_case = make_packed_case;

constexpr float kFill = -7.f;

// Runs groups [g0, g1) into a buffer wider than the rows, prefilled with kFill.
std::vector<float> run(PackedKernel k, const PackedMatrix& m, const Case& c, std::int64_t g0, std::int64_t g1) {
  const std::int64_t ldy = c.rows + 3;
  std::vector<float> y(static_cast<std::size_t>(c.n_act * ldy), kFill);
  k(m, g0, g1, c.acts.data(), c.n_act, y.data(), ldy);
  return y;
}

// Every output outside rows [16 g0, min(16 g1, rows)) still holds kFill.
void expect_only_rows_written(const std::vector<float>& y, const Case& c, std::int64_t g0, std::int64_t g1) {
  const std::int64_t ldy = c.rows + 3, lo = g0 * kPackRows, hi = std::min(g1 * kPackRows, c.rows);
  for (std::int64_t i = 0; i < c.n_act; ++i)
    for (std::int64_t o = 0; o < ldy; ++o) {
      const float v = y[static_cast<std::size_t>(i * ldy + o)];
      if (o >= lo && o < hi) {
        EXPECT_TRUE(std::isfinite(v)) << "row " << o;
      } else {
        EXPECT_EQ(v, kFill) << "wrote row " << o << " of act " << i;
      }
    }
}

class PackedKQuantTest : public ::testing::TestWithParam<QuantType> {};

TEST_P(PackedKQuantTest, ArmsAgreeAndMatchOneRowDots) {
  const QuantType t = GetParam();
  ASSERT_TRUE(packable(t, 256));
  for (const std::int64_t cols : {256, 1024}) {
    for (const std::int64_t n_act : kActRowCounts) {
      const std::int64_t rows = 40;  // two full groups and a partial one
      const Case c = make_case(t, rows, cols, n_act, static_cast<unsigned>(cols * 31 + n_act));
      const std::int64_t wb = row_bytes(t, cols), ab = row_bytes(QuantType::Q8_K, cols);
      ASSERT_EQ(c.acts, c.dot_acts) << "K formats read ggml's Q8_K rows as they are";
      const PackedMatrix m = pack_matrix(t, c.weights.data(), rows, cols, wb);
      ASSERT_EQ(m.groups(), 3);
      const auto ref = run(packed_kernel(DotArm::Scalar, t), m, c, 0, m.groups());
      expect_only_rows_written(ref, c, 0, m.groups());
      if (PackedKernel fast = packed_kernel(DotArm::Avx512Vnni, t)) {
        const auto got = run(fast, m, c, 0, m.groups());
        ASSERT_EQ(std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float)), 0)
            << "cols " << cols << " n_act " << n_act;
      }
      const DotFn dot = dot_kernel(DotArm::Scalar, t);
      for (std::int64_t i = 0; i < n_act; ++i)
        for (std::int64_t o = 0; o < rows; ++o) {
          double mag = 0;
          for (std::int64_t k = 0; k < cols; ++k) mag += std::fabs(c.wf[o * cols + k] * c.af[i * cols + k]);
          const float want = dot(cols, c.weights.data() + o * wb, c.dot_acts.data() + i * ab);
          EXPECT_NEAR(ref[i * (rows + 3) + o], want, 1e-5 * mag + 1e-30) << "row " << o << " act " << i;
        }
    }
  }
}

// A group range writes only its own rows, including the partial last group.
TEST_P(PackedKQuantTest, WritesOnlyItsGroups) {
  const QuantType t = GetParam();
  const Case c = make_case(t, 40, 512, 5, 11);
  const PackedMatrix m = pack_matrix(t, c.weights.data(), c.rows, c.cols, row_bytes(t, c.cols));
  for (DotArm arm : {DotArm::Scalar, DotArm::Avx512Vnni}) {
    PackedKernel k = packed_kernel(arm, t);
    if (k == nullptr) continue;
    const auto full = run(k, m, c, 0, 3);
    for (const auto& [g0, g1] : {std::pair<std::int64_t, std::int64_t>{1, 2}, {2, 3}, {0, 1}}) {
      const auto part = run(k, m, c, g0, g1);
      expect_only_rows_written(part, c, g0, g1);
      for (std::int64_t i = 0; i < c.n_act; ++i)
        for (std::int64_t o = g0 * kPackRows; o < std::min(g1 * kPackRows, c.rows); ++o)
          EXPECT_EQ(part[i * (c.rows + 3) + o], full[i * (c.rows + 3) + o]);
    }
  }
}

// Raw blocks with d = dmin = 1 and activations with d = 1: every partial sum is an integer
// below 2^24, so the float result must equal the naive int64 dot of the decoded values.
std::vector<std::byte> exact_weights(QuantType t, std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  const std::int64_t nsb = cols / kQK_K;
  std::vector<std::byte> w(static_cast<std::size_t>(rows * row_bytes(t, cols)));
  auto byte = [&] { return static_cast<std::uint8_t>(rng() & 0xFF); };
  for (std::int64_t b = 0; b < rows * nsb; ++b) {
    if (t == QuantType::Q4_K) {
      auto& blk = reinterpret_cast<BlockQ4_K*>(w.data())[b];
      blk.d = blk.dmin = fp32_to_fp16(1.f);
      for (auto& s : blk.scales) s = byte();
      for (auto& q : blk.qs) q = byte();
    } else {
      auto& blk = reinterpret_cast<BlockQ6_K*>(w.data())[b];
      blk.d = fp32_to_fp16(1.f);
      for (auto& s : blk.scales) s = static_cast<std::int8_t>(byte());
      blk.scales[0] = -128;  // the extremes of the int8 scale
      blk.scales[15] = 127;
      for (auto& q : blk.ql) q = byte();
      for (auto& q : blk.qh) q = byte();
    }
  }
  return w;
}

// Both arms, at every row count: a batch row's outputs are the row's solo outputs, bit for bit.
TEST_P(PackedKQuantTest, BatchRowsEqualSoloRuns) {
  const QuantType t = GetParam();
  for (const std::int64_t cols : {256, 1024})
    for (const std::int64_t n_act : kActRowCounts) {
      const std::int64_t rows = 40;
      const Case c = make_case(t, rows, cols, n_act, static_cast<unsigned>(cols * 37 + n_act));
      const PackedMatrix m = pack_matrix(t, c.weights.data(), rows, cols, row_bytes(t, cols));
      for (const DotArm arm : {DotArm::Scalar, DotArm::Avx512Vnni})
        if (PackedKernel k = packed_kernel(arm, t)) expect_rows_equal_solo_runs(k, c, m);
    }
}

TEST_P(PackedKQuantTest, IntegerPartIsExact) {
  const QuantType t = GetParam();
  // Activation bound: Q4_K sums stay below 2 * 8 * 63 * 32 * (15 + 1) * 31 < 2^24, Q6_K below
  // 2 * 16 * 128 * 16 * 32 * 7 < 2^24 (two super-blocks each).
  const int amax = t == QuantType::Q4_K ? 31 : 7;
  const std::int64_t rows = 21, cols = 512, nsb = cols / kQK_K, n_act = 3;
  std::mt19937 rng(17);
  const auto w = exact_weights(t, rows, cols, rng);
  std::vector<float> wf(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    dequantize_row(t, w.data() + r * row_bytes(t, cols), wf.data() + r * cols, cols);
  std::vector<BlockQ8_K> act(static_cast<std::size_t>(n_act * nsb));
  for (auto& blk : act) {
    blk.d = 1.f;
    for (int k = 0; k < kQK_K; ++k)
      blk.qs[k] = static_cast<std::int8_t>(static_cast<int>(rng() % (2 * amax + 1)) - amax);
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int k = 16 * s; k < 16 * s + 16; ++k) sum += blk.qs[k];
      blk.bsums[s] = static_cast<std::int16_t>(sum);
    }
  }
  const PackedMatrix m = pack_matrix(t, w.data(), rows, cols, row_bytes(t, cols));
  for (DotArm arm : {DotArm::Scalar, DotArm::Avx512Vnni}) {
    PackedKernel k = packed_kernel(arm, t);
    if (k == nullptr) continue;
    std::vector<float> y(static_cast<std::size_t>(n_act * rows));
    k(m, 0, m.groups(), reinterpret_cast<const std::byte*>(act.data()), n_act, y.data(), rows);
    for (std::int64_t i = 0; i < n_act; ++i)
      for (std::int64_t r = 0; r < rows; ++r) {
        std::int64_t want = 0;
        for (std::int64_t k2 = 0; k2 < cols; ++k2) {
          const float wv = wf[r * cols + k2];
          ASSERT_EQ(wv, std::round(wv));
          want += static_cast<std::int64_t>(wv) * act[i * nsb + k2 / kQK_K].qs[k2 % kQK_K];
        }
        EXPECT_EQ(y[i * rows + r], static_cast<float>(want)) << "row " << r << " act " << i;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, PackedKQuantTest, ::testing::Values(QuantType::Q4_K, QuantType::Q6_K),
                         [](const auto& info) { return std::string(codec_traits(info.param).name); });

TEST(PackedKQuant, NeedsWholeSuperBlocks) {
  EXPECT_FALSE(packable(QuantType::Q4_K, 128));
  EXPECT_FALSE(packable(QuantType::Q6_K, 32));
  EXPECT_TRUE(packable(QuantType::Q6_K, 512));
}

}  // namespace
}  // namespace fucina::quant::test
