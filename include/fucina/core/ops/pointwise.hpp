#pragma once
// Pointwise ops. Binary ops broadcast by name: the result has the left operand's tags,
// then the right-only tags; a tag in both must have one size on both sides.
#include "fucina/core/ops/view.hpp"
#include "fucina/core/raw/elementwise.hpp"

namespace fucina {

namespace detail {

// A view of x laid out along the result tags Out (stride 0 where x lacks the tag).
template <auto Out, AnyTensor X>
RawTensor align_to_tags(const X& x, const Dims& out_shape) {
  RawTensor r = x.raw();
  r.rank = static_cast<int>(Out.size());
  for (std::size_t i = 0; i < Out.size(); ++i) {
    const int j = tags::index_of(X::tag_list, Out[i]);
    r.shape[i] = out_shape[i];
    r.strides[i] = j >= 0 ? x.raw().strides[j] : 0;
  }
  return r;
}

// Operand axis i of X is axis map[i] of the result tags Out.
template <auto Out, class X>
constexpr autograd::AxisMap axis_map() {
  autograd::AxisMap m{};
  for (std::size_t i = 0; i < X::rank; ++i) m[i] = tags::index_of(Out, X::tag_list[i]);
  return m;
}

template <class... X>
bool records_grad(const X&... xs) {
  return autograd::grad_enabled() && (xs.requires_grad() || ...);
}

// Result sizes along Out; checks every shared tag agrees.
template <auto Out, AnyTensor A, AnyTensor B>
Dims broadcast_sizes(std::string_view op, const A& a, const B& b) {
  Dims d{};
  for (std::size_t i = 0; i < Out.size(); ++i) {
    const int ia = tags::index_of(A::tag_list, Out[i]);
    const int ib = tags::index_of(B::tag_list, Out[i]);
    if (ia >= 0 && ib >= 0) {
      FUCINA_CHECK(a.raw().shape[ia] == b.raw().shape[ib], ShapeMismatch,
                   "[{}] axis '{}' is {} on the left, {} on the right", op, Out[i].view(), a.raw().shape[ia],
                   b.raw().shape[ib]);
    }
    if (ia >= 0) d[i] = a.raw().shape[ia];
    else if (ib >= 0) d[i] = b.raw().shape[ib];
  }
  return d;
}

template <FloatTensor A, FloatTensor B>
auto binary_op(Context& ctx, raw::BinaryOp op, const A& a, const B& b) {
  constexpr auto out_tags = tags::pointwise_result<A::tag_list, B::tag_list>();
  using R = TensorFromList<DType::f32, out_tags>;
  const Dims shape = broadcast_sizes<out_tags>(raw::to_string(op), a, b);
  RawTensor out = ctx.empty(DType::f32, static_cast<int>(out_tags.size()), shape);
  RawTensor a_al = align_to_tags<out_tags>(a, shape), b_al = align_to_tags<out_tags>(b, shape);
  raw::binary(ctx, op, a_al, b_al, out);
  R r(out);
  if (records_grad(a, b))
    r.set_node(autograd::make_node<autograd::BinaryBackward>({a.node(), b.node()}, op, std::move(a_al), std::move(b_al),
                                                             std::move(out), static_cast<int>(A::rank),
                                                             axis_map<out_tags, A>(), static_cast<int>(B::rank),
                                                             axis_map<out_tags, B>()));
  return r;
}

template <FloatTensor X>
X unary_op(Context& ctx, raw::UnaryOp op, const X& x, float p0 = 0.f, float p1 = 0.f) {
  RawTensor out = ctx.empty(DType::f32, x.raw().rank, x.raw().shape);
  raw::unary(ctx, op, x.raw(), out, p0, p1);
  X r(out);
  if (records_grad(x)) r.set_node(autograd::make_node<autograd::UnaryBackward>({x.node()}, op, x.raw(), std::move(out), p0, p1));
  return r;
}

}  // namespace detail

template <FloatTensor A, FloatTensor B>
auto add(Context& ctx, const A& a, const B& b) { return detail::binary_op(ctx, raw::BinaryOp::add, a, b); }
template <FloatTensor A, FloatTensor B>
auto sub(Context& ctx, const A& a, const B& b) { return detail::binary_op(ctx, raw::BinaryOp::sub, a, b); }
template <FloatTensor A, FloatTensor B>
auto mul(Context& ctx, const A& a, const B& b) { return detail::binary_op(ctx, raw::BinaryOp::mul, a, b); }
template <FloatTensor A, FloatTensor B>
auto div(Context& ctx, const A& a, const B& b) { return detail::binary_op(ctx, raw::BinaryOp::div, a, b); }
template <FloatTensor A, FloatTensor B>
auto maximum(Context& ctx, const A& a, const B& b) { return detail::binary_op(ctx, raw::BinaryOp::maximum, a, b); }
template <FloatTensor A, FloatTensor B>
auto minimum(Context& ctx, const A& a, const B& b) { return detail::binary_op(ctx, raw::BinaryOp::minimum, a, b); }
template <FloatTensor A, FloatTensor B>
auto pow(Context& ctx, const A& a, const B& b) { return detail::binary_op(ctx, raw::BinaryOp::pow, a, b); }

// Scalar right operands.
template <FloatTensor X>
X add(Context& ctx, const X& x, float s) { return detail::unary_op(ctx, raw::UnaryOp::add_scalar, x, s); }
template <FloatTensor X>
X sub(Context& ctx, const X& x, float s) { return detail::unary_op(ctx, raw::UnaryOp::add_scalar, x, -s); }
template <FloatTensor X>
X mul(Context& ctx, const X& x, float s) { return detail::unary_op(ctx, raw::UnaryOp::mul_scalar, x, s); }
template <FloatTensor X>
X div(Context& ctx, const X& x, float s) { return detail::unary_op(ctx, raw::UnaryOp::mul_scalar, x, 1.0f / s); }
template <FloatTensor X>
X pow(Context& ctx, const X& x, float p) { return detail::unary_op(ctx, raw::UnaryOp::pow, x, p); }
template <FloatTensor X>
X clamp(Context& ctx, const X& x, float lo, float hi) {
  FUCINA_CHECK(lo <= hi, InvalidArgument, "[clamp] lower bound {} is above upper bound {}", lo, hi);
  return detail::unary_op(ctx, raw::UnaryOp::clamp, x, lo, hi);
}

template <FloatTensor X> X exp(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::exp, x); }
template <FloatTensor X> X log(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::log, x); }
template <FloatTensor X> X tanh(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::tanh, x); }
template <FloatTensor X> X sigmoid(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::sigmoid, x); }
template <FloatTensor X> X silu(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::silu, x); }
template <FloatTensor X> X gelu(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::gelu, x); }
template <FloatTensor X> X relu(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::relu, x); }
template <FloatTensor X> X sqrt(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::sqrt, x); }
template <FloatTensor X> X rsqrt(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::rsqrt, x); }
template <FloatTensor X> X neg(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::neg, x); }
template <FloatTensor X> X abs(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::abs, x); }
template <FloatTensor X> X square(Context& ctx, const X& x) { return detail::unary_op(ctx, raw::UnaryOp::square, x); }

// cond != 0 ? a : b, broadcast by name over the three operands (a's tags first).
template <FloatTensor C, FloatTensor A, FloatTensor B>
auto where(Context& ctx, const C& cond, const A& a, const B& b) {
  constexpr auto ab_tags = tags::pointwise_result<A::tag_list, B::tag_list>();
  constexpr auto out_tags = tags::pointwise_result<ab_tags, C::tag_list>();
  using R = TensorFromList<DType::f32, out_tags>;
  Dims shape = detail::broadcast_sizes<ab_tags>("where", a, b);
  for (std::size_t i = 0; i < out_tags.size(); ++i) {
    const int ic = tags::index_of(C::tag_list, out_tags[i]);
    if (ic < 0) continue;
    if (i < ab_tags.size()) {
      FUCINA_CHECK(shape[i] == cond.raw().shape[ic], ShapeMismatch, "[where] axis '{}' is {} in the values, {} in the condition",
                   out_tags[i].view(), shape[i], cond.raw().shape[ic]);
    } else {
      shape[i] = cond.raw().shape[ic];
    }
  }
  RawTensor out = ctx.empty(DType::f32, static_cast<int>(out_tags.size()), shape);
  RawTensor c_al = detail::align_to_tags<out_tags>(cond, shape);
  raw::where(ctx, c_al, detail::align_to_tags<out_tags>(a, shape), detail::align_to_tags<out_tags>(b, shape), out);
  R r(std::move(out));
  if (detail::records_grad(a, b))
    r.set_node(autograd::make_node<autograd::WhereBackward>({a.node(), b.node()}, std::move(c_al), static_cast<int>(A::rank),
                                                            detail::axis_map<out_tags, A>(), static_cast<int>(B::rank),
                                                            detail::axis_map<out_tags, B>()));
  return r;
}

// x with `value` wherever mask != 0; the mask's tags must all be tags of x.
template <FloatTensor X, FloatTensor M>
X masked_fill(Context& ctx, const X& x, const M& mask, float value) {
  static_assert(tags::count_minus(M::tag_list, X::tag_list) == 0, "mask has a tag the tensor lacks");
  Dims shape = x.raw().shape;
  for (std::size_t i = 0; i < M::rank; ++i) {
    const int ix = tags::index_of(X::tag_list, M::tag_list[i]);
    if (ix < 0) continue;  // unreachable: asserted above
    FUCINA_CHECK(x.raw().shape[ix] == mask.raw().shape[i], ShapeMismatch,
                 "[masked_fill] axis '{}' is {} in the tensor, {} in the mask", M::tag_list[i].view(), x.raw().shape[ix],
                 mask.raw().shape[i]);
  }
  RawTensor fillv = ctx.empty(DType::f32, 0, Dims{});
  raw::fill(ctx, fillv, value);
  RawTensor fill_b = fillv;
  fill_b.rank = x.raw().rank;
  fill_b.shape = shape;
  fill_b.strides = Dims{};
  RawTensor out = ctx.empty(DType::f32, x.raw().rank, shape);
  RawTensor m_al = detail::align_to_tags<X::tag_list>(mask, shape);
  raw::where(ctx, m_al, fill_b, x.raw(), out);
  X r(std::move(out));
  if (detail::records_grad(x)) {
    autograd::AxisMap id{};
    for (std::size_t i = 0; i < X::rank; ++i) id[i] = static_cast<int>(i);
    r.set_node(autograd::make_node<autograd::WhereBackward>({autograd::NodeRef{}, x.node()}, std::move(m_al),
                                                            static_cast<int>(X::rank), id, static_cast<int>(X::rank), id));
  }
  return r;
}

}  // namespace fucina
