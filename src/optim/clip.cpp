#include "fucina/optim/clip.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "detail.hpp"

namespace fucina::optim {

float global_norm(Context& ctx, std::span<const std::span<const float>> arrays) {
  double total = 0.0;
  for (const auto& a : arrays) total += detail::sum_squares(ctx, a);
  return detail::f32(std::sqrt(total));
}

float global_grad_norm(Context& ctx, std::span<const ParamRef> params) {
  std::vector<std::span<const float>> grads;
  grads.reserve(params.size());
  for (const auto& p : params) grads.push_back(p.grad);
  return global_norm(ctx, grads);
}

namespace {
float clip_coef(float norm, double max_norm) {
  FUCINA_CHECK(std::isfinite(max_norm) && max_norm > 0.0, InvalidArgument, "[clip_grad_norm] max_norm {} must be > 0",
               max_norm);
  // torch: clamp(max_norm / (norm + 1e-6), max=1) in f32, where float / tensor is
  // evaluated as reciprocal(tensor) * float; a NaN/inf norm propagates like torch.
  const float coef = (1.0f / (norm + 1e-6f)) * detail::f32(max_norm);
  return coef < 1.0f || std::isnan(coef) ? coef : 1.0f;
}
}  // namespace

ClipResult clip_grad_norm(Context& ctx, std::span<const ParamRef> params, double max_norm) {
  ClipResult r;
  r.norm = global_grad_norm(ctx, params);
  r.scale = clip_coef(r.norm, max_norm);
  return r;
}

float clip_grad_norm_inplace(Context& ctx, std::span<const std::span<float>> grads, double max_norm) {
  std::vector<std::span<const float>> views(grads.begin(), grads.end());
  const float norm = global_norm(ctx, views);
  const float coef = clip_coef(norm, max_norm);
  for (const auto& g : grads)
    detail::for_chunks(ctx, static_cast<std::int64_t>(g.size()), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t j = b; j < e; ++j) g[j] = g[j] * coef;
    });
  return norm;
}

}  // namespace fucina::optim
