// Encoders and decoders against goldens produced by ggml itself (tests/data/quant/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/quant/blocks_legacy.hpp"
#include "fucina/quant/iq4.hpp"
#include "fucina/quant/k_quants.hpp"
#include "fucina/quant/packed.hpp"
#include "fucina/quant/traits.hpp"
#include "golden.hpp"

namespace fucina::quant::test {
namespace {

struct Case {
  QuantType type;
  const char* file;
};

const Case kWeightTypes[] = {
    {QuantType::F16, "f16.bin"},     {QuantType::BF16, "bf16.bin"},    {QuantType::Q4_0, "q4_0.bin"},
    {QuantType::Q4_1, "q4_1.bin"},   {QuantType::Q5_0, "q5_0.bin"},    {QuantType::Q5_1, "q5_1.bin"},
    {QuantType::Q8_0, "q8_0.bin"},   {QuantType::Q2_K, "q2_k.bin"},    {QuantType::Q3_K, "q3_k.bin"},
    {QuantType::Q4_K, "q4_k.bin"},   {QuantType::Q5_K, "q5_k.bin"},    {QuantType::Q6_K, "q6_k.bin"},
    {QuantType::IQ4_NL, "iq4_nl.bin"}, {QuantType::IQ4_XS, "iq4_xs.bin"}, {QuantType::TQ1_0, "tq1_0.bin"},
    {QuantType::TQ2_0, "tq2_0.bin"},
};

class WeightGolden : public ::testing::TestWithParam<Case> {};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(codec_traits(info.param.type).name);
}

TEST_P(WeightGolden, EncoderIsByteExact) {
  const Case c = GetParam();
  const auto x = inputs();
  const Golden g = load_golden(c.file);
  ASSERT_EQ(g.type, static_cast<std::uint32_t>(c.type));
  ASSERT_EQ(static_cast<std::int64_t>(g.row_bytes), row_bytes(c.type, kN));
  std::vector<std::uint8_t> out(g.row_bytes);
  for (int r = 0; r < kRows; ++r) {
    quantize_row(c.type, x.data() + r * kN, out.data(), kN);
    std::size_t first_diff = out.size();
    for (std::size_t b = 0; b < out.size(); ++b) {
      if (out[b] != g.row(r)[b]) {
        first_diff = b;
        break;
      }
    }
    EXPECT_EQ(first_diff, out.size()) << "row " << r << " first differing byte " << first_diff;
  }
}

TEST_P(WeightGolden, DecoderMatchesGgmlBitwise) {
  const Case c = GetParam();
  const Golden g = load_golden(c.file);
  std::vector<float> y(kN);
  for (int r = 0; r < kRows; ++r) {
    dequantize_row(c.type, g.row(r), y.data(), kN);
    int bad = 0;
    for (int i = 0; i < kN; ++i) bad += same_float(y[i], g.deq[r * kN + i]) ? 0 : 1;
    EXPECT_EQ(bad, 0) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ggml, WeightGolden, ::testing::ValuesIn(kWeightTypes), case_name);

// The CPU backend's activation quantizers (what ggml's matmul feeds the dot kernels).
TEST(ActivationGolden, MatchesGgmlCpuBackend) {
  const auto x = inputs();
  const Case acts[] = {{QuantType::Q8_0, "act_q8_0.bin"}, {QuantType::Q8_1, "act_q8_1.bin"},
                       {QuantType::Q8_K, "act_q8_k.bin"}};
  for (const Case& c : acts) {
    const Golden g = load_golden(c.file);
    std::vector<std::uint8_t> out(g.row_bytes);
    for (int r = 0; r < kRows; ++r) {
      quantize_row_activation(c.type, x.data() + r * kN, out.data(), kN);
      EXPECT_TRUE(std::equal(out.begin(), out.end(), g.row(r))) << c.file << " row " << r;
    }
  }
}

// The SIMD Q8_K activation encoder writes the scalar encoder's bytes: random blocks of
// every scale, magnitude ties of both signs (the first one sets the sign of the scale),
// zero blocks and blocks holding NaN or infinity.
TEST(ActivationGolden, Q8KSimdEqualsScalar) {
  constexpr int kBlocks = 64;
  std::vector<float> x(kBlocks * kQK_K);
  std::mt19937 rng(20);
  std::normal_distribution<float> g(0.f, 1.f);
  for (int b = 0; b < kBlocks; ++b) {
    float* v = x.data() + b * kQK_K;
    const float scale = std::ldexp(1.f, b % 40 - 20);
    for (int j = 0; j < kQK_K; ++j) v[j] = g(rng) * scale;
    switch (b % 8) {
      case 1: v[37] = 100 * scale, v[200] = -100 * scale; break;  // tie, positive first
      case 2: v[5] = -100 * scale, v[6] = 100 * scale; break;      // tie, negative first
      case 3: std::fill(v, v + kQK_K, 0.f); break;
      case 4: std::fill(v, v + kQK_K, -0.f), v[255] = 1e-30f; break;
      case 5: v[17] = std::numeric_limits<float>::quiet_NaN(); break;
      case 6: v[99] = -std::numeric_limits<float>::infinity(); break;
      case 7: v[0] = 127.5f * scale, v[1] = -0.5f * scale; break;  // halves meet the rounding
      default: break;
    }
  }
  std::vector<BlockQ8_K> want(kBlocks), got(kBlocks);
  quantize_row_q8_K(x.data(), want.data(), static_cast<std::int64_t>(x.size()));
  if (!quantize_row_q8_K_simd(x.data(), got.data(), static_cast<std::int64_t>(x.size())))
    GTEST_SKIP() << "no SIMD arm in this build";
  for (int b = 0; b < kBlocks; ++b)
    EXPECT_EQ(std::memcmp(&want[b], &got[b], sizeof(BlockQ8_K)), 0) << "block " << b;
}

// The packed kernels' Q8_0 activation rows (quantize_packed_act: AVX-512 when compiled)
// are their scalar twin's bytes: blocks of every scale, zeros of both signs, halves that
// meet the round-to-even, a saturating +-127.5 step, NaN and infinities.
TEST(ActivationGolden, PackedQ8SimdEqualsScalar) {
  constexpr int kBlocks = 96, kCols = kBlocks * 32;
  std::vector<float> x(kCols);
  std::mt19937 rng(21);
  std::normal_distribution<float> g(0.f, 1.f);
  for (int b = 0; b < kBlocks; ++b) {
    float* v = x.data() + b * 32;
    const float scale = std::ldexp(1.f, b % 48 - 24);
    for (int j = 0; j < 32; ++j) v[j] = g(rng) * scale;
    switch (b % 8) {
      case 1: std::fill(v, v + 32, 0.f); break;
      case 2: std::fill(v, v + 32, -0.f), v[31] = 1e-38f; break;
      case 3: v[0] = 127.f * scale, v[1] = 0.5f * scale, v[2] = -1.5f * scale, v[3] = 2.5f * scale; break;
      case 4: v[b % 32] = std::numeric_limits<float>::quiet_NaN(); break;
      case 5: v[7] = -std::numeric_limits<float>::infinity(); break;
      case 6: v[20] = std::numeric_limits<float>::max(), v[21] = -std::numeric_limits<float>::max(); break;
      case 7: v[0] = std::numeric_limits<float>::quiet_NaN(), v[9] = 1e30f; break;
      default: break;
    }
  }
  for (const QuantType type : {QuantType::Q4_0, QuantType::Q8_0}) {
    const auto bytes = static_cast<std::size_t>(packed_act_bytes(type, kCols));
    std::vector<std::byte> want(bytes), got(bytes);
    quantize_packed_act_scalar(type, x.data(), want.data(), kCols);
    quantize_packed_act(type, x.data(), got.data(), kCols);
    for (std::size_t b = 0; b < kBlocks; ++b)
      EXPECT_EQ(std::memcmp(want.data() + b * bytes / kBlocks, got.data() + b * bytes / kBlocks, bytes / kBlocks), 0)
          << "block " << b;
  }
}

// quantize_row(Q8_1) is ggml's quantize_row_q8_1_ref (round half away from zero).
TEST(ReferenceGolden, Q8_1MatchesGgmlRef) {
  const auto x = inputs();
  const Golden g = load_golden("q8_1_ref.bin");
  std::vector<std::uint8_t> out(g.row_bytes);
  for (int r = 0; r < kRows; ++r) {
    quantize_row(QuantType::Q8_1, x.data() + r * kN, out.data(), kN);
    EXPECT_TRUE(std::equal(out.begin(), out.end(), g.row(r))) << "row " << r;
  }
}

TEST(ActivationGolden, Q8KDecodeMatchesGgml) {
  const Golden g = load_golden("act_q8_k.bin");
  std::vector<float> y(kN);
  for (int r = 0; r < kRows; ++r) {
    dequantize_row(QuantType::Q8_K, g.row(r), y.data(), kN);
    for (int i = 0; i < kN; ++i) ASSERT_TRUE(same_float(y[i], g.deq[r * kN + i])) << r << ":" << i;
  }
}

// Independent check of the two Q8_0 roundings on a tie: amax = 127 makes d = 1 exactly,
// so 62.5 rounds half away from zero (63) in the reference encoder and half to even (62)
// in the activation encoder; 63.5 rounds to 64 in both.
TEST(ActivationQ8_0, TieRounding) {
  float x[32] = {};
  x[0] = 127.0f;
  x[1] = 62.5f;
  x[2] = -62.5f;
  x[3] = 63.5f;
  BlockQ8_0 ref{}, act{};
  quantize_row_q8_0(x, &ref, 32);
  quantize_act_q8_0(x, &act, 32);
  EXPECT_EQ(ref.qs[1], 63);
  EXPECT_EQ(ref.qs[2], -63);
  EXPECT_EQ(act.qs[1], 62);
  EXPECT_EQ(act.qs[2], -62);
  EXPECT_EQ(ref.qs[3], 64);
  EXPECT_EQ(act.qs[3], 64);
  EXPECT_EQ(fp16_to_fp32(ref.d), 1.0f);
}

// ggml's quantize_row_iq4_nl_ref (no scale search) on rows whose blocks are all non-zero
// (on all-zero blocks ggml reads uninitialised codes).
TEST(Iq4NlFast, MatchesGgmlRef) {
  const auto x = inputs();
  const Golden g = load_golden("iq4_nl_ref.bin");
  std::vector<BlockIQ4_NL> out(kN / 32);
  for (int r = 0; r < kRows; ++r) {
    if (r == 0 || r == 3) continue;
    quantize_row_iq4_nl_fast(x.data() + r * kN, out.data(), kN);
    EXPECT_EQ(std::memcmp(out.data(), g.row(r), g.row_bytes), 0) << "row " << r;
  }
}

TEST(Traits, SizesAndErrors) {
  EXPECT_EQ(row_bytes(QuantType::Q4_K, 512), 288);
  EXPECT_EQ(row_bytes(QuantType::TQ1_0, 256), 54);
  EXPECT_EQ(codec_traits(QuantType::Q6_K).vec_dot_type, QuantType::Q8_K);
  EXPECT_FALSE(find_codec_traits(16).has_value());  // IQ2_XXS: not handled here
  EXPECT_TRUE(find_codec_traits(35).has_value());
  float x[40] = {};
  std::uint8_t buf[256] = {};
  EXPECT_THROW(quantize_row(QuantType::Q4_K, x, buf, 40), fucina::Error);
  EXPECT_THROW(dequantize_row(QuantType::Q8_0, buf, x, 33), fucina::Error);
  EXPECT_THROW(quantize_row(static_cast<QuantType>(16), x, buf, 32), fucina::Error);
  EXPECT_THROW(quantize_row_activation(QuantType::Q4_0, x, buf, 32), fucina::Error);
}

}  // namespace
}  // namespace fucina::quant::test

namespace fucina::quant::test {
namespace {

// Non-finite input has no ggml-defined encoding (its C conversions are undefined there);
// ours must stay well-defined (no crash or sanitizer report) and keep it inside the
// blocks that hold it: the finite second super-block encodes as it would alone.
TEST(NonFinite, StaysInsideItsBlocks) {
  std::vector<float> x(512);
  for (int i = 0; i < 512; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  x[3] = NAN;
  x[40] = INFINITY;
  x[200] = -INFINITY;
  for (const Case& c : kWeightTypes) {
    const std::int64_t rb = row_bytes(c.type, 512);
    std::vector<std::uint8_t> out(rb), half(rb / 2);
    std::vector<float> y(512);
    quantize_row(c.type, x.data(), out.data(), 512);
    dequantize_row(c.type, out.data(), y.data(), 512);
    quantize_row(c.type, x.data() + 256, half.data(), 256);
    EXPECT_EQ(std::memcmp(out.data() + rb / 2, half.data(), half.size()), 0) << codec_traits(c.type).name;
    for (int i = 256; i < 512; ++i) ASSERT_TRUE(std::isfinite(y[i])) << codec_traits(c.type).name << " " << i;
  }
  for (QuantType t : {QuantType::Q8_0, QuantType::Q8_1, QuantType::Q8_K}) {
    std::vector<std::uint8_t> out(row_bytes(t, 512)), half(row_bytes(t, 256));
    quantize_row_activation(t, x.data(), out.data(), 512);
    quantize_row_activation(t, x.data() + 256, half.data(), 256);
    EXPECT_EQ(std::memcmp(out.data() + half.size(), half.data(), half.size()), 0);
  }
}

}  // namespace
}  // namespace fucina::quant::test

