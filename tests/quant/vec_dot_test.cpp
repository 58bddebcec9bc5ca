// Dot kernels: every compiled SIMD arm equals the scalar twin bit for bit, the scalar twin
// equals the f64 dot of the dequantized rows within rounding, and ggml's own vec_dot
// (committed goldens) agrees within rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/kernels/arch.hpp"
#include "fucina/quant/blocks_legacy.hpp"
#include "fucina/quant/k_quants.hpp"
#include "fucina/quant/traits.hpp"
#include "fucina/quant/vec_dot.hpp"
#include "golden.hpp"

namespace fucina::quant::test {
namespace {

const QuantType kDotTypes[] = {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K,
                               QuantType::Q5_K, QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_1,
                               QuantType::IQ4_NL, QuantType::Q2_K, QuantType::Q3_K, QuantType::IQ4_XS,
                               QuantType::TQ1_0, QuantType::TQ2_0};

const DotArm kArms[] = {DotArm::Avx2, DotArm::Avx512Vnni};

std::vector<float> random_row(std::mt19937& rng, std::int64_t n) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = g(rng);
  return x;
}

// Raw random weight bytes (every code path of the unpacking), with finite f16 scales.
std::vector<std::uint8_t> random_weight_bytes(std::mt19937& rng, QuantType t, std::int64_t n) {
  const CodecTraits& tr = codec_traits(t);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(row_bytes(t, n)));
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  // The f16 scale fields (at their ggml-common.h offsets) get finite values below 1.
  const std::int64_t nb = n / tr.block_size;
  for (std::int64_t b = 0; b < nb; ++b) {
    std::uint8_t* blk = bytes.data() + b * tr.block_bytes;
    auto fix = [&](std::size_t off) {
      const f16_bits h = static_cast<f16_bits>((rng() & 0x3BFF) | (rng() & 0x8000));  // |h| < 1.0
      std::memcpy(blk + off, &h, 2);
    };
    switch (t) {
      case QuantType::Q4_0: case QuantType::Q5_0: case QuantType::Q8_0: case QuantType::IQ4_NL:
      case QuantType::IQ4_XS:
        fix(0);
        break;
      case QuantType::Q4_1: case QuantType::Q5_1: case QuantType::Q4_K: case QuantType::Q5_K:
        fix(0);
        fix(2);
        break;
      case QuantType::Q2_K: fix(80); fix(82); break;
      case QuantType::Q3_K: fix(108); break;
      case QuantType::Q6_K: fix(208); break;
      case QuantType::TQ1_0: fix(52); break;
      case QuantType::TQ2_0: fix(64); break;
      default: ADD_FAILURE(); break;
    }
  }
  return bytes;
}

std::vector<std::uint8_t> quantize(QuantType t, const std::vector<float>& x) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(row_bytes(t, static_cast<std::int64_t>(x.size()))));
  quantize_row(t, x.data(), out.data(), static_cast<std::int64_t>(x.size()));
  return out;
}

std::vector<std::uint8_t> quantize_act(QuantType t, const float* x, std::int64_t n) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(row_bytes(t, n)));
  quantize_row_activation(t, x, out.data(), n);
  return out;
}

// Reference: f64 dot of the dequantized rows, plus the sum of |terms| for a tolerance.
void dequant_dot(QuantType wt, std::int64_t n, const void* w, const void* a, double& dot, double& mag) {
  std::vector<float> wf(static_cast<std::size_t>(n)), af(static_cast<std::size_t>(n));
  dequantize_row(wt, w, wf.data(), n);
  dequantize_row(codec_traits(wt).vec_dot_type, a, af.data(), n);
  dot = 0;
  mag = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    dot += static_cast<double>(wf[i]) * af[i];
    mag += std::fabs(static_cast<double>(wf[i]) * af[i]);
  }
}

// Q8_1 stores s = d * sum(q) rounded to f16, so the min term m * s of the Q4_1/Q5_1 dots
// carries up to half an f16 ulp of s that the dequantized dot does not see.
double q8_1_sum_slack(QuantType t, std::int64_t n, const void* w, const void* a) {
  if (codec_traits(t).vec_dot_type != QuantType::Q8_1) return 0.0;
  const auto* ab = static_cast<const BlockQ8_1*>(a);
  const auto* wb = static_cast<const std::uint8_t*>(w);
  const std::int64_t bytes = codec_traits(t).block_bytes;
  double slack = 0;
  for (std::int64_t b = 0; b < n / 32; ++b) {
    f16_bits m = 0;
    std::memcpy(&m, wb + b * bytes + 2, 2);  // Q4_1/Q5_1: d then m
    slack += std::fabs(static_cast<double>(fp16_to_fp32(m)) * fp16_to_fp32(ab[b].s)) * 0x1p-11;
  }
  return slack;
}

std::int64_t test_len(QuantType t) { return codec_traits(t).block_size == 32 ? 32 * 21 : 256 * 5; }

class DotKernel : public ::testing::TestWithParam<QuantType> {};

std::string type_name(const ::testing::TestParamInfo<QuantType>& info) {
  return std::string(codec_traits(info.param).name);
}

TEST_P(DotKernel, SimdArmsEqualScalarBitwise) {
  const QuantType t = GetParam();
  const QuantType at = codec_traits(t).vec_dot_type;
  const std::int64_t n = test_len(t);
  std::mt19937 rng(static_cast<unsigned>(t) * 7919u);
  DotFn scalar = dot_kernel(DotArm::Scalar, t);
  ASSERT_NE(scalar, nullptr);
  int arms_run = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const auto xa = random_row(rng, n);
    const auto act = quantize_act(at, xa.data(), n);
    const auto w = trial % 2 == 0 ? quantize(t, random_row(rng, n)) : random_weight_bytes(rng, t, n);
    const float ref = scalar(n, w.data(), act.data());
    for (DotArm arm : kArms) {
      DotFn f = dot_kernel(arm, t);
      if (f == nullptr) continue;
      ++arms_run;
      EXPECT_TRUE(same_float(f(n, w.data(), act.data()), ref)) << "arm " << static_cast<int>(arm) << " trial " << trial;
    }
    EXPECT_TRUE(same_float(vec_dot(t, n, w.data(), act.data()), ref));
  }
#if FUCINA_ARCH_AVX2
  EXPECT_GT(arms_run, 0) << "no SIMD arm compiled in a SIMD build";
#endif
}

// Multi-row kernels (Note [Multi-row dots]) equal the single-row kernel bit for bit, for
// every group size, on encoded and on random weight bytes.
TEST_P(DotKernel, RowsKernelEqualsSingleRowBitwise) {
  const QuantType t = GetParam();
  const DotRowsFn rows = dot_rows_kernel(t);
  if (rows == nullptr) GTEST_SKIP() << "no multi-row kernel for this type in this build";
  const QuantType at = codec_traits(t).vec_dot_type;
  const std::int64_t n = test_len(t) * 3;  // several 8-block groups plus a tail for 32-blocks
  std::mt19937 rng(static_cast<unsigned>(t) * 31u);
  const DotFn single = dot_kernel(best_dot_arm(), t);
  for (int trial = 0; trial < 4; ++trial) {
    const auto w = trial % 2 == 0 ? quantize(t, random_row(rng, n)) : random_weight_bytes(rng, t, n);
    std::vector<std::vector<std::uint8_t>> acts;
    const void* ptrs[kMaxDotRows];
    for (int r = 0; r < kMaxDotRows; ++r) {
      acts.push_back(quantize_act(at, random_row(rng, n).data(), n));
      ptrs[r] = acts.back().data();
    }
    for (int rm = 1; rm <= kMaxDotRows; ++rm) {
      float out[kMaxDotRows];
      rows(n, w.data(), ptrs, rm, out);
      for (int r = 0; r < rm; ++r)
        EXPECT_TRUE(same_float(out[r], single(n, w.data(), ptrs[r]))) << "rm " << rm << " row " << r << " trial " << trial;
    }
  }
}

TEST_P(DotKernel, MatchesDequantizedDot) {
  const QuantType t = GetParam();
  const QuantType at = codec_traits(t).vec_dot_type;
  const std::int64_t n = test_len(t);
  std::mt19937 rng(static_cast<unsigned>(t) * 104729u);
  for (int trial = 0; trial < 4; ++trial) {
    const auto xa = random_row(rng, n);
    const auto act = quantize_act(at, xa.data(), n);
    const auto w = trial % 2 == 0 ? quantize(t, random_row(rng, n)) : random_weight_bytes(rng, t, n);
    double dot = 0, mag = 0;
    dequant_dot(t, n, w.data(), act.data(), dot, mag);
    const float got = dot_kernel(DotArm::Scalar, t)(n, w.data(), act.data());
    EXPECT_NEAR(got, dot, 4e-6 * mag + q8_1_sum_slack(t, n, w.data(), act.data()) + 1e-30)
        << "trial " << trial;
  }
}

// ggml's CPU vec_dot on the golden rows: weight row r against activation row (r + 5) % 12.
TEST_P(DotKernel, AgreesWithGgmlVecDot) {
  const QuantType t = GetParam();
  const auto raw = read_all("dots.bin");
  ASSERT_GE(raw.size(), 4u);
  const float* ggml = nullptr;
  for (std::size_t off = 4; off + 4 + kRows * 4 <= raw.size(); off += 4 + kRows * 4) {
    std::uint32_t id = 0;
    std::memcpy(&id, raw.data() + off, 4);
    if (id == static_cast<std::uint32_t>(t)) ggml = reinterpret_cast<const float*>(raw.data() + off + 4);
  }
  ASSERT_NE(ggml, nullptr);
  const char* files[] = {"q4_0.bin", "q4_1.bin", "q5_0.bin", "q5_1.bin", "q8_0.bin", "iq4_nl.bin", "q2_k.bin",
                         "q3_k.bin", "q4_k.bin", "q5_k.bin", "q6_k.bin", "iq4_xs.bin", "tq1_0.bin", "tq2_0.bin"};
  Golden wg;
  for (const char* f : files) {
    Golden g = load_golden(f);
    if (g.type == static_cast<std::uint32_t>(t)) wg = std::move(g);
  }
  const QuantType at = codec_traits(t).vec_dot_type;
  const Golden ag = load_golden(at == QuantType::Q8_0 ? "act_q8_0.bin" : at == QuantType::Q8_1 ? "act_q8_1.bin" : "act_q8_k.bin");
  int compared = 0;
  for (int r = 0; r < kRows; ++r) {
    float want = 0;
    std::memcpy(&want, ggml + r, 4);
    const std::uint8_t* a = ag.row((r + 5) % kRows);
    const float got = vec_dot(t, kN, wg.row(r), a);
    if (!std::isfinite(want)) continue;  // rows with inf f16 scales
    double dot = 0, mag = 0;
    dequant_dot(t, kN, wg.row(r), a, dot, mag);
    EXPECT_NEAR(got, want, 1e-5 * mag + 1e-35) << "row " << r;
    ++compared;
  }
  EXPECT_GE(compared, 8);
}

INSTANTIATE_TEST_SUITE_P(All, DotKernel, ::testing::ValuesIn(kDotTypes), type_name);

TEST(VecDot, Errors) {
  std::uint8_t buf[512] = {};
  EXPECT_THROW(vec_dot(QuantType::F16, 32, buf, buf), fucina::Error);
  EXPECT_THROW(vec_dot(QuantType::Q4_K, 100, buf, buf), fucina::Error);
  EXPECT_EQ(dot_kernel(DotArm::Scalar, QuantType::Q8_K), nullptr);
  EXPECT_TRUE(dot_arm_compiled(DotArm::Scalar));
}

}  // namespace
}  // namespace fucina::quant::test
