#pragma once
// Losses: cross-entropy over a named class axis (fused, with ignore index) and MSE.
#include "fucina/core/ops/pointwise.hpp"
#include "fucina/core/ops/reduce.hpp"
#include "fucina/core/raw/backward.hpp"

namespace fucina {

// Mean over rows of -log softmax(logits)[target] along Class. logits has exactly one other
// (row) axis; targets (i32) are indexed by that axis. Rows whose target == ignore_index do
// not count (a mask).
template <TagName Class, FloatTensor L, AnyTensor T>
Tensor<> cross_entropy(Context& ctx, const L& logits, const T& targets, std::int32_t ignore_index = -100) {
  static_assert(L::rank == 2, "cross_entropy logits need one row axis and the class axis");
  static_assert(T::dtype == DType::i32 && T::rank == 1, "cross_entropy targets are i32 over the row axis");
  constexpr int cls = L::template axis_of<Class>();
  static_assert(T::tag_list[0] == L::tag_list[1 - cls], "cross_entropy targets must be indexed by the logits' row axis");
  const bool grad = autograd::grad_enabled() && logits.requires_grad();
  RawTensor g;
  if (grad) g = ctx.empty(DType::f32, 2, logits.raw().shape);
  const float loss = raw::cross_entropy(ctx, logits.raw(), cls, targets.raw(), ignore_index, grad ? &g : nullptr);
  auto out = Tensor<>::scalar(ctx, loss);
  if (grad) out.set_node(autograd::make_node<autograd::SavedGradBackward>({logits.node()}, std::move(g)));
  return out;
}

// mean((a - b)^2) over every element (b broadcast by name onto a's tags).
template <FloatTensor A, FloatTensor B>
Tensor<> mse(Context& ctx, const A& a, const B& b) {
  return mean_all(ctx, square(ctx, sub(ctx, a, b)));
}

}  // namespace fucina
