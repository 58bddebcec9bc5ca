#pragma once
// Method sugar: x.dot<"in">(ctx, w) is dot<"in">(ctx, x, w), and so on. Defined after the
// free functions so generic code may use either form (TensorT forwards to TensorMethods).
#include "fucina/core/ops/contract.hpp"
#include "fucina/core/ops/nn.hpp"
#include "fucina/core/ops/reduce.hpp"
#include "fucina/core/ops/view.hpp"

namespace fucina::detail {

template <class X>
struct TensorMethods {
  template <TagName... C, class W>
  static auto dot(Context& ctx, const X& x, const W& w) {
    return fucina::dot<C...>(ctx, x, w);
  }
  template <TagName... Out, class W>
  static auto einsum(Context& ctx, const X& x, const W& w) {
    return fucina::einsum<Out...>(ctx, x, w);
  }
  template <TagName... R>
  static auto sum(Context& ctx, const X& x) {
    return fucina::sum<R...>(ctx, x);
  }
  template <TagName... R>
  static auto mean(Context& ctx, const X& x) {
    return fucina::mean<R...>(ctx, x);
  }
  template <TagName T>
  static auto softmax(Context& ctx, const X& x) {
    return fucina::softmax<T>(ctx, x);
  }
  template <TagName T>
  static auto log_softmax(Context& ctx, const X& x) {
    return fucina::log_softmax<T>(ctx, x);
  }
  template <TagName T>
  static auto narrow(const X& x, std::int64_t start, std::int64_t length) {
    return fucina::narrow<T>(x, start, length);
  }
  template <TagName T>
  static auto select(const X& x, std::int64_t index) {
    return fucina::select<T>(x, index);
  }
  template <TagName... Order>
  static auto permute(const X& x) {
    return fucina::permute<Order...>(x);
  }
  template <TagName From, TagName To>
  static auto rename(const X& x) {
    return fucina::rename<From, To>(x);
  }
  template <DType D2>
  static auto to(Context& ctx, const X& x) {
    return fucina::to<D2>(ctx, x);
  }
  static X contiguous(Context& ctx, const X& x) { return fucina::contiguous(ctx, x); }
};

}  // namespace fucina::detail
