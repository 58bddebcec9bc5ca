#pragma once
// Ternary weights for ES: the search distribution lives on a latent f32 tensor and the
// network only ever sees ternarize(latent) in {−scale, 0, +scale}. The map is piecewise
// constant, so no gradient exists; ES smooths it through the Gaussian perturbation.
#include <cmath>

#include "fucina/core/error.hpp"
#include "fucina/core/ops/view.hpp"
#include "fucina/core/tensor.hpp"

namespace fucina::es {

// The trit of one latent value: +1 above threshold, −1 below −threshold, else 0.
inline int trit(float latent, float threshold) noexcept { return latent > threshold ? 1 : (latent < -threshold ? -1 : 0); }

// scale·trit(latent) elementwise, as a fresh tensor with latent's tags.
template <FloatTensor X>
X ternarize(Context& ctx, const X& latent, float threshold, float scale) {
  FUCINA_CHECK(std::isfinite(threshold) && threshold >= 0.f, InvalidArgument, "[ternarize] threshold must be finite and >= 0, got {}",
               threshold);
  FUCINA_CHECK(std::isfinite(scale), InvalidArgument, "[ternarize] scale must be finite, got {}", scale);
  const X src = contiguous(ctx, latent);
  X out(ctx.empty(DType::f32, src.raw().rank, src.raw().shape));
  const auto in = src.data();
  auto o = out.mutable_data();
  for (std::size_t i = 0; i < in.size(); ++i) o[i] = static_cast<float>(trit(in[i], threshold)) * scale;
  return out;
}

}  // namespace fucina::es
