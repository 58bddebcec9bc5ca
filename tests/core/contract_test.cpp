// dot and einsum against a naive loop over the union of all tags.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "fucina/fucina.hpp"

using namespace fucina;

namespace {

// out[o] = sum over every non-output index of a[..] * b[..], by tag name.
template <class A, class B, class R>
std::vector<double> reference(const A& a, const B& b) {
  std::vector<std::string> all;
  std::map<std::string, std::int64_t> size;
  auto add = [&](auto list, auto sizes) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      std::string t(list[i].view());
      if (!size.count(t)) all.push_back(t);
      size[t] = sizes[i];
    }
  };
  add(A::tag_list, a.sizes());
  add(B::tag_list, b.sizes());
  std::int64_t out_n = 1;
  for (auto t : R::tag_list) out_n *= size[std::string(t.view())];
  std::vector<double> out(static_cast<std::size_t>(out_n), 0.0);
  const auto av = a.to_vector(), bv = b.to_vector();
  std::map<std::string, std::int64_t> idx;
  for (auto& t : all) idx[t] = 0;
  auto flat = [&](auto list, auto sizes) {
    std::int64_t f = 0;
    for (std::size_t i = 0; i < list.size(); ++i) f = f * sizes[i] + idx[std::string(list[i].view())];
    return f;
  };
  std::array<std::int64_t, R::rank> rs{};
  for (std::size_t i = 0; i < R::rank; ++i) rs[i] = size[std::string(R::tag_list[i].view())];
  for (;;) {
    out[static_cast<std::size_t>(flat(R::tag_list, rs))] +=
        double(av[static_cast<std::size_t>(flat(A::tag_list, a.sizes()))]) * bv[static_cast<std::size_t>(flat(B::tag_list, b.sizes()))];
    std::size_t k = all.size();
    while (k > 0) {
      --k;
      if (++idx[all[k]] < size[all[k]]) break;
      idx[all[k]] = 0;
      if (k == 0) return out;
    }
    if (all.empty()) return out;
  }
}

template <class R>
void expect_matches(const R& got, const std::vector<double>& want, double tol = 1e-4) {
  auto g = got.to_vector();
  ASSERT_EQ(g.size(), want.size());
  for (std::size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], tol * (1 + std::fabs(want[i]))) << i;
}

}  // namespace

TEST(Contract, DotMatrixAndBatched) {
  Context ctx({.threads = 2});
  auto x = Tensor<"batch", "in">::randn(ctx, {5, 7}, 1);
  auto w = Tensor<"in", "out">::randn(ctx, {7, 3}, 2);
  auto y = x.dot<"in">(ctx, w);
  static_assert(std::is_same_v<decltype(y), Tensor<"batch", "out">>);
  expect_matches(y, reference<decltype(x), decltype(w), decltype(y)>(x, w));
  // Free-function form, weights stored [out, in] (the GGUF layout): no transpose needed.
  auto wt = Tensor<"out", "in">::randn(ctx, {3, 7}, 3);
  auto y2 = dot<"in">(ctx, x, wt);
  static_assert(std::is_same_v<decltype(y2), Tensor<"batch", "out">>);
  expect_matches(y2, reference<decltype(x), decltype(wt), decltype(y2)>(x, wt));
  // Shared non-contracted tags are batch axes, first in the result.
  auto q = Tensor<"head", "q", "d">::randn(ctx, {2, 4, 8}, 4);
  auto k = Tensor<"head", "k", "d">::randn(ctx, {2, 6, 8}, 5);
  auto s = q.dot<"d">(ctx, k);
  static_assert(std::is_same_v<decltype(s), Tensor<"head", "q", "k">>);
  expect_matches(s, reference<decltype(q), decltype(k), decltype(s)>(q, k));
}

TEST(Contract, EinsumVariants) {
  Context ctx({.threads = 2});
  auto a = Tensor<"g", "i", "d">::randn(ctx, {3, 4, 5}, 6);
  auto b = Tensor<"g", "j", "d">::randn(ctx, {3, 6, 5}, 7);
  // batched, output order chosen freely (permuted output)
  auto r1 = einsum<"g", "i", "j">(ctx, a, b);
  expect_matches(r1, reference<decltype(a), decltype(b), decltype(r1)>(a, b));
  auto r2 = einsum<"j", "g", "i">(ctx, a, b);
  expect_matches(r2, reference<decltype(a), decltype(b), decltype(r2)>(a, b));
  // g contracted too (multi-axis contraction)
  auto r3 = einsum<"i", "j">(ctx, a, b);
  expect_matches(r3, reference<decltype(a), decltype(b), decltype(r3)>(a, b));
  // outer product: nothing shared is dropped, every axis kept
  auto u = Tensor<"i">::randn(ctx, {4}, 8);
  auto v = Tensor<"j">::randn(ctx, {3}, 9);
  auto r4 = einsum<"i", "j">(ctx, u, v);
  expect_matches(r4, reference<decltype(u), decltype(v), decltype(r4)>(u, v));
  // private and dropped axes are summed out first
  auto r5 = einsum<"g">(ctx, a, b);
  expect_matches(r5, reference<decltype(a), decltype(b), decltype(r5)>(a, b));
  // full contraction to a scalar
  auto r6 = einsum<>(ctx, a, a.rename<"i", "i2">());
  expect_matches(r6, reference<decltype(a), decltype(a.rename<"i", "i2">()), decltype(r6)>(a, a.rename<"i", "i2">()));
  // strided (transposed, narrowed) operands
  auto at = a.permute<"d", "i", "g">().narrow<"i">(1, 2);
  auto r7 = einsum<"g", "i", "j">(ctx, at, b);
  expect_matches(r7, reference<decltype(at), decltype(b), decltype(r7)>(at, b));
}

TEST(Contract, LargeShapesAndThreadIndependence) {
  Context c1({.threads = 1}), c2({.threads = 2});
  auto x = Tensor<"m", "k">::randn(c1, {130, 300}, 10);
  auto w = Tensor<"n", "k">::randn(c1, {70, 300}, 11);
  auto y1 = x.dot<"k">(c1, w);
  auto x2 = Tensor<"m", "k">::randn(c2, {130, 300}, 10);
  auto w2 = Tensor<"n", "k">::randn(c2, {70, 300}, 11);
  auto y2 = x2.dot<"k">(c2, w2);
  EXPECT_EQ(y1.to_vector(), y2.to_vector());
  expect_matches(y1, reference<decltype(x), decltype(w), decltype(y1)>(x, w), 1e-4);
}

TEST(Contract, ShapeErrorsNameTheAxis) {
  Context ctx({.threads = 1});
  auto x = Tensor<"batch", "in">::zeros(ctx, {2, 3});
  auto w = Tensor<"in", "out">::zeros(ctx, {4, 5});
  try {
    (void)x.dot<"in">(ctx, w);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::ShapeMismatch);
    EXPECT_NE(m.find("'in'"), std::string::npos) << m;
    EXPECT_NE(m.find("3"), std::string::npos) << m;
    EXPECT_NE(m.find("4"), std::string::npos) << m;
  }
}
