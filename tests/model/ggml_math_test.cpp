// ggml's vectorized exp and the ops on it (model/ggml_math.hpp): ggml_vexpf within 2 ulp
// of exp in double with ggml_v_expf's saturation, the SIMD rows bit-identical to the scalar
// lane, SwiGLU and softmax split into 16-lane blocks and a libm tail exactly as written out
// here, and softmax within float rounding of a double-precision one.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "fucina/core/rng.hpp"
#include "fucina/model/ggml_math.hpp"

using namespace fucina;
using namespace fucina::model;

namespace {

double ulp_error(float got, double exact) {
  const float r = static_cast<float>(exact);
  double ulp = static_cast<double>(std::nextafter(std::fabs(r), std::numeric_limits<float>::infinity())) - std::fabs(r);
  ulp = std::max(ulp, static_cast<double>(std::numeric_limits<float>::denorm_min()));
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

}  // namespace

TEST(GgmlExpf, WithinTwoUlpOfDoubleExp) {
  double worst = 0;
  float at = 0;
  const int steps = 1'000'000;
  for (int s = 0; s <= steps; ++s) {
    const float x = -87.f + 175.f * static_cast<float>(s) / steps;
    const double e = ulp_error(ggml_vexpf(x), std::exp(static_cast<double>(x)));
    if (e > worst) worst = e, at = x;
  }
  EXPECT_LE(worst, 2.5) << "at x = " << at;  // measured 2.21 ulp (at x = 39.1)
  EXPECT_EQ(ggml_vexpf(0.f), 1.f);
  EXPECT_EQ(ggml_vexpf(-std::numeric_limits<float>::infinity()), 0.f);
  EXPECT_EQ(ggml_vexpf(-1000.f), 0.f);  // |n| > 192: saturates
  EXPECT_TRUE(std::isinf(ggml_vexpf(100.f)));
  EXPECT_TRUE(std::isinf(ggml_vexpf(1000.f)));
  EXPECT_TRUE(std::isnan(ggml_vexpf(std::numeric_limits<float>::quiet_NaN())));
}

TEST(GgmlExpf, SimdRowsMatchScalarLaneBitExact) {
  std::vector<float> x;
  for (int i = 0; i < 4000; ++i) x.push_back(-110.f + 0.05f * static_cast<float>(i) + 1e-3f * rng::normal(3, i));
  for (float s : {0.f, -0.f, -104.f, 88.7f, 89.f, 1e30f, -1e30f, -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
    x.push_back(s);
  std::vector<float> y(x.size());
  ggml_vexpf_rows(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = ggml_vexpf(x[i]);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(y[i])) << x[i];
    else
      EXPECT_EQ(bits(y[i]), bits(want)) << x[i];
  }
}

TEST(GgmlMath, SwigluTakesTheVectorExpOnBlocksAndLibmOnTheTail) {
  for (std::int64_t n : {1, 15, 16, 17, 172, 256}) {
    std::vector<float> g(static_cast<std::size_t>(n)), u(g.size()), y(g.size());
    for (std::int64_t i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = 3 * rng::normal(5, i), u[static_cast<std::size_t>(i)] = rng::normal(6, i);
    swiglu_ggml(g.data(), u.data(), y.data(), n);
    for (std::int64_t i = 0; i < n; ++i) {
      const float x = g[static_cast<std::size_t>(i)];
      const float e = i < n / 16 * 16 ? ggml_vexpf(0.f - x) : std::exp(-x);
      EXPECT_EQ(bits(y[static_cast<std::size_t>(i)]), bits(x / (1.f + e) * u[static_cast<std::size_t>(i)])) << "n=" << n << " i=" << i;
    }
  }
}

TEST(GgmlMath, SoftmaxIsGgmlsSoftMaxRow) {
  for (std::int64_t n : {1, 8, 16, 40, 128}) {
    std::vector<float> x(static_cast<std::size_t>(n)), y(x.size());
    for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = 4 * rng::normal(7, i);
    softmax_ggml(x.data(), y.data(), n);
    // The same recipe written out: exps, the sum of 16-lane folds in double, one scale.
    float mx = -std::numeric_limits<float>::infinity();
    for (float v : x) mx = std::max(mx, v);
    std::vector<float> e(x.size());
    double sum = 0;
    const std::int64_t blocks = n / 16 * 16;
    for (std::int64_t i = 0; i < n; ++i) e[static_cast<std::size_t>(i)] = i < blocks ? ggml_vexpf(x[static_cast<std::size_t>(i)] - mx) : std::exp(x[static_cast<std::size_t>(i)] - mx);
    for (std::int64_t b = 0; b < blocks; b += 16) sum += static_cast<double>(fold16(e.data() + b));
    for (std::int64_t i = blocks; i < n; ++i) sum += static_cast<double>(e[static_cast<std::size_t>(i)]);
    const auto inv = static_cast<float>(1.0 / sum);
    double exact_sum = 0;
    for (float v : x) exact_sum += std::exp(static_cast<double>(v) - mx);
    for (std::int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(bits(y[static_cast<std::size_t>(i)]), bits(e[static_cast<std::size_t>(i)] * inv)) << "n=" << n << " i=" << i;
      const double p = std::exp(static_cast<double>(x[static_cast<std::size_t>(i)]) - mx) / exact_sum;
      EXPECT_NEAR(y[static_cast<std::size_t>(i)], p, 4e-7 * std::max(p, 1e-3));
    }
  }
}
