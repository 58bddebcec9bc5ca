// Every differentiable core op against central finite differences, over broadcast
// patterns and axis choices.
#include <gtest/gtest.h>

#include <functional>

#include "fucina/fucina.hpp"

using namespace fucina;

namespace {

#define EXPECT_GRADCHECK(...)                                   \
  do {                                                          \
    auto r_ = gradcheck(__VA_ARGS__);                           \
    EXPECT_TRUE(r_.ok) << r_.report << " max err " << r_.max_abs_error; \
  } while (0)

struct Fixture : ::testing::Test {
  Context ctx{{.threads = 2}};
  Tensor<"b", "i"> x = Tensor<"b", "i">::uniform(ctx, {3, 4}, 1, -1.f, 1.f);
  Tensor<"b", "i"> xp = Tensor<"b", "i">::uniform(ctx, {3, 4}, 2, 0.5f, 2.f);  // positive
  Tensor<"i"> v = Tensor<"i">::uniform(ctx, {4}, 3, 0.5f, 1.5f);
  Tensor<"i", "b"> xt = Tensor<"i", "b">::uniform(ctx, {4, 3}, 4, 0.5f, 1.5f);
  Tensor<"o"> u = Tensor<"o">::uniform(ctx, {2}, 5, -1.f, 1.f);
};

}  // namespace

using Binary = Fixture;

TEST_F(Binary, AllOpsAllBroadcastPatterns) {
  auto run = [&](auto op) {
    EXPECT_GRADCHECK(ctx, op, x, xp);   // same tags
    EXPECT_GRADCHECK(ctx, op, xp, v);   // right is a subset
    EXPECT_GRADCHECK(ctx, op, v, xp);   // left is a subset
    EXPECT_GRADCHECK(ctx, op, xp, xt);  // same tags, other layout
    EXPECT_GRADCHECK(ctx, op, v, u);    // disjoint: outer
  };
  run([](Context& c, const auto& a, const auto& b) { return add(c, a, b); });
  run([](Context& c, const auto& a, const auto& b) { return sub(c, a, b); });
  run([](Context& c, const auto& a, const auto& b) { return mul(c, a, b); });
  run([](Context& c, const auto& a, const auto& b) { return div(c, a, b); });
  run([](Context& c, const auto& a, const auto& b) { return maximum(c, a, mul(c, b, 1.01f)); });
  run([](Context& c, const auto& a, const auto& b) { return minimum(c, a, mul(c, b, 1.01f)); });
  auto pos = [](Context& c, const auto& a, const auto& b) { return pow(c, add(c, abs(c, a), 0.5f), b); };
  EXPECT_GRADCHECK(ctx, pos, xp, v);
  EXPECT_GRADCHECK(ctx, pos, x, xt);
}

using Unary = Fixture;

TEST_F(Unary, EveryUnaryOp) {
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return exp(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return log(c, a); }, xp);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return tanh(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return sigmoid(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return silu(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return gelu(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return relu(c, a); }, xp);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return sqrt(c, a); }, xp);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return rsqrt(c, a); }, xp);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return neg(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return abs(c, a); }, xp);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return square(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return pow(c, a, 2.5f); }, xp);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return clamp(c, a, 0.8f, 1.6f); }, xp);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return add(c, mul(c, a, 3.f), 2.f); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return div(c, sub(c, a, 1.f), 4.f); }, x);
}

using Reductions = Fixture;

TEST_F(Reductions, ReduceEachAxis) {
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return sum<"i">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return sum<"b">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return sum<"b", "i">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return mean<"i">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return max<"i">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return min<"b">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return logsumexp<"i">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return logsumexp<"b">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return sum_all(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return mean_all(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return topk<"i">(c, a, 2).first; }, x);
}

using Nn = Fixture;

TEST_F(Nn, SoftmaxNormsRope) {
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return softmax<"i">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return softmax<"b">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return log_softmax<"i">(c, a); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return rms_norm<"i">(c, a, 1e-5f); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return rms_norm<"b">(c, a, 1e-5f); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return layer_norm<"i">(c, a, 1e-5f); }, x);
  auto q = Tensor<"s", "h", "d">::uniform(ctx, {3, 2, 4}, 7, -1.f, 1.f);
  const std::vector<std::int32_t> pos{0, 3, 7};
  EXPECT_GRADCHECK(ctx, [&](Context& c, const auto& a) { return rope<"s", "d">(c, a, pos, 100.f, RopeMode::normal); }, q);
  EXPECT_GRADCHECK(ctx, [&](Context& c, const auto& a) { return rope<"s", "d">(c, a, pos, 100.f, RopeMode::neox); }, q);
}

using Contractions = Fixture;

TEST_F(Contractions, DotAndEinsumVariants) {
  auto w = Tensor<"o", "i">::uniform(ctx, {2, 4}, 8, -1.f, 1.f);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a, const auto& b) { return dot<"i">(c, a, b); }, x, w);
  auto a = Tensor<"g", "i", "d">::uniform(ctx, {2, 3, 4}, 9, -1.f, 1.f);
  auto b = Tensor<"g", "j", "d">::uniform(ctx, {2, 2, 4}, 10, -1.f, 1.f);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& p, const auto& q) { return einsum<"g", "i", "j">(c, p, q); }, a, b);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& p, const auto& q) { return einsum<"j", "i">(c, p, q); }, a, b);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& p, const auto& q) { return einsum<"g">(c, p, q); }, a, b);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& p, const auto& q) { return einsum<"i", "g", "j", "d">(c, p, q); }, a, b);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& p, const auto& q) { return einsum<>(c, p, q); }, a, b);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& p, const auto& q) { return einsum<"i", "o">(c, p, q); }, v, u);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& p, const auto& q) { return einsum<"o">(c, p, q); }, v, u);
}

using Views = Fixture;

TEST_F(Views, EveryView) {
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return mul(c, narrow<"i">(a, 1, 2), 2.f); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return mul(c, select<"b">(a, 1), 2.f); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return exp(c, permute<"i", "b">(a)); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return exp(c, rename<"i", "k">(a)); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return exp(c, split<"i", "p", "q">(a, 2)); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return exp(c, merge<"b", "i", "bi">(a)); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return exp(c, broadcast<"n">(a, 3)); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return exp(c, reshape<"p", "q">(a, {2, 6})); }, x);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a) { return exp(c, contiguous(c, permute<"i", "b">(a))); }, x);
}

using Structure = Fixture;

TEST_F(Structure, ConcatStackGatherWhereLosses) {
  auto y = Tensor<"b", "i">::uniform(ctx, {2, 4}, 11, -1.f, 1.f);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a, const auto& b) { return exp(c, concat<"b">(c, a, b)); }, x, y);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a, const auto& b) {
    std::vector<Tensor<"i">> parts{select<"b">(a, 0), select<"b">(b, 1)};
    return exp(c, stack<"n">(c, std::span<const Tensor<"i">>(parts)));
  }, x, y);
  auto ids = TensorT<DType::i32, "s">::from_data(ctx, {4}, {2, 0, 2, 1});
  EXPECT_GRADCHECK(ctx, [&](Context& c, const auto& t) { return gather<"b">(c, t, ids); }, x);
  auto cond = Tensor<"i">::from_data(ctx, {4}, {1, 0, 0, 1});
  EXPECT_GRADCHECK(ctx, [&](Context& c, const auto& a, const auto& b) { return where(c, cond, a, b); }, x, v);
  EXPECT_GRADCHECK(ctx, [&](Context& c, const auto& a) { return masked_fill(c, a, cond, -3.f); }, x);
  auto tgt = TensorT<DType::i32, "b">::from_data(ctx, {3}, {1, -100, 3});
  EXPECT_GRADCHECK(ctx, [&](Context& c, const auto& a) { return cross_entropy<"i">(c, a, tgt); }, x);
  auto tgt_i = TensorT<DType::i32, "i">::from_data(ctx, {4}, {0, 2, -100, 1});
  EXPECT_GRADCHECK(ctx, [&](Context& c, const auto& a) { return cross_entropy<"b">(c, a, tgt_i); }, xt);
  EXPECT_GRADCHECK(ctx, [](Context& c, const auto& a, const auto& b) { return mse(c, a, b); }, x, v);
}

// The checker itself must catch a wrong gradient.
TEST(Gradcheck, CatchesAWrongVjp) {
  Context ctx({.threads = 1});
  auto x = Tensor<"i">::uniform(ctx, {5}, 1, 0.5f, 1.5f);
  // exp's forward with a deliberately wrong backward: gy * 2 instead of gy * exp(x).
  auto wrong = [](Context& c, const Tensor<"i">& a) {
    auto y = exp(c, a.detach());
    if (autograd::grad_enabled() && a.requires_grad())
      y.set_node(autograd::make_node<autograd::UnaryBackward>({a.node()}, raw::UnaryOp::mul_scalar, a.raw(), y.raw(), 2.f, 0.f));
    return y;
  };
  auto ok = [](Context& c, const Tensor<"i">& a) { return exp(c, a); };
  EXPECT_TRUE(gradcheck(ctx, ok, x).ok);
  EXPECT_FALSE(gradcheck(ctx, wrong, x).ok);
}
