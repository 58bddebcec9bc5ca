#pragma once
// Contractions by name, all on one GEMM path (raw::contract -> kernels::sgemm).
//
// einsum<Out...>(ctx, a, b): the output tag list is the whole equation. A tag in both
// operands is a batch axis if kept in Out, contracted otherwise; a tag in one operand is
// kept (free) if in Out, summed out first otherwise. An Out tag in neither operand is a
// compile error. dot<C...>(ctx, a, b) contracts C and keeps everything else:
// batch (shared, left order) ++ left-free ++ right-free.
#include "fucina/core/ops/reduce.hpp"
#include "fucina/core/raw/contract.hpp"

namespace fucina {

namespace detail {

template <auto L, std::size_t I = 0, FloatTensor X>
auto sum_tags(Context& ctx, const X& x) {
  if constexpr (I == L.size()) return x;
  else return sum_tags<L, I + 1>(ctx, reduce_one<L[I]>(ctx, raw::ReduceOp::sum, x));
}

template <auto Out, FloatTensor A, FloatTensor B>
auto einsum_list(Context& ctx, const A& a_in, const B& b_in) {
  static_assert(tags::unique(Out), "duplicate tag");
  static_assert(Out.size() <= static_cast<std::size_t>(kMaxRank), "a tensor has at most 8 axes");
  constexpr bool all_found = [] {
    for (auto t : Out)
      if (!tags::contains(A::tag_list, t) && !tags::contains(B::tag_list, t)) return false;
    return true;
  }();
  static_assert(all_found, "einsum output tag not found in any operand");

  // Private tags that are not kept are summed out before the GEMM.
  constexpr auto a_priv = tags::minus<tags::count_minus(A::tag_list, B::tag_list)>(A::tag_list, B::tag_list);
  constexpr auto b_priv = tags::minus<tags::count_minus(B::tag_list, A::tag_list)>(B::tag_list, A::tag_list);
  constexpr auto a_drop = tags::minus<tags::count_minus(a_priv, Out)>(a_priv, Out);
  constexpr auto b_drop = tags::minus<tags::count_minus(b_priv, Out)>(b_priv, Out);
  const auto a = sum_tags<a_drop>(ctx, a_in);
  const auto b = sum_tags<b_drop>(ctx, b_in);
  using AT = std::remove_cvref_t<decltype(a)>;
  using BT = std::remove_cvref_t<decltype(b)>;
  using R = TensorFromList<DType::f32, Out>;

  raw::ContractSpec spec;
  Dims shape{};
  for (std::size_t i = 0; i < Out.size(); ++i) {
    const int ia = tags::index_of(AT::tag_list, Out[i]);
    const int ib = tags::index_of(BT::tag_list, Out[i]);
    const int ic = static_cast<int>(i);
    if (ia >= 0 && ib >= 0) {
      FUCINA_CHECK(a.raw().shape[ia] == b.raw().shape[ib], ShapeMismatch,
                   "[einsum] batch axis '{}' is {} on the left, {} on the right", Out[i].view(), a.raw().shape[ia],
                   b.raw().shape[ib]);
      auto& g = spec.batch;
      g.a[g.count] = ia, g.b[g.count] = ib, g.c[g.count] = ic, ++g.count;
      shape[i] = a.raw().shape[ia];
    } else if (ia >= 0) {
      auto& g = spec.m;
      g.a[g.count] = ia, g.c[g.count] = ic, ++g.count;
      shape[i] = a.raw().shape[ia];
    } else if (ib >= 0) {
      auto& g = spec.n;
      g.b[g.count] = ib, g.c[g.count] = ic, ++g.count;
      shape[i] = b.raw().shape[ib];
    }
  }
  for (std::size_t i = 0; i < AT::rank; ++i) {
    const TagName t = AT::tag_list[i];
    const int ib = tags::index_of(BT::tag_list, t);
    if (ib < 0 || tags::contains(Out, t)) continue;
    FUCINA_CHECK(a.raw().shape[i] == b.raw().shape[ib], ShapeMismatch,
                 "[dot] contracted axis '{}' is {} on the left, {} on the right", t.view(), a.raw().shape[i],
                 b.raw().shape[ib]);
    auto& g = spec.k;
    g.a[g.count] = static_cast<int>(i), g.b[g.count] = ib, ++g.count;
  }
  RawTensor out = ctx.empty(DType::f32, static_cast<int>(Out.size()), shape);
  raw::contract(ctx, a.raw(), b.raw(), out, spec);
  R r(std::move(out));
  if (autograd::grad_enabled() && (a.requires_grad() || b.requires_grad()))
    r.set_node(autograd::make_node<autograd::ContractBackward>({a.node(), b.node()}, a.raw(), b.raw(), spec));
  return r;
}

}  // namespace detail

template <TagName... Out, FloatTensor A, FloatTensor B>
auto einsum(Context& ctx, const A& a, const B& b) {
  return detail::einsum_list<tags::List<sizeof...(Out)>{Out...}>(ctx, a, b);
}

template <TagName... C, FloatTensor A, FloatTensor B>
auto dot(Context& ctx, const A& a, const B& b) {
  static_assert(sizeof...(C) > 0, "dot needs at least one tag to contract");
  static_assert(((tags::contains(A::tag_list, C) && tags::contains(B::tag_list, C)) && ...), "tensor tag not found");
  constexpr auto out = tags::dot_result<A::tag_list, B::tag_list, tags::List<sizeof...(C)>{C...}>();
  return detail::einsum_list<out>(ctx, a, b);
}

}  // namespace fucina
