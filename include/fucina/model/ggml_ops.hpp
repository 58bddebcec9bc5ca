#pragma once
// RoPE along named axes with ggml's exact arithmetic, for bit-level parity with
// llama.cpp: a one-ulp f32 difference here can flip a later f16 rounding (Note [f16
// summation order] in f16_matmul.hpp) and move logits by ~1e-3. (RMSNorm needs no twin:
// the core rms_norm already squares in f32 and sums in double, as ggml does.)
//  - rope_ggml: angles p·base^(-2i/d) by repeated f32 multiplication; the rotation as
//    GCC contracts ggml's x0·c - x1·s and x0·s + x1·c (first product fused: one FMA each).
#include <algorithm>
#include <cmath>
#include <span>

#include "fucina/fucina.hpp"

namespace fucina::model {

// x's axes must be (Pos, ..., Dim) with Dim last; positions index Pos.
template <TagName Pos, TagName Dim, FloatTensor X>
X rope_ggml(Context& ctx, const X& x_in, std::span<const std::int32_t> positions, float base, RopeMode mode) {
  static_assert(X::template axis_of<Pos>() == 0 && X::template axis_of<Dim>() == static_cast<int>(X::rank) - 1,
                "rope_ggml wants the position axis first and the rotated axis last");
  const X x = contiguous(ctx, x_in);
  const std::int64_t n_pos = x.template size<Pos>(), d = x.template size<Dim>();
  FUCINA_CHECK(static_cast<std::int64_t>(positions.size()) == n_pos && d % 2 == 0, InvalidShape,
               "[rope] {} positions for {} rows of {} dims (need equal, even dims)", positions.size(), n_pos, d);
  X out(ctx.empty(DType::f32, x.raw().rank, x.raw().shape));
  const std::int64_t per_pos = x.numel() / n_pos, rows = per_pos / d;
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(d));
  const float* src = x.data().data();
  float* dst = out.mutable_data().data();
  const bool neox = mode == RopeMode::neox;
  // Positions are independent: prompts split them over the pool (decode runs inline).
  ctx.pool().parallel_range(n_pos, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, per_pos)), [&](std::int64_t p0, std::int64_t p1) {
    std::vector<float> cs(static_cast<std::size_t>(d));
    for (std::int64_t p = p0; p < p1; ++p) {
      float theta = static_cast<float>(positions[static_cast<std::size_t>(p)]);
      for (std::int64_t i = 0; i < d / 2; ++i) {
        cs[static_cast<std::size_t>(2 * i)] = std::cos(theta);
        cs[static_cast<std::size_t>(2 * i + 1)] = std::sin(theta);
        theta *= theta_scale;
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* a = src + p * per_pos + r * d;
        float* y = dst + p * per_pos + r * d;
        for (std::int64_t i = 0; i < d / 2; ++i) {
          const std::int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + d / 2 : 2 * i + 1;
          const float c = cs[static_cast<std::size_t>(2 * i)], s = cs[static_cast<std::size_t>(2 * i + 1)];
          y[i0] = std::fma(a[i0], c, -(a[i1] * s));
          y[i1] = std::fma(a[i0], s, a[i1] * c);
        }
      }
    }
  });
  return out;
}

}  // namespace fucina::model
