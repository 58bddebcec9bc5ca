// Pointwise, reduction, nn and structure ops against independent loop formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "fucina/fucina.hpp"
#include "support/temp_dir.hpp"

using namespace fucina;

using fucina::test::error_of;

TEST(Pointwise, BroadcastByName) {
  Context ctx({.threads = 2});
  auto x = Tensor<"batch", "in">::from_data(ctx, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = Tensor<"in">::from_data(ctx, {3}, {10, 20, 30});
  auto y = add(ctx, x, b);
  static_assert(std::is_same_v<decltype(y), Tensor<"batch", "in">>);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  // Right-only tags are appended: <"in"> * <"batch","in"> -> <"in","batch">.
  auto z = mul(ctx, b, x);
  static_assert(std::is_same_v<decltype(z), Tensor<"in", "batch">>);
  EXPECT_EQ(z.at({2, 1}), 180.f);
  // Disjoint tags: an outer product.
  auto c = Tensor<"out">::from_data(ctx, {2}, {1, -1});
  auto o = sub(ctx, b, c);
  static_assert(std::is_same_v<decltype(o), Tensor<"in", "out">>);
  EXPECT_EQ(o.to_vector(), (std::vector<float>{9, 11, 19, 21, 29, 31}));
  // Operand order only changes the layout, not the values.
  auto xt = x.permute<"in", "batch">();
  auto d = div(ctx, x, xt);
  EXPECT_EQ(d.to_vector(), std::vector<float>(6, 1.f));
  auto mx = maximum(ctx, x, b);
  EXPECT_EQ(mx.at({1, 2}), 30.f);
  auto mn = minimum(ctx, x, Tensor<"in">::full(ctx, {3}, 4.5f));
  EXPECT_EQ(mn.to_vector(), (std::vector<float>{1, 2, 3, 4, 4.5f, 4.5f}));
}

TEST(Pointwise, ShapeMismatchNamesOpTagAndSizes) {
  Context ctx({.threads = 1});
  auto x = Tensor<"batch", "in">::zeros(ctx, {2, 3});
  auto b = Tensor<"in">::zeros(ctx, {4});
  const std::string msg = error_of([&] { (void)add(ctx, x, b); });
  EXPECT_NE(msg.find("[add]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'in'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4"), std::string::npos) << msg;
}

TEST(Pointwise, UnaryMatchesLibm) {
  Context ctx({.threads = 2});
  const std::int64_t n = 1000;
  auto x = Tensor<"i">::uniform(ctx, {n}, 3, 0.1f, 3.f);
  auto v = x.to_vector();
  auto check = [&](auto t, auto f, float tol) {
    auto r = t.to_vector();
    for (std::int64_t i = 0; i < n; ++i) ASSERT_NEAR(r[i], f(v[i]), tol * (1 + std::fabs(f(v[i])))) << i;
  };
  check(exp(ctx, x), [](float a) { return std::exp(a); }, 1e-6f);
  check(log(ctx, x), [](float a) { return std::log(a); }, 1e-6f);
  check(tanh(ctx, x), [](float a) { return std::tanh(a); }, 1e-6f);
  check(sigmoid(ctx, x), [](float a) { return 1.f / (1.f + std::exp(-a)); }, 1e-6f);
  check(silu(ctx, x), [](float a) { return a / (1.f + std::exp(-a)); }, 1e-6f);
  check(gelu(ctx, x), [](float a) { return 0.5f * a * (1.f + std::erf(a / std::sqrt(2.f))); }, 1e-6f);
  check(sqrt(ctx, x), [](float a) { return std::sqrt(a); }, 1e-7f);
  check(rsqrt(ctx, x), [](float a) { return 1.f / std::sqrt(a); }, 1e-7f);
  check(square(ctx, x), [](float a) { return a * a; }, 0);
  check(pow(ctx, x, 1.5f), [](float a) { return std::pow(a, 1.5f); }, 1e-6f);
  auto xn = sub(ctx, x, 1.5f);
  auto vn = xn.to_vector();
  auto rel = relu(ctx, xn).to_vector();
  auto ab = abs(ctx, xn).to_vector();
  auto ng = neg(ctx, xn).to_vector();
  auto cl = clamp(ctx, xn, -0.5f, 0.5f).to_vector();
  for (std::int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(rel[i], std::max(vn[i], 0.f));
    EXPECT_EQ(ab[i], std::fabs(vn[i]));
    EXPECT_EQ(ng[i], -vn[i]);
    EXPECT_EQ(cl[i], std::clamp(vn[i], -0.5f, 0.5f));
  }
  EXPECT_THROW(clamp(ctx, x, 1.f, 0.f), Error);
}

// Every SIMD arm against its scalar twin, at sizes straddling the vector widths.
TEST(Pointwise, SimdArmsMatchScalarTwin) {
  using raw::UnaryOp, raw::BinaryOp;
  for (std::int64_t n : {1, 7, 15, 16, 17, 31, 33, 257, 1024}) {
    std::vector<float> a(n), b(n), y1(n), y2(n);
    for (std::int64_t i = 0; i < n; ++i) {
      a[i] = 0.05f + std::fmod(0.37f * static_cast<float>(i), 3.f);
      b[i] = 0.5f + std::fmod(0.11f * static_cast<float>(i), 2.f);
    }
    for (int op = 0; op <= static_cast<int>(UnaryOp::step); ++op) {
      raw::unary_contiguous(static_cast<UnaryOp>(op), a.data(), y1.data(), n, 1.5f, 2.f);
      raw::unary_reference(static_cast<UnaryOp>(op), a.data(), y2.data(), n, 1.5f, 2.f);
      for (std::int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(y1[i], y2[i], 2e-6f * (1 + std::fabs(y2[i]))) << raw::to_string(static_cast<UnaryOp>(op)) << " n=" << n;
    }
    for (int op = 0; op <= static_cast<int>(BinaryOp::pow); ++op) {
      raw::binary_contiguous(static_cast<BinaryOp>(op), a.data(), b.data(), y1.data(), n);
      raw::binary_reference(static_cast<BinaryOp>(op), a.data(), b.data(), y2.data(), n);
      for (std::int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(y1[i], y2[i], 2e-6f * (1 + std::fabs(y2[i]))) << raw::to_string(static_cast<BinaryOp>(op));
    }
  }
}

TEST(Pointwise, WhereAndMaskedFill) {
  Context ctx({.threads = 1});
  auto c = Tensor<"i">::from_data(ctx, {3}, {1, 0, 1});
  auto a = Tensor<"i", "j">::from_data(ctx, {3, 2}, {1, 2, 3, 4, 5, 6});
  auto b = Tensor<"j">::from_data(ctx, {2}, {-1, -2});
  auto w = where(ctx, c, a, b);
  static_assert(std::is_same_v<decltype(w), Tensor<"i", "j">>);
  EXPECT_EQ(w.to_vector(), (std::vector<float>{1, 2, -1, -2, 5, 6}));
  auto m = masked_fill(ctx, a, c, 9.f);
  EXPECT_EQ(m.to_vector(), (std::vector<float>{9, 9, 3, 4, 9, 9}));
}

TEST(Reduce, SumMeanMaxMinLogsumexp) {
  Context ctx({.threads = 2});
  auto x = Tensor<"r", "c">::from_data(ctx, {2, 3}, {1, 5, 3, -4, 2, 0});
  auto s = x.sum<"c">(ctx);
  static_assert(std::is_same_v<decltype(s), Tensor<"r">>);
  EXPECT_EQ(s.to_vector(), (std::vector<float>{9, -2}));
  EXPECT_EQ(x.sum<"r">(ctx).to_vector(), (std::vector<float>{-3, 7, 3}));
  EXPECT_EQ((x.sum<"r", "c">(ctx).item()), 7.f);
  EXPECT_EQ(sum_all(ctx, x).item(), 7.f);
  EXPECT_EQ(x.mean<"c">(ctx).to_vector(), (std::vector<float>{3, -2.f / 3}));
  EXPECT_EQ(max<"c">(ctx, x).to_vector(), (std::vector<float>{5, 2}));
  EXPECT_EQ(min<"r">(ctx, x).to_vector(), (std::vector<float>{-4, 2, 0}));
  auto l = logsumexp<"c">(ctx, x).to_vector();
  EXPECT_NEAR(l[0], std::log(std::exp(1.f) + std::exp(5.f) + std::exp(3.f)), 1e-5);
  EXPECT_NEAR(l[1], std::log(std::exp(-4.f) + std::exp(2.f) + 1.f), 1e-5);
  auto am = argmax<"c">(ctx, x);
  static_assert(std::is_same_v<decltype(am), TensorT<DType::i32, "r">>);
  EXPECT_EQ(am.to_vector(), (std::vector<std::int32_t>{1, 1}));
  auto [v, i] = topk<"c">(ctx, x, 2);
  EXPECT_EQ(v.to_vector(), (std::vector<float>{5, 3, 2, 0}));
  EXPECT_EQ(i.to_vector(), (std::vector<std::int32_t>{1, 2, 1, 2}));
  EXPECT_THROW(topk<"c">(ctx, x, 4), Error);
}

TEST(Reduce, LargeSumIsThreadCountIndependent) {
  Context c1({.threads = 1}), c2({.threads = 2});
  auto a = Tensor<"r", "c">::randn(c1, {512, 999}, 5);
  auto b = Tensor<"r", "c">::randn(c2, {512, 999}, 5);
  EXPECT_EQ(a.sum<"c">(c1).to_vector(), b.sum<"c">(c2).to_vector());
  EXPECT_EQ(a.sum<"r">(c1).to_vector(), b.sum<"r">(c2).to_vector());
  // Against a double-precision reference.
  auto s = a.sum<"c">(c1).to_vector();
  auto v = a.to_vector();
  for (int r = 0; r < 512; ++r) {
    double ref = 0;
    for (int c = 0; c < 999; ++c) ref += v[r * 999 + c];
    ASSERT_NEAR(s[r], ref, 1e-4);
  }
}

TEST(Nn, SoftmaxNormsAndRope) {
  Context ctx({.threads = 2});
  auto x = Tensor<"r", "c">::from_data(ctx, {2, 3}, {1, 2, 3, -1, 0, 4});
  auto sm = x.softmax<"c">(ctx).to_vector();
  auto lsm = x.log_softmax<"c">(ctx).to_vector();
  for (int r = 0; r < 2; ++r) {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(double(x.at({r, c})));
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(sm[r * 3 + c], std::exp(x.at({r, c})) / z, 1e-6);
      EXPECT_NEAR(lsm[r * 3 + c], x.at({r, c}) - std::log(z), 1e-6);
    }
  }
  // softmax along the other axis = softmax of the transpose.
  auto smr = x.softmax<"r">(ctx);
  auto smt = x.permute<"c", "r">().softmax<"r">(ctx).permute<"r", "c">();
  EXPECT_EQ(smr.to_vector(), smt.to_vector());
  auto rn = rms_norm<"c">(ctx, x, 1e-6f).to_vector();
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int c = 0; c < 3; ++c) ss += double(x.at({r, c})) * x.at({r, c});
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(rn[r * 3 + c], x.at({r, c}) / std::sqrt(ss / 3 + 1e-6), 1e-6);
  }
  auto ln = layer_norm<"c">(ctx, x, 1e-5f).to_vector();
  for (int r = 0; r < 2; ++r) {
    double m = 0, var = 0;
    for (int c = 0; c < 3; ++c) m += x.at({r, c});
    m /= 3;
    for (int c = 0; c < 3; ++c) var += (x.at({r, c}) - m) * (x.at({r, c}) - m);
    var /= 3;
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(ln[r * 3 + c], (x.at({r, c}) - m) / std::sqrt(var + 1e-5), 1e-5);
  }
  // RoPE: position 0 is the identity; position p rotates pair i by p*base^(-2i/d).
  auto q = Tensor<"seq", "head", "dim">::randn(ctx, {3, 2, 4}, 9);
  std::vector<std::int32_t> pos{0, 1, 5};
  for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
    auto rq = rope<"seq", "dim">(ctx, q, pos, 10000.f, mode);
    for (int s = 0; s < 3; ++s)
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 2; ++i) {
          const int i0 = mode == RopeMode::neox ? i : 2 * i, i1 = mode == RopeMode::neox ? i + 2 : 2 * i + 1;
          const double th = pos[s] * std::pow(10000.0, -2.0 * i / 4);
          const double a = q.at({s, h, i0}), b = q.at({s, h, i1});
          EXPECT_NEAR(rq.at({s, h, i0}), a * std::cos(th) - b * std::sin(th), 1e-5);
          EXPECT_NEAR(rq.at({s, h, i1}), a * std::sin(th) + b * std::cos(th), 1e-5);
        }
  }
  EXPECT_THROW((rope<"seq", "dim">(ctx, q, std::vector<std::int32_t>{0, 1}, 1e4f, RopeMode::normal)), Error);
  auto cm = causal_mask<"q", "k">(ctx, 2, 3, 1);
  EXPECT_EQ(cm.at({0, 1}), 0.f);
  EXPECT_TRUE(std::isinf(cm.at({0, 2})));
  EXPECT_EQ(cm.at({1, 2}), 0.f);
}

// Rope's arithmetic bit for bit (Note [Rope arithmetic]): the first product of each output
// fused, in both pairings, over a strided (transposed) input. GCC 12 once fused only the
// Llama pairing, so both modes must show the FMA form where it differs from the plain one.
// ggml's RMSNorm, one row at a time: f32 squares summed in double in order, the scale
// rounded to f32, then x·scale and (separately rounded) ·w.
std::vector<float> ggml_rms_norm_rows(const std::vector<float>& x, std::int64_t n, const std::vector<float>* w, float eps) {
  std::vector<float> y(x.size());
  for (std::size_t r0 = 0; r0 < x.size(); r0 += static_cast<std::size_t>(n)) {
    double ss = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float sq = x[r0 + i] * x[r0 + i];
      ss += sq;
    }
    const float mean = static_cast<float>(ss / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (std::int64_t i = 0; i < n; ++i) {
      const float normed = x[r0 + i] * scale;
      y[r0 + i] = w ? normed * (*w)[static_cast<std::size_t>(i)] : normed;
    }
  }
  return y;
}

// Note [Interleaved RMS sums]: rows summed 8, 4, 2, 1 at a time (and 8-row groups spread
// over the pool) keep each row's sequential double sum: every row count, both layouts.
TEST(Nn, RmsNormIsGgmlArithmeticForAnyRowCount) {
  Context ctx({.threads = 2});
  const float eps = 1e-6f;
  for (const auto& [rows, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1, 1024}, {2, 64}, {3, 33}, {5, 128}, {7, 16}, {8, 1024}, {9, 128}, {13, 40}, {17, 128}, {128, 128}, {64, 1024}}) {
    auto x = Tensor<"seq", "hd">::randn(ctx, {rows, n}, static_cast<std::uint64_t>(rows * 1000 + n));
    auto w = Tensor<"hd">::randn(ctx, {n}, static_cast<std::uint64_t>(n));
    const std::vector<float> xv = x.to_vector(), wv = w.to_vector();
    EXPECT_EQ(rms_norm<"hd">(ctx, x, eps).to_vector(), ggml_rms_norm_rows(xv, n, nullptr, eps)) << rows << " x " << n;
    EXPECT_EQ(rms_norm_mul<"hd">(ctx, x, w, eps).to_vector(), ggml_rms_norm_rows(xv, n, &wv, eps)) << rows << " x " << n;
    // The same rows strided (the axis not innermost): the one-row-at-a-time path.
    auto xt = x.permute<"hd", "seq">().contiguous(ctx).permute<"seq", "hd">();
    EXPECT_EQ(rms_norm_mul<"hd">(ctx, xt, w, eps).to_vector(), ggml_rms_norm_rows(xv, n, &wv, eps)) << rows << " x " << n;
  }
}

TEST(Nn, RmsNormMulRecordsTheTwoOpsGradients) {
  Context ctx({.threads = 2});
  auto x = Tensor<"seq", "hd">::randn(ctx, {3, 16}, 5);
  auto w = Tensor<"hd">::randn(ctx, {16}, 6);
  const auto fused = rms_norm_mul<"hd">(ctx, x, w, 1e-5f);
  EXPECT_FALSE(fused.requires_grad());
  auto xv = x.variable();
  auto wv = w.variable();
  auto y = rms_norm_mul<"hd">(ctx, xv, wv, 1e-5f);
  EXPECT_EQ(y.to_vector(), fused.to_vector());
  sum_all(ctx, mul(ctx, y, y)).backward(ctx);
  auto xr = x.variable();
  auto wr = w.variable();
  auto yr = mul(ctx, rms_norm<"hd">(ctx, xr, 1e-5f), wr);
  sum_all(ctx, mul(ctx, yr, yr)).backward(ctx);
  EXPECT_EQ(xv.grad().to_vector(), xr.grad().to_vector());
  EXPECT_EQ(wv.grad().to_vector(), wr.grad().to_vector());
}

// Strided heads (the permuted input) take rope()'s general loop, contiguous ones its
// vectorized run; both must give ggml's bits.
TEST(Nn, RopeIsGgmlArithmeticInBothModes) {
  Context ctx({.threads = 2});
  const std::vector<std::int32_t> pos{0, 7, 1000};
  const float base = 10000.f;
  for (const std::int64_t d : {8, 128})
    for (const bool strided : {true, false}) {
      auto q = strided ? Tensor<"head", "seq", "dim">::randn(ctx, {2, 3, d}, 21).permute<"seq", "head", "dim">()
                       : Tensor<"seq", "head", "dim">::randn(ctx, {3, 2, d}, 21);
      const float scale = std::pow(base, -2.0f / static_cast<float>(d));
      for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
        auto r = rope<"seq", "dim">(ctx, q, pos, base, mode);
        int fma_differs = 0;
        for (int s = 0; s < 3; ++s) {
          float theta = static_cast<float>(pos[s]);
          for (std::int64_t i = 0; i < d / 2; ++i, theta *= scale) {
            const float c = std::cos(theta), sn = std::sin(theta);
            const std::int64_t i0 = mode == RopeMode::neox ? i : 2 * i, i1 = mode == RopeMode::neox ? i + d / 2 : 2 * i + 1;
            for (int h = 0; h < 2; ++h) {
              const float a = q.at({s, h, i0}), b = q.at({s, h, i1});
              const float bs = b * sn, bc = b * c;
              const float want0 = std::fma(a, c, -bs), want1 = std::fma(a, sn, bc);
              const float ac = a * c, as = a * sn;
              fma_differs += (ac - bs != want0) + (as + bc != want1);
              ASSERT_EQ(r.at({s, h, i0}), want0) << d << " " << strided << " " << s << " " << h << " " << i;
              ASSERT_EQ(r.at({s, h, i1}), want1) << d << " " << strided << " " << s << " " << h << " " << i;
            }
          }
        }
        EXPECT_GT(fma_differs, 0) << "the inputs do not tell the FMA form from the plain one";
      }
    }
}

TEST(Structure, ConcatStackGather) {
  Context ctx({.threads = 1});
  auto a = Tensor<"r", "c">::from_data(ctx, {1, 2}, {1, 2});
  auto b = Tensor<"r", "c">::from_data(ctx, {2, 2}, {3, 4, 5, 6});
  auto c = concat<"r">(ctx, a, b);
  EXPECT_EQ(c.to_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto cc = concat<"c">(ctx, b, b);
  EXPECT_EQ(cc.at({1, 3}), 6.f);
  EXPECT_THROW(concat<"c">(ctx, a, b), Error);
  std::vector<Tensor<"c">> parts{b.select<"r">(1), b.select<"r">(0)};
  auto s = stack<"n">(ctx, std::span<const Tensor<"c">>(parts));
  static_assert(std::is_same_v<decltype(s), Tensor<"n", "c">>);
  EXPECT_EQ(s.to_vector(), (std::vector<float>{5, 6, 3, 4}));
  auto table = Tensor<"vocab", "embd">::from_data(ctx, {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  auto ids = TensorT<DType::i32, "seq">::from_data(ctx, {3}, {3, 0, 3});
  auto e = gather<"vocab">(ctx, table, ids);
  static_assert(std::is_same_v<decltype(e), Tensor<"seq", "embd">>);
  EXPECT_EQ(e.to_vector(), (std::vector<float>{30, 31, 0, 1, 30, 31}));
  auto bad = TensorT<DType::i32, "seq">::from_data(ctx, {1}, {4});
  EXPECT_THROW(gather<"vocab">(ctx, table, bad), Error);
}
