#pragma once
// Reductions by name: the reduced tags disappear from the result type.
#include <utility>

#include "fucina/core/ops/view.hpp"
#include "fucina/core/raw/reduce.hpp"

namespace fucina {

namespace detail {

template <TagName T, FloatTensor X>
auto reduce_one(Context& ctx, raw::ReduceOp op, const X& x) {
  constexpr int ax = X::template axis_of<T>();
  using R = TensorFromList<DType::f32, detail::drop_at(X::tag_list, ax)>;
  Dims shape{};
  int k = 0;
  for (int i = 0; i < x.raw().rank; ++i)
    if (i != ax) shape[k++] = x.raw().shape[i];
  RawTensor out = ctx.empty(DType::f32, x.raw().rank - 1, shape);
  raw::reduce(ctx, op, x.raw(), ax, out);
  R r(out);
  if (autograd::grad_enabled() && x.requires_grad())
    r.set_node(autograd::make_node<autograd::ReduceBackward>({x.node()}, op, x.raw(), std::move(out), ax));
  return r;
}

template <TagName First, TagName... Rest, FloatTensor X>
auto reduce_many(Context& ctx, raw::ReduceOp op, const X& x) {
  auto r = reduce_one<First>(ctx, op, x);
  if constexpr (sizeof...(Rest) == 0) return r;
  else return reduce_many<Rest...>(ctx, op, r);
}

}  // namespace detail

template <TagName... R, FloatTensor X>
auto sum(Context& ctx, const X& x) { return detail::reduce_many<R...>(ctx, raw::ReduceOp::sum, x); }
template <TagName... R, FloatTensor X>
auto mean(Context& ctx, const X& x) { return detail::reduce_many<R...>(ctx, raw::ReduceOp::mean, x); }
template <TagName... R, FloatTensor X>
auto max(Context& ctx, const X& x) { return detail::reduce_many<R...>(ctx, raw::ReduceOp::max, x); }
template <TagName... R, FloatTensor X>
auto min(Context& ctx, const X& x) { return detail::reduce_many<R...>(ctx, raw::ReduceOp::min, x); }
template <TagName T, FloatTensor X>
auto logsumexp(Context& ctx, const X& x) { return detail::reduce_one<T>(ctx, raw::ReduceOp::logsumexp, x); }

// Sum over every axis: a rank-0 tensor.
template <FloatTensor X>
Tensor<> sum_all(Context& ctx, const X& x) {
  auto flat = reshape<"_all">(contiguous(ctx, x), {x.numel()});
  return sum<"_all">(ctx, flat);
}

template <FloatTensor X>
Tensor<> mean_all(Context& ctx, const X& x) {
  auto flat = reshape<"_all">(contiguous(ctx, x), {x.numel()});
  return mean<"_all">(ctx, flat);
}

// Index of the largest value along T (lowest index on ties), as i32.
template <TagName T, FloatTensor X>
auto argmax(Context& ctx, const X& x) {
  constexpr int ax = X::template axis_of<T>();
  using R = TensorFromList<DType::i32, detail::drop_at(X::tag_list, ax)>;
  Dims shape{};
  int k = 0;
  for (int i = 0; i < x.raw().rank; ++i)
    if (i != ax) shape[k++] = x.raw().shape[i];
  RawTensor out = ctx.empty(DType::i32, x.raw().rank - 1, shape);
  raw::argmax(ctx, x.raw(), ax, out);
  return R(std::move(out));
}

// The k largest values along T (descending) and their indices; T keeps its name, size k.
template <TagName T, FloatTensor X>
auto topk(Context& ctx, const X& x, std::int64_t k) {
  constexpr int ax = X::template axis_of<T>();
  using I = TensorFromList<DType::i32, X::tag_list>;
  FUCINA_CHECK(k >= 1 && k <= x.raw().shape[ax], InvalidArgument, "[topk] k={} must be in 1..{} (axis '{}')", k,
               x.raw().shape[ax], T.view());
  Dims shape = x.raw().shape;
  shape[ax] = k;
  RawTensor v = ctx.empty(DType::f32, x.raw().rank, shape);
  RawTensor i = ctx.empty(DType::i32, x.raw().rank, shape);
  raw::topk(ctx, x.raw(), ax, k, v, i);
  X values(std::move(v));
  if (autograd::grad_enabled() && x.requires_grad())
    values.set_node(autograd::make_node<autograd::TopkBackward>({x.node()}, i, x.raw().rank, x.raw().shape, ax));
  return std::pair<X, I>{std::move(values), I(std::move(i))};
}

}  // namespace fucina
