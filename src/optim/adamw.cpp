#include "fucina/optim/adamw.hpp"

#include <cmath>

#include "detail.hpp"

namespace fucina::optim {

AdamW::AdamW(AdamWOptions opts) : Optimizer(opts.lr), opts_(opts) {
  detail::check_beta(opts.beta1, "beta1", "AdamW");
  detail::check_beta(opts.beta2, "beta2", "AdamW");
  detail::check_finite_nonneg(opts.eps, "eps", "AdamW");
  detail::check_finite_nonneg(opts.weight_decay, "weight_decay", "AdamW");
}

void AdamW::step_impl(Context& ctx, std::span<ParamRef> params, float grad_scale) {
  const double lr = this->lr();
  const float decay = detail::f32(1.0 - lr * opts_.weight_decay);
  const float b1 = detail::f32(opts_.beta1), b2 = detail::f32(opts_.beta2);
  const float one_b1 = detail::f32(1.0 - opts_.beta1), one_b2 = detail::f32(1.0 - opts_.beta2);
  const float eps = detail::f32(opts_.eps);
  detail::check_slot_shapes(slots_, params, "AdamW");
  for (std::size_t i = 0; i < params.size(); ++i) {
    ParamRef& p = params[i];
    const std::string key = param_key(p, i);
    auto [it, fresh] = slots_.try_emplace(key);
    Slot& s = it->second;
    if (fresh) {
      s.shape = p.shape;
      s.exp_avg.assign(p.value.size(), 0.0f);
      s.exp_avg_sq.assign(p.value.size(), 0.0f);
    }
    FUCINA_CHECK(s.shape == p.shape, ShapeMismatch, "[AdamW] param '{}' changed shape since its state was created", key);
    ++s.step;
    const double t = static_cast<double>(s.step);
    const double bc1 = 1.0 - std::pow(opts_.beta1, t), bc2 = 1.0 - std::pow(opts_.beta2, t);
    const float neg_step = detail::f32(-(lr / bc1)), bc2_sqrt = detail::f32(std::sqrt(bc2));
    float* w = p.value.data();
    const float* g = p.grad.data();
    float* m = s.exp_avg.data();
    float* v = s.exp_avg_sq.data();
    detail::for_chunks(ctx, static_cast<std::int64_t>(p.value.size()), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t j = b; j < e; ++j) {
        const float gj = g[j] * grad_scale;
        w[j] = w[j] * decay;
        m[j] = m[j] * b1 + one_b1 * gj;
        v[j] = v[j] * b2 + (one_b2 * gj) * gj;
        const float denom = std::sqrt(v[j]) / bc2_sqrt + eps;
        w[j] = w[j] + (neg_step * m[j]) / denom;
      }
    });
  }
}

void AdamW::save_slots(StateDict& dict) const {
  for (const auto& [key, s] : slots_) {
    dict.put_i64s(detail::field(key, "shape"), s.shape);
    dict.put_i64(detail::field(key, "step"), s.step);
    dict.put_f32(detail::field(key, "exp_avg"), s.shape, s.exp_avg);
    dict.put_f32(detail::field(key, "exp_avg_sq"), s.shape, s.exp_avg_sq);
  }
}

void AdamW::load_slots(const StateDict& dict) {
  std::map<std::string, Slot> next;
  for (const auto& key : state_keys(dict)) {
    Slot s;
    s.shape = detail::load_shape(dict, key);
    s.step = detail::load_step(dict, key);
    s.exp_avg = detail::load_buffer(dict, key, "exp_avg", s.shape);
    s.exp_avg_sq = detail::load_buffer(dict, key, "exp_avg_sq", s.shape);
    next.emplace(key, std::move(s));
  }
  slots_ = std::move(next);
}

}  // namespace fucina::optim
