// The spirals generator against its closed form, and ternarize. The ES spirals demos
// run in demo_slow_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "fucina/data/spirals.hpp"
#include "fucina/es/ternary.hpp"
#include "fucina/fucina.hpp"

using namespace fucina;

TEST(Spirals, NoiselessPointsFollowTheClosedForm) {
  Context ctx({.threads = 1});
  const auto d = data::spirals(ctx, {.points_per_class = 5, .noise = 0.f, .turns = 1.75f, .seed = 3});
  static_assert(std::is_same_v<decltype(d.x), Tensor<"batch", "in">>);
  static_assert(std::is_same_v<decltype(d.labels), TensorT<DType::i32, "batch">>);
  ASSERT_EQ(d.x.size<"batch">(), 10);
  ASSERT_EQ(d.x.size<"in">(), 2);
  const auto y = d.labels.to_vector();
  for (std::int64_t i = 0; i < 5; ++i) {
    const double t = i / 4.0, th = 3.5 * M_PI * t, r = 0.15 + 0.85 * t;
    EXPECT_NEAR(d.x.at({2 * i, 0}), r * std::sin(th), 1e-6);
    EXPECT_NEAR(d.x.at({2 * i, 1}), r * std::cos(th), 1e-6);
    EXPECT_NEAR(d.x.at({2 * i + 1, 0}), -r * std::sin(th), 1e-6);
    EXPECT_NEAR(d.x.at({2 * i + 1, 1}), -r * std::cos(th), 1e-6);
    EXPECT_EQ(y[2 * i], 0);
    EXPECT_EQ(y[2 * i + 1], 1);
  }
}

TEST(Spirals, NoiseIsSeededAndHasTheRequestedScale) {
  Context ctx({.threads = 1});
  const data::SpiralsOptions o{.points_per_class = 500, .noise = 0.05f, .turns = 1.75f, .seed = 9};
  const auto a = data::spirals(ctx, o), b = data::spirals(ctx, o);
  auto o2 = o;
  o2.seed = 10;
  const auto c = data::spirals(ctx, o2);
  EXPECT_EQ(a.x.to_vector(), b.x.to_vector());
  EXPECT_NE(a.x.to_vector(), c.x.to_vector());
  auto clean = o;
  clean.noise = 0.f;
  const auto z = data::spirals(ctx, clean);
  const auto av = a.x.to_vector(), zv = z.x.to_vector();
  double var = 0;
  for (std::size_t i = 0; i < av.size(); ++i) var += (av[i] - zv[i]) * (av[i] - zv[i]);
  EXPECT_NEAR(std::sqrt(var / av.size()), 0.05, 0.004);
}

TEST(Spirals, BadOptionsThrow) {
  Context ctx({.threads = 1});
  EXPECT_THROW(data::spirals(ctx, {.points_per_class = 0}), Error);
  EXPECT_THROW(data::spirals(ctx, {.points_per_class = 4, .noise = -1.f}), Error);
  EXPECT_THROW(data::spirals(ctx, {.points_per_class = 4, .noise = NAN}), Error);
}

TEST(Ternary, ValuesAreScaledTrits) {
  Context ctx({.threads = 1});
  auto w = Tensor<"a", "b">::from_data(ctx, {2, 3}, {0.7f, -0.2f, 0.5f, -0.51f, 0.f, 2.f});
  auto t = es::ternarize(ctx, w, 0.5f, 0.25f);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{0.25f, 0.f, 0.f, -0.25f, 0.f, 0.25f}));
  // Strided input: same values in the permuted order.
  auto tt = es::ternarize(ctx, w.permute<"b", "a">(), 0.5f, 0.25f);
  EXPECT_EQ(tt.to_vector(), (std::vector<float>{0.25f, -0.25f, 0.f, 0.f, 0.f, 0.25f}));
  EXPECT_THROW(es::ternarize(ctx, w, -1.f, 1.f), Error);
}
