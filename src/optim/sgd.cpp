#include "fucina/optim/sgd.hpp"

#include "detail.hpp"

namespace fucina::optim {

Sgd::Sgd(SgdOptions opts) : Optimizer(opts.lr), opts_(opts) {
  detail::check_finite_nonneg(opts.momentum, "momentum", "Sgd");
  detail::check_finite_nonneg(opts.dampening, "dampening", "Sgd");
  detail::check_finite_nonneg(opts.weight_decay, "weight_decay", "Sgd");
  FUCINA_CHECK(!opts.nesterov || (opts.momentum > 0.0 && opts.dampening == 0.0), InvalidArgument,
               "[Sgd] nesterov requires momentum > 0 and dampening == 0");
}

void Sgd::step_impl(Context& ctx, std::span<ParamRef> params, float grad_scale) {
  const float wd = detail::f32(opts_.weight_decay), mu = detail::f32(opts_.momentum);
  const float damp = detail::f32(1.0 - opts_.dampening), neg_lr = detail::f32(-lr());
  const bool use_wd = opts_.weight_decay != 0.0, use_mu = opts_.momentum != 0.0, nesterov = opts_.nesterov;
  detail::check_slot_shapes(slots_, params, "Sgd");
  for (std::size_t i = 0; i < params.size(); ++i) {
    ParamRef& p = params[i];
    const std::string key = param_key(p, i);
    auto [it, fresh] = slots_.try_emplace(key);
    Slot& s = it->second;
    if (fresh) s.shape = p.shape;
    FUCINA_CHECK(s.shape == p.shape, ShapeMismatch, "[Sgd] param '{}' changed shape since its state was created", key);
    const bool first = s.momentum.empty();
    if (use_mu && first) s.momentum.resize(p.value.size());
    float* w = p.value.data();
    const float* g = p.grad.data();
    float* buf = s.momentum.data();
    detail::for_chunks(ctx, static_cast<std::int64_t>(p.value.size()), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t j = b; j < e; ++j) {
        float d = g[j] * grad_scale;
        if (use_wd) d = d + wd * w[j];
        if (use_mu) {
          buf[j] = first ? d : buf[j] * mu + damp * d;
          d = nesterov ? d + mu * buf[j] : buf[j];
        }
        w[j] = w[j] + neg_lr * d;
      }
    });
    ++s.step;
  }
}

void Sgd::save_slots(StateDict& dict) const {
  for (const auto& [key, s] : slots_) {
    dict.put_i64s(detail::field(key, "shape"), s.shape);
    dict.put_i64(detail::field(key, "step"), s.step);
    if (!s.momentum.empty()) dict.put_f32(detail::field(key, "momentum_buffer"), s.shape, s.momentum);
  }
}

void Sgd::load_slots(const StateDict& dict) {
  std::map<std::string, Slot> next;
  for (const auto& key : state_keys(dict)) {
    Slot s;
    s.shape = detail::load_shape(dict, key);
    s.step = detail::load_step(dict, key);
    if (dict.contains(detail::field(key, "momentum_buffer")))
      s.momentum = detail::load_buffer(dict, key, "momentum_buffer", s.shape);
    next.emplace(key, std::move(s));
  }
  slots_ = std::move(next);
}

}  // namespace fucina::optim
