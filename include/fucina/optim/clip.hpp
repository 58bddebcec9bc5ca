#pragma once
// Gradient clipping by global L2 norm, as torch.nn.utils.clip_grad_norm_:
//   norm = |concat(grads)|_2;  coef = min(1, max_norm / (norm + 1e-6))  (f32)
// The sum of squares is f64 over a fixed 2^15-element chunk grid (thread-count invariant)
// and the norm is rounded to f32 once.
#include <span>

#include "fucina/core/context.hpp"
#include "fucina/optim/param.hpp"

namespace fucina::optim {

struct ClipResult {
  float norm = 0.0f;   // global gradient norm before clipping
  float scale = 1.0f;  // multiply gradients by this (pass it to Optimizer::step)
};

float global_grad_norm(Context& ctx, std::span<const ParamRef> params);
float global_norm(Context& ctx, std::span<const std::span<const float>> arrays);

// Computes the clip coefficient without touching the (read-only) gradients.
ClipResult clip_grad_norm(Context& ctx, std::span<const ParamRef> params, double max_norm);

// In-place flavour for mutable gradient buffers: scales them, returns the norm.
float clip_grad_norm_inplace(Context& ctx, std::span<const std::span<float>> grads, double max_norm);

}  // namespace fucina::optim
