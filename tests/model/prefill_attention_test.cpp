// prefill_attention against a double-precision causal softmax attention written out
// here, for f16 and f32 caches, GQA groups, head dims and cache offsets; its scalar twin
// bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "fucina/model/prefill_attention.hpp"

using namespace fucina;
using namespace fucina::model;

namespace {

using Q = Tensor<"seq", "kvh", "grp", "hd">;
using Kv = Tensor<"kseq", "kvh", "hd">;

std::vector<float> randn(std::size_t n, std::uint64_t seed, bool f16_exact) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float x = rng::normal(seed, i);
    v[i] = f16_exact ? half_to_float(float_to_half(x)) : x;
  }
  return v;
}

struct Case {
  std::int64_t n, n_past, kvh, grp, hd;
};

// o[i][h][g] = Σ_c softmax_c(scale·q·k_c over c <= n_past + i)·v_c, all in double; also
// returns Σ_c p_c·|v_c| per element, the scale its f32 rounding error is relative to.
void reference(const Case& t, std::int64_t n_kv, const std::vector<float>& q, const std::vector<float>& k,
               const std::vector<float>& v, float scale, std::vector<double>& o, std::vector<double>& mag) {
  const std::int64_t hd = t.hd, kvh = t.kvh, grp = t.grp;
  o.assign(q.size(), 0.0);
  mag.assign(q.size(), 0.0);
  std::vector<double> s(static_cast<std::size_t>(n_kv));
  for (std::int64_t i = 0; i < t.n; ++i)
    for (std::int64_t h = 0; h < kvh; ++h)
      for (std::int64_t g = 0; g < grp; ++g) {
        const std::size_t row = static_cast<std::size_t>(((i * kvh + h) * grp + g) * hd);
        const std::int64_t vis = t.n_past + i + 1;
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (std::int64_t c = 0; c < vis; ++c) {
          double d = 0;
          for (std::int64_t e = 0; e < hd; ++e)
            d += static_cast<double>(q[row + static_cast<std::size_t>(e)]) * k[static_cast<std::size_t>((c * kvh + h) * hd + e)];
          s[static_cast<std::size_t>(c)] = d * scale;
          mx = std::max(mx, d * scale);
        }
        for (std::int64_t c = 0; c < vis; ++c) sum += std::exp(s[static_cast<std::size_t>(c)] - mx);
        for (std::int64_t c = 0; c < vis; ++c) {
          const double p = std::exp(s[static_cast<std::size_t>(c)] - mx) / sum;
          for (std::int64_t e = 0; e < hd; ++e) {
            const double x = v[static_cast<std::size_t>((c * kvh + h) * hd + e)];
            o[row + static_cast<std::size_t>(e)] += p * x;
            mag[row + static_cast<std::size_t>(e)] += p * std::fabs(x);
          }
        }
      }
}

struct Inputs {
  std::int64_t n_kv = 0, rows = 0;
  std::vector<float> q, k, v;
};

// Random q/k/v (k/v f16-exact for an f16 cache) with 5 NaN cache rows past n_past + n,
// which the kernel must never read.
Inputs make_inputs(const Case& t, bool f16) {
  Inputs in;
  in.n_kv = t.n_past + t.n, in.rows = in.n_kv + 5;
  const std::uint64_t seed = static_cast<std::uint64_t>(t.n * 1000 + t.n_past * 10 + t.grp + t.hd);
  in.q = randn(static_cast<std::size_t>(t.n * t.kvh * t.grp * t.hd), seed, false);
  in.k = randn(static_cast<std::size_t>(in.rows * t.kvh * t.hd), seed + 1, f16);
  in.v = randn(static_cast<std::size_t>(in.rows * t.kvh * t.hd), seed + 2, f16);
  for (std::size_t i = static_cast<std::size_t>(in.n_kv * t.kvh * t.hd); i < in.k.size(); ++i)
    in.k[i] = in.v[i] = std::numeric_limits<float>::quiet_NaN();
  return in;
}

float scale_of(const Case& t) { return 1.f / std::sqrt(static_cast<float>(t.hd)); }

// The kernel's SIMD arm (prefill_attention) or its scalar twin.
std::vector<float> attend(Context& ctx, const Case& t, const Inputs& in, bool f16, bool scalar) {
  auto qt = Q::from_data(ctx, {t.n, t.kvh, t.grp, t.hd}, in.q);
  auto kt = Kv::from_data(ctx, {in.rows, t.kvh, t.hd}, in.k);
  auto vt = Kv::from_data(ctx, {in.rows, t.kvh, t.hd}, in.v);
  const float scale = scale_of(t);
  if (f16) {
    auto k16 = kt.to<DType::f16>(ctx), v16 = vt.to<DType::f16>(ctx);
    return (scalar ? model::detail::prefill_attention_scalar(ctx, qt, k16.raw(), v16.raw(), t.n_past, scale)
                   : prefill_attention(ctx, qt, k16, v16, t.n_past, scale))
        .to_vector();
  }
  return (scalar ? model::detail::prefill_attention_scalar(ctx, qt, kt.raw(), vt.raw(), t.n_past, scale)
                 : prefill_attention(ctx, qt, kt, vt, t.n_past, scale))
      .to_vector();
}

// The worst |got - ref| / Σ p·|v| over all outputs (1 for a NaN).
double max_rel_error(Context& ctx, const Case& t, bool f16, bool scalar) {
  const Inputs in = make_inputs(t, f16);
  const auto got = attend(ctx, t, in, f16, scalar);
  std::vector<double> ref, mag;
  reference(t, in.n_kv, in.q, in.k, in.v, scale_of(t), ref, mag);
  EXPECT_EQ(got.size(), ref.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    const double e = std::fabs(got[i] - ref[i]) / mag[i];
    if (std::isnan(e)) return 1.0;
    worst = std::max(worst, e);
  }
  return worst;
}

const Case kCases[] = {
    {64, 0, 2, 1, 64},  {64, 0, 2, 2, 128}, {97, 0, 2, 2, 64},   {131, 37, 2, 2, 128},
    {150, 64, 1, 1, 128}, {200, 5, 2, 3, 64}, {70, 100, 1, 4, 128}, {129, 1, 3, 2, 64},
};

}  // namespace

TEST(PrefillAttention, MatchesDoubleReference) {
  Context ctx({.threads = 2});
  for (const Case& t : kCases)
    for (bool f16 : {true, false}) {
      const double e = max_rel_error(ctx, t, f16, false);
      EXPECT_LT(e, 1e-5) << "n=" << t.n << " past=" << t.n_past << " kvh=" << t.kvh << " grp=" << t.grp
                         << " hd=" << t.hd << (f16 ? " f16" : " f32");
    }
}

TEST(PrefillAttention, ScalarTwinMatchesDoubleReference) {
  Context ctx({.threads = 2});
  for (const Case& t : {kCases[1], kCases[3], kCases[5]})
    for (bool f16 : {true, false}) {
      const double e = max_rel_error(ctx, t, f16, true);
      EXPECT_LT(e, 1e-5) << "n=" << t.n << " past=" << t.n_past << " grp=" << t.grp << " hd=" << t.hd;
    }
}

TEST(PrefillAttention, SimdMatchesScalarTwinBitExact) {
  Context ctx({.threads = 2});
  for (const Case& t : {kCases[3], kCases[5], kCases[6], Case{2, 7, 2, 2, 64}})
    for (bool f16 : {true, false}) {
      const Inputs in = make_inputs(t, f16);
      const auto a = attend(ctx, t, in, f16, false), b = attend(ctx, t, in, f16, true);
      ASSERT_EQ(a.size(), b.size());
      std::size_t differ = 0;
      for (std::size_t i = 0; i < a.size(); ++i) differ += std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]);
      EXPECT_EQ(differ, 0u) << "n=" << t.n << " grp=" << t.grp << " hd=" << t.hd << (f16 ? " f16" : " f32");
    }
}

TEST(PrefillAttention, SmallBatchesAndOddHeadDims) {
  Context ctx({.threads = 1});
  // Decode-sized batches (an f32 cache routes them here), fewer rows than one lane vector,
  // a head dim that is no multiple of 16 (scalar arm), and one group filling a tile.
  for (const Case& t : {Case{1, 9, 2, 2, 64}, Case{5, 0, 1, 3, 64}, Case{33, 4, 2, 1, 48}, Case{3, 2, 1, 64, 16}})
    for (bool f16 : {true, false}) EXPECT_LT(max_rel_error(ctx, t, f16, false), 1e-5) << "n=" << t.n << " hd=" << t.hd;
}

TEST(PrefillAttention, BadShapesAreClearErrors) {
  Context ctx({.threads = 1});
  auto q = Q::zeros(ctx, {4, 2, 2, 16});
  auto k = Kv::zeros(ctx, {6, 2, 16});
  auto k_heads = Kv::zeros(ctx, {6, 1, 16});
  auto expect_code = [](auto&& fn, ErrorCode code) {
    try {
      fn();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
  };
  expect_code([&] { prefill_attention(ctx, q, k_heads, k_heads, 0, 1.f); }, ErrorCode::ShapeMismatch);
  expect_code([&] { prefill_attention(ctx, q, k, k, 3, 1.f); }, ErrorCode::InvalidArgument);  // 3 + 4 > 6
  expect_code([&] { prefill_attention(ctx, q, k, k, -1, 1.f); }, ErrorCode::InvalidArgument);
  auto k16 = k.to<DType::f16>(ctx);
  expect_code([&] { model::detail::prefill_attention_scalar(ctx, q, k16.raw(), k.raw(), 0, 1.f); }, ErrorCode::InvalidArgument);
  EXPECT_NO_THROW(prefill_attention(ctx, q, k, k, 2, 1.f));
}
