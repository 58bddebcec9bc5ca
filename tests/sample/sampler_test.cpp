// Sampler chain and stop strings: greedy/argmax, each filter's cut, penalties, seeded
// determinism, and the sampled distribution against softmax (a fixed seed, so exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "fucina/core/error.hpp"
#include "fucina/sample/sampler.hpp"
#include "fucina/sample/stop.hpp"

using namespace fucina::sample;

namespace {
SamplerConfig plain(float temp) {
  SamplerConfig c;
  c.temperature = temp;
  c.top_k = 0;
  c.top_p = 1.f;
  c.min_p = 0.f;
  return c;
}
std::map<int, int> histogram(Sampler& s, const std::vector<float>& l, int n) {
  std::map<int, int> h;
  for (int i = 0; i < n; ++i) ++h[s.sample(l)];
  return h;
}
}  // namespace

TEST(Sampler, GreedyIsArgmaxLowestOnTies) {
  Sampler s(plain(0.f));
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 2.f, -1.f, 2.f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{3.f, 3.f}), 0);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  SamplerConfig c = plain(5.f);
  c.top_k = 1;
  Sampler s(c);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(std::vector<float>{0.f, 0.5f, 0.4f}), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  const std::vector<float> l{0.f, 0.2f, 0.1f, -0.3f, 0.4f};
  SamplerConfig c = plain(1.f);
  c.seed = 42;
  Sampler a(c), b(c);
  std::vector<int> x, y;
  for (int i = 0; i < 50; ++i) x.push_back(a.sample(l)), y.push_back(b.sample(l));
  EXPECT_EQ(x, y);
  c.seed = 43;
  Sampler d(c);
  std::vector<int> z;
  for (int i = 0; i < 50; ++i) z.push_back(d.sample(l));
  EXPECT_NE(x, z);
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  const std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler s(plain(1.f));
  const int n = 20000;
  auto h = histogram(s, l, n);
  EXPECT_NEAR(h[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(h[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(h[2] / double(n), 0.2, 0.02);
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  const std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplerConfig c = plain(1.f);
  c.top_p = 0.75f;  // 0.5 + 0.3 >= 0.75: ids 0, 1 only
  Sampler tp(c);
  auto h = histogram(tp, l, 2000);
  EXPECT_GT(h[1], 0);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  c = plain(1.f);
  c.min_p = 0.25f;  // keep p >= 0.125: ids 0, 1, 2
  Sampler mp(c);
  h = histogram(mp, l, 2000);
  EXPECT_GT(h[2], 0);
  EXPECT_EQ(h.count(3), 0u);
}

TEST(Sampler, PenaltiesDiscourageSeenTokens) {
  SamplerConfig c = plain(0.f);
  c.repeat_penalty = 2.f;
  Sampler s(c);
  const std::vector<float> l{1.0f, 0.8f};
  EXPECT_EQ(s.sample(l), 0);
  s.accept(0);  // 1.0 / 2 = 0.5 < 0.8
  EXPECT_EQ(s.sample(l), 1);
  SamplerConfig f = plain(0.f);
  f.frequency_penalty = 0.15f;
  Sampler fs(f);
  fs.accept(0);
  EXPECT_EQ(fs.sample(l), 0);  // 1.0 - 0.15 = 0.85 > 0.8
  fs.accept(0);
  EXPECT_EQ(fs.sample(l), 1);  // 1.0 - 0.30 < 0.8
  SamplerConfig p = plain(0.f);
  p.presence_penalty = 0.3f;
  Sampler ps(p);
  ps.accept(0);
  EXPECT_EQ(ps.sample(l), 1);
}

TEST(Sampler, RejectsBadOptions) {
  SamplerConfig c;
  c.top_p = 0.f;
  EXPECT_THROW(Sampler{c}, fucina::Error);
  c = SamplerConfig{};
  c.min_p = 2.f;
  EXPECT_THROW(Sampler{c}, fucina::Error);
  c = SamplerConfig{};
  c.top_p = 2.f;  // out of range is refused, not clamped
  EXPECT_THROW(Sampler{c}, fucina::Error);
  c = SamplerConfig{};
  c.temperature = -1.f;
  EXPECT_THROW(Sampler{c}, fucina::Error);
  c = SamplerConfig{};
  c.top_k = -5;
  EXPECT_THROW(Sampler{c}, fucina::Error);
  c = SamplerConfig{};
  c.repeat_penalty = 0.f;
  EXPECT_THROW(Sampler{c}, fucina::Error);
}

TEST(StopMatcher, HoldsPrefixesAndCutsAtTheMatch) {
  StopMatcher m({"END", "\n\n"});
  EXPECT_EQ(m.push("hello E"), "hello ");
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("X world"), "ENX world");
  EXPECT_EQ(m.push(" bye\n"), " bye");
  EXPECT_EQ(m.push("\nmore"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.flush(), "");
  StopMatcher n({"zz"});
  EXPECT_EQ(n.push("abz"), "ab");
  EXPECT_EQ(n.flush(), "z");
}

// argmax reads rows in blocks of 16: the answer must not depend on where the maximum, its
// ties or the tail fall.
TEST(Sampler, ArgmaxEqualsMaxElementAnywhere) {
  for (std::size_t n : {1u, 5u, 16u, 17u, 33u, 100u}) {
    for (std::size_t at = 0; at < n; ++at) {
      std::vector<float> l(n);
      for (std::size_t i = 0; i < n; ++i) l[i] = std::sin(static_cast<float>(i) * 1.7f);
      l[at] = 3.f;
      if (at + 20 < n) l[at + 20] = 3.f;  // a tie in a later block
      if (at >= 1) l[at - 1] = -0.f;
      EXPECT_EQ(argmax(l), std::max_element(l.begin(), l.end()) - l.begin()) << n << " " << at;
    }
  }
  EXPECT_EQ(argmax(std::vector<float>{-0.f, 0.f}), 0);
  for (std::size_t at : {0u, 1u, 17u, 35u}) {  // NaN: max_element's answer, wherever it is
    std::vector<float> nan(40, 1.f);
    nan[at] = std::nanf("");
    nan[17 + (at == 17)] = 5.f;
    EXPECT_EQ(argmax(nan), std::max_element(nan.begin(), nan.end()) - nan.begin()) << at;
  }
}
