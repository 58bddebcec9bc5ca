#pragma once
// ggml's vectorized exp and the ops built on it (SwiGLU, softmax), bit for bit.
//
// Note [ggml expf]: on AVX-512 machines ggml computes SwiGLU (ggml_vec_swiglu_f32), softmax
// (ggml_vec_soft_max_f32: the MoE router, the tiled flash-attention path) with its own exp,
// ggml_v_expf (Arm's optimized-routines algorithm: a degree-5 polynomial after reducing by
// ln 2 in two FMA steps, scaled by 2^n with vscalefps), on every full 16-lane block, and
// with libm's expf on the < 16 elements left over. The two differ by an ulp often enough
// that a later f16 rounding flips (Note [ggml summation order] in f16_matmul.hpp), so these
// kernels take the same split: ggml_vexpf is the exact scalar twin of one lane, and the
// AVX-512 arm runs the same operations 16 lanes at a time.
#include <cstdint>

#include "fucina/fucina.hpp"
#include "fucina/model/backward.hpp"

namespace fucina::model {

// The sum of 16 f32 lanes in the order of GCC's _mm512_reduce_add_ps, which ggml uses to
// fold its vector accumulators: halves, then quarters, then (0+2) + (1+3).
inline float fold16(const float* l) {
  float t3[8], t6[4];
  for (int i = 0; i < 8; ++i) t3[i] = l[8 + i] + l[i];
  for (int i = 0; i < 4; ++i) t6[i] = t3[4 + i] + t3[i];
  return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

// One lane of ggml_v_expf (AVX-512): NaN stays NaN, |n| > 192 saturates to 0 or +inf.
float ggml_vexpf(float x);

// y[i] = ggml_vexpf(x[i]) for every i (SIMD lanes where they fit; the same bits either way).
void ggml_vexpf_rows(const float* x, float* y, std::int64_t n);

// y[i] = silu(gate[i]) · up[i] as ggml_vec_swiglu_f32: silu(x) = x / (1 + exp(0 - x)),
// blocks of 16 with ggml_vexpf, the rest with expf.
void swiglu_ggml(const float* gate, const float* up, float* y, std::int64_t n);

// y = softmax(x) as ggml's soft_max op on one row: max, exp(x - max) (blocks of 16 with
// ggml_vexpf, each block's sum folded in f32 and added in double; the rest with expf, added
// in double), then y *= (float)(1 / sum).
void softmax_ggml(const float* x, float* y, std::int64_t n);

// silu(gate) · up row by row (ggml's blocks of 16 restart on every row), differentiable.
template <TagName R, TagName C>
Tensor<R, C> swiglu_ggml(Context& ctx, const Tensor<R, C>& gate, const Tensor<R, C>& up) {
  const auto g = contiguous(ctx, gate), u = contiguous(ctx, up);
  FUCINA_CHECK(g.template size<R>() == u.template size<R>() && g.template size<C>() == u.template size<C>(), ShapeMismatch,
               "[swiglu] gate is {}x{}, up {}x{}", g.template size<R>(), g.template size<C>(), u.template size<R>(),
               u.template size<C>());
  const std::int64_t rows = g.template size<R>(), n = g.template size<C>();
  auto y = Tensor<R, C>::empty(ctx, {rows, n});
  const float *gp = g.data().data(), *up_p = u.data().data();
  float* yp = y.mutable_data().data();
  ctx.pool().parallel_range(rows, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, n)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) swiglu_ggml(gp + r * n, up_p + r * n, yp + r * n, n);
  });
  if (autograd::grad_enabled() && (gate.requires_grad() || up.requires_grad()))
    y.set_node(autograd::make_node<SwigluBackward>({gate.node(), up.node()}, g.raw(), u.raw()));
  return y;
}

}  // namespace fucina::model
