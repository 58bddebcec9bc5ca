// Construction, data access, views and the counter-based RNG.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fucina/fucina.hpp"

using namespace fucina;

TEST(Tensor, ConstructorsFillAndShape) {
  Context ctx({.threads = 2});
  auto z = Tensor<"a", "b">::zeros(ctx, {2, 3});
  auto o = Tensor<"a", "b">::ones(ctx, {2, 3});
  auto f = Tensor<"a", "b">::full(ctx, {2, 3}, 2.5f);
  EXPECT_EQ(z.to_vector(), std::vector<float>(6, 0.f));
  EXPECT_EQ(o.to_vector(), std::vector<float>(6, 1.f));
  EXPECT_EQ(f.to_vector(), std::vector<float>(6, 2.5f));
  EXPECT_EQ(f.size<"a">(), 2);
  EXPECT_EQ(f.size<"b">(), 3);
  EXPECT_EQ((Tensor<"a", "b">::rank), 2u);
  auto r = Tensor<"i">::arange(ctx, 5, 1.f, 2.f);
  EXPECT_EQ(r.to_vector(), (std::vector<float>{1, 3, 5, 7, 9}));
  auto s = Tensor<>::scalar(ctx, 4.f);
  EXPECT_EQ(s.item(), 4.f);
}

TEST(Tensor, BadConstructionThrows) {
  Context ctx({.threads = 1});
  EXPECT_THROW(Tensor<"a">::zeros(ctx, {0}), Error);
  EXPECT_THROW(Tensor<"a">::zeros(ctx, {-3}), Error);
  EXPECT_THROW((Tensor<"a", "b">::from_data(ctx, {2, 2}, {1, 2, 3})), Error);
  auto t = Tensor<"a">::zeros(ctx, {3});
  EXPECT_THROW(t.at({3}), Error);
  EXPECT_THROW(t.item(), Error);
}

TEST(Tensor, RandomIsCounterBasedAndThreadIndependent) {
  Context c1({.threads = 1});
  Context c2({.threads = 2});
  const std::int64_t n = 300000;  // crosses the parallel split threshold
  auto a = Tensor<"x">::randn(c1, {n}, 42);
  auto b = Tensor<"x">::randn(c2, {n}, 42);
  EXPECT_EQ(a.to_vector(), b.to_vector());
  auto c = Tensor<"x">::randn(c2, {n}, 43);
  EXPECT_NE(a.to_vector(), c.to_vector());
  // Moments of the standard normal and the uniform.
  double mean = 0, var = 0;
  for (float v : a.to_vector()) mean += v;
  mean /= n;
  for (float v : a.to_vector()) var += (v - mean) * (v - mean);
  var /= n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.01);
  auto u = Tensor<"x">::uniform(c2, {n}, 7, -1.f, 3.f);
  float lo = 10, hi = -10;
  for (float v : u.to_vector()) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -1.f);
  EXPECT_LT(hi, 3.f);
  EXPECT_LT(lo, -0.99f);
  EXPECT_GT(hi, 2.99f);
}

TEST(Views, NarrowSelectPermuteRename) {
  Context ctx({.threads = 1});
  auto x = Tensor<"r", "c">::from_data(ctx, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto n = x.narrow<"c">(1, 2);
  EXPECT_EQ(n.to_vector(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  EXPECT_FALSE(n.is_contiguous());
  EXPECT_THROW(n.data(), Error);
  auto s = x.select<"r">(1);
  static_assert(std::is_same_v<decltype(s), Tensor<"c">>);
  EXPECT_EQ(s.to_vector(), (std::vector<float>{4, 5, 6, 7}));
  auto t = x.permute<"c", "r">();
  static_assert(std::is_same_v<decltype(t), Tensor<"c", "r">>);
  EXPECT_EQ(t.at({1, 2}), 9.f);
  auto rn = x.rename<"c", "col">();
  static_assert(std::is_same_v<decltype(rn), Tensor<"r", "col">>);
  EXPECT_EQ(rn.to_vector(), x.to_vector());
  EXPECT_THROW(x.narrow<"c">(3, 2), Error);
  EXPECT_THROW(x.select<"r">(3), Error);
}

TEST(Views, SplitMergeBroadcastReshape) {
  Context ctx({.threads = 1});
  auto x = Tensor<"r", "c">::from_data(ctx, {2, 6}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto sp = split<"c", "head", "dim">(x, 3);
  static_assert(std::is_same_v<decltype(sp), Tensor<"r", "head", "dim">>);
  EXPECT_EQ(sp.size<"head">(), 2);
  EXPECT_EQ(sp.at({1, 1, 2}), 11.f);
  auto mg = merge<"head", "dim", "c">(sp);
  static_assert(std::is_same_v<decltype(mg), Tensor<"r", "c">>);
  EXPECT_EQ(mg.to_vector(), x.to_vector());
  // Merging over a transposed layout needs a copy: a clear error, not a silent wrong view.
  auto tr = sp.permute<"r", "dim", "head">();
  EXPECT_THROW((merge<"dim", "head", "c">(tr)), Error);
  auto bc = broadcast<"k">(x.select<"r">(0), 3);
  static_assert(std::is_same_v<decltype(bc), Tensor<"c", "k">>);
  EXPECT_EQ(bc.at({4, 2}), 4.f);
  auto rs = reshape<"a", "b", "d">(x, {3, 2, 2});
  EXPECT_EQ(rs.at({2, 1, 1}), 11.f);
  EXPECT_THROW((reshape<"a", "b">(x, {5, 2})), Error);
  EXPECT_THROW((reshape<"a">(x.narrow<"c">(0, 2), {4})), Error);
  EXPECT_THROW((split<"c", "h", "d">(x, 4)), Error);
}

TEST(Views, ViewOutlivesParent) {
  Context ctx({.threads = 1});
  Tensor<"c"> view;
  {
    auto parent = Tensor<"r", "c">::from_data(ctx, {2, 2}, {1, 2, 3, 4});
    view = parent.select<"r">(1);
  }
  EXPECT_EQ(view.to_vector(), (std::vector<float>{3, 4}));
  EXPECT_EQ(ctx.buffers().stats().outstanding, 1u);
  view = Tensor<"c">();
  EXPECT_EQ(ctx.buffers().stats().outstanding, 0u);
}

// Long contiguous f32 -> f16 copies take a vectorized, pool-split path: it must round
// exactly like the per-element conversion (nearest even, subnormals, overflow to inf).
TEST(Dtypes, LongHalfConversionMatchesElementwise) {
  Context ctx({.threads = 2});
  const std::int64_t n = 100003;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const float mag = std::ldexp(1.f + static_cast<float>(i % 2048) / 2048.f, static_cast<int>(i % 48) - 30);
    v[static_cast<std::size_t>(i)] = (i % 3 == 0 ? -mag : mag) * (i % 101 == 0 ? 70000.f : 1.f);
  }
  v[7] = 1.f + 1.f / 2048.f;  // a tie: rounds to even
  const auto h = Tensor<"i">::from_data(ctx, {n}, v).to<DType::f16>(ctx);
  const Half* got = h.raw().data<Half>();
  for (std::int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i].bits, float_to_half(v[static_cast<std::size_t>(i)])) << "element " << i << " = " << v[static_cast<std::size_t>(i)];
}

TEST(Dtypes, HalfAndBFloat16Storage) {
  Context ctx({.threads = 1});
  auto x = Tensor<"i">::from_data(ctx, {5}, {1.f, -2.5f, 65504.f, 1e-8f, 0.1f});
  auto h = x.to<DType::f16>(ctx);
  static_assert(std::is_same_v<decltype(h), TensorT<DType::f16, "i">>);
  auto back = h.to<DType::f32>(ctx).to_vector();
  EXPECT_EQ(back[0], 1.f);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_EQ(back[2], 65504.f);
  EXPECT_NEAR(back[3], 1e-8f, 6e-8f);
  EXPECT_NEAR(back[4], 0.1f, 1e-4f);
  auto b = x.to<DType::bf16>(ctx).to<DType::f32>(ctx).to_vector();
  EXPECT_EQ(b[0], 1.f);
  EXPECT_NEAR(b[4], 0.1f, 1e-3f);
  // Round-to-nearest-even spot checks.
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half(65520.f), 0x7c00);             // rounds to inf
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
}
