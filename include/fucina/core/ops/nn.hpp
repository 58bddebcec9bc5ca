#pragma once
// Neural-network ops along a named axis: softmax, log_softmax, rms_norm, layer_norm,
// rope, and the causal mask.
#include <limits>
#include <span>

#include "fucina/core/ops/pointwise.hpp"
#include "fucina/core/ops/view.hpp"
#include "fucina/core/raw/reduce.hpp"

namespace fucina {

template <TagName T, FloatTensor X>
X softmax(Context& ctx, const X& x) {
  RawTensor out = ctx.empty(DType::f32, x.raw().rank, x.raw().shape);
  raw::softmax(ctx, x.raw(), X::template axis_of<T>(), out, false);
  X r(out);
  if (autograd::grad_enabled() && x.requires_grad())
    r.set_node(autograd::make_node<autograd::RowBackward>({x.node()}, autograd::RowOp::softmax, out,
                                                         X::template axis_of<T>(), 0.f));
  return r;
}

template <TagName T, FloatTensor X>
X log_softmax(Context& ctx, const X& x) {
  RawTensor out = ctx.empty(DType::f32, x.raw().rank, x.raw().shape);
  raw::softmax(ctx, x.raw(), X::template axis_of<T>(), out, true);
  X r(out);
  if (autograd::grad_enabled() && x.requires_grad())
    r.set_node(autograd::make_node<autograd::RowBackward>({x.node()}, autograd::RowOp::log_softmax, out,
                                                         X::template axis_of<T>(), 0.f));
  return r;
}

// x / sqrt(mean(x^2 along T) + eps); multiply by a weight with mul() (broadcast by name).
template <TagName T, FloatTensor X>
X rms_norm(Context& ctx, const X& x, float eps) {
  RawTensor out = ctx.empty(DType::f32, x.raw().rank, x.raw().shape);
  raw::rms_norm(ctx, x.raw(), X::template axis_of<T>(), eps, out);
  X r(out);
  if (autograd::grad_enabled() && x.requires_grad())
    r.set_node(autograd::make_node<autograd::RowBackward>({x.node()}, autograd::RowOp::rms_norm, x.raw(),
                                                         X::template axis_of<T>(), eps));
  return r;
}

// mul(rms_norm<T>(x, eps), w) for a weight along T alone (a model's RMSNorm layer): the same
// floats in one pass over x instead of two ops and a temporary. When a gradient is to be
// recorded it is exactly those two ops (and their backward).
template <TagName T, FloatTensor X, FloatTensor W>
  requires(W::rank == 1 && W::template has_tag<T>)
X rms_norm_mul(Context& ctx, const X& x, const W& w, float eps) {
  if (autograd::grad_enabled() && (x.requires_grad() || w.requires_grad())) return mul(ctx, rms_norm<T>(ctx, x, eps), w);
  FUCINA_CHECK(w.template size<T>() == x.template size<T>(), ShapeMismatch, "[rms_norm_mul] axis '{}' is {} in x, {} in w",
               T.view(), x.template size<T>(), w.template size<T>());
  const auto wc = contiguous(ctx, w);
  RawTensor out = ctx.empty(DType::f32, x.raw().rank, x.raw().shape);
  raw::rms_norm_mul(ctx, x.raw(), X::template axis_of<T>(), wc.data().data(), eps, out);
  return X(out);
}

// (x - mean) / sqrt(var + eps) along T (biased variance, as PyTorch).
template <TagName T, FloatTensor X>
X layer_norm(Context& ctx, const X& x, float eps) {
  RawTensor out = ctx.empty(DType::f32, x.raw().rank, x.raw().shape);
  raw::layer_norm(ctx, x.raw(), X::template axis_of<T>(), eps, out);
  X r(out);
  if (autograd::grad_enabled() && x.requires_grad())
    r.set_node(autograd::make_node<autograd::RowBackward>({x.node()}, autograd::RowOp::layer_norm, x.raw(),
                                                         X::template axis_of<T>(), eps));
  return r;
}

enum class RopeMode { normal, neox };

// Rotary position embedding: rotates pairs along Dim by angle positions[p]·base^(-2i/d)
// where p indexes Pos. `normal` pairs adjacent elements (Llama), `neox` pairs halves.
// llama.cpp's arithmetic bit for bit (Note [Rope arithmetic] in core/raw/reduce.hpp).
template <TagName Pos, TagName Dim, FloatTensor X>
X rope(Context& ctx, const X& x, std::span<const std::int32_t> positions, float base, RopeMode mode) {
  RawTensor out = ctx.empty(DType::f32, x.raw().rank, x.raw().shape);
  raw::rope(ctx, x.raw(), X::template axis_of<Pos>(), X::template axis_of<Dim>(), positions, base,
            mode == RopeMode::neox, out);
  X r(std::move(out));
  if (autograd::grad_enabled() && x.requires_grad())
    r.set_node(autograd::make_node<autograd::RopeBackward>(
        {x.node()}, X::template axis_of<Pos>(), X::template axis_of<Dim>(),
        std::vector<std::int32_t>(positions.begin(), positions.end()), base, mode == RopeMode::neox));
  return r;
}

// Additive causal mask over (Q, K): 0 where key k <= query q + offset, -inf elsewhere.
// offset = number of earlier positions already in a KV cache.
template <TagName Q, TagName K>
Tensor<Q, K> causal_mask(Context& ctx, std::int64_t n_q, std::int64_t n_k, std::int64_t offset = 0) {
  auto m = Tensor<Q, K>::empty(ctx, {n_q, n_k});
  float* p = m.mutable_data().data();
  for (std::int64_t q = 0; q < n_q; ++q)
    for (std::int64_t k = 0; k < n_k; ++k)
      p[q * n_k + k] = k <= q + offset ? 0.f : -std::numeric_limits<float>::infinity();
  return m;
}

}  // namespace fucina
