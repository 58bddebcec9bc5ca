#pragma once
// Method sugar: x.dot<"in">(ctx, w) is dot<"in">(ctx, x, w), and so on. Defined after the
// free functions so generic code may use either form.
#include "fucina/core/ops/contract.hpp"
#include "fucina/core/ops/nn.hpp"
#include "fucina/core/ops/reduce.hpp"
#include "fucina/core/ops/view.hpp"

namespace fucina {

template <DType D, TagName... Ts>
template <TagName... C, AnyTensor W>
auto TensorT<D, Ts...>::dot(Context& ctx, const W& w) const {
  return fucina::dot<C...>(ctx, *this, w);
}
template <DType D, TagName... Ts>
template <TagName... Out, AnyTensor W>
auto TensorT<D, Ts...>::einsum(Context& ctx, const W& w) const {
  return fucina::einsum<Out...>(ctx, *this, w);
}
template <DType D, TagName... Ts>
template <TagName... R>
auto TensorT<D, Ts...>::sum(Context& ctx) const {
  return fucina::sum<R...>(ctx, *this);
}
template <DType D, TagName... Ts>
template <TagName... R>
auto TensorT<D, Ts...>::mean(Context& ctx) const {
  return fucina::mean<R...>(ctx, *this);
}
template <DType D, TagName... Ts>
template <TagName T>
auto TensorT<D, Ts...>::softmax(Context& ctx) const {
  return fucina::softmax<T>(ctx, *this);
}
template <DType D, TagName... Ts>
template <TagName T>
auto TensorT<D, Ts...>::log_softmax(Context& ctx) const {
  return fucina::log_softmax<T>(ctx, *this);
}
template <DType D, TagName... Ts>
template <TagName T>
auto TensorT<D, Ts...>::narrow(std::int64_t start, std::int64_t length) const {
  return fucina::narrow<T>(*this, start, length);
}
template <DType D, TagName... Ts>
template <TagName T>
auto TensorT<D, Ts...>::select(std::int64_t index) const {
  return fucina::select<T>(*this, index);
}
template <DType D, TagName... Ts>
template <TagName... Order>
auto TensorT<D, Ts...>::permute() const {
  return fucina::permute<Order...>(*this);
}
template <DType D, TagName... Ts>
template <TagName From, TagName To>
auto TensorT<D, Ts...>::rename() const {
  return fucina::rename<From, To>(*this);
}
template <DType D, TagName... Ts>
template <DType D2>
auto TensorT<D, Ts...>::to(Context& ctx) const {
  return fucina::to<D2>(ctx, *this);
}
template <DType D, TagName... Ts>
TensorT<D, Ts...> TensorT<D, Ts...>::contiguous(Context& ctx) const {
  return fucina::contiguous(ctx, *this);
}

}  // namespace fucina
