#include "fucina/optim/optimizer.hpp"

#include <fmt/ranges.h>

#include <cmath>
#include <set>

#include "detail.hpp"
#include "fucina/core/error.hpp"

namespace fucina::optim {

std::int64_t shape_numel(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string param_key(const ParamRef& p, std::size_t i) { return p.name.empty() ? "param" + std::to_string(i) : p.name; }

void validate_params(std::span<const ParamRef> params, std::string_view op, bool with_grads) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamRef& p = params[i];
    const std::string key = param_key(p, i);
    FUCINA_CHECK(p.shape.size() <= 8, InvalidShape, "[{}] param '{}' has rank {} > 8", op, key, p.shape.size());
    for (std::int64_t d : p.shape)
      FUCINA_CHECK(d >= 0, InvalidShape, "[{}] param '{}' has a negative dim {}", op, key, d);
    const std::int64_t n = shape_numel(p.shape);
    FUCINA_CHECK(static_cast<std::int64_t>(p.value.size()) == n, ShapeMismatch,
                 "[{}] param '{}': shape [{}] holds {} elements, value has {}", op, key, fmt::join(p.shape, ", "), n,
                 p.value.size());
    FUCINA_CHECK(!with_grads || p.grad.size() == p.value.size(), ShapeMismatch, "[{}] param '{}': grad has {} elements, value has {}",
                 op, key, p.grad.size(), p.value.size());
    FUCINA_CHECK(seen.insert(key).second, InvalidArgument, "[{}] duplicate parameter name '{}'", op, key);
  }
}

Optimizer::Optimizer(double lr) : lr_(lr) { detail::check_finite_nonneg(lr, "lr", "optim"); }

void Optimizer::set_lr(double lr) {
  detail::check_finite_nonneg(lr, "lr", "optim");
  lr_ = lr;
}

void Optimizer::step(Context& ctx, std::span<ParamRef> params, float grad_scale) {
  FUCINA_CHECK(std::isfinite(grad_scale), InvalidArgument, "[optim::step] grad_scale {} is not finite", grad_scale);
  validate_params(params, kind());
  step_impl(ctx, params, grad_scale);
  ++steps_;
}

namespace {
std::int64_t fourcc(std::string_view k) {
  std::int64_t v = 0;
  for (char c : k) v = (v << 8) | static_cast<unsigned char>(c);
  return v;
}
}  // namespace

StateDict Optimizer::state_dict() const {
  StateDict d;
  d.put_i64("optim/kind", fourcc(kind()));
  d.put_i64("optim/step", steps_);
  d.put_f64("optim/lr", lr_);
  save_slots(d);
  return d;
}

void Optimizer::load_state_dict(const StateDict& dict) {
  const std::int64_t k = dict.get_i64("optim/kind");
  FUCINA_CHECK(k == fourcc(kind()), InvalidFile, "[optim::load] state was saved by another optimizer kind (expected {})",
               kind());
  const std::int64_t steps = dict.get_i64("optim/step");
  FUCINA_CHECK(steps >= 0, InvalidFile, "[optim::load] negative step count {}", steps);
  const double lr = dict.get_f64("optim/lr");
  FUCINA_CHECK(std::isfinite(lr) && lr >= 0.0, InvalidFile, "[optim::load] bad lr {}", lr);
  load_slots(dict);  // validates everything, then commits
  steps_ = steps;
  lr_ = lr;
}

std::vector<std::string> state_keys(const StateDict& dict) {
  std::set<std::string> keys;
  for (const auto& [name, r] : dict.records()) {
    if (name.rfind("state/", 0) != 0) continue;
    const auto slash = name.rfind('/');
    if (slash <= 6) continue;
    keys.insert(name.substr(6, slash - 6));
  }
  return {keys.begin(), keys.end()};
}

namespace detail {

double sum_squares(Context& ctx, std::span<const float> x) {
  const auto n = static_cast<std::int64_t>(x.size());
  const std::int64_t chunks = std::max<std::int64_t>(1, (n + kChunk - 1) / kChunk);
  std::vector<double> part(static_cast<std::size_t>(chunks), 0.0);
  auto body = [&](std::int64_t c) {
    double s = 0.0;
    const std::int64_t e = std::min(n, (c + 1) * kChunk);
    for (std::int64_t i = c * kChunk; i < e; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    part[static_cast<std::size_t>(c)] = s;
  };
  if (chunks == 1) body(0);
  else ctx.pool().parallel_for(chunks, body);
  double total = 0.0;
  for (double s : part) total += s;
  return total;
}

std::vector<std::int64_t> load_shape(const StateDict& dict, const std::string& key) {
  const auto s = dict.get_i64s(field(key, "shape"));
  FUCINA_CHECK(s.size() <= 8, InvalidFile, "[optim::load] slot '{}' has rank {} > 8", key, s.size());
  for (std::int64_t d : s) FUCINA_CHECK(d >= 0, InvalidFile, "[optim::load] slot '{}' has a negative dim", key);
  return {s.begin(), s.end()};
}

std::int64_t load_step(const StateDict& dict, const std::string& key) {
  const std::int64_t s = dict.get_i64(field(key, "step"));
  FUCINA_CHECK(s >= 0, InvalidFile, "[optim::load] slot '{}' has negative step {}", key, s);
  return s;
}

std::vector<float> load_buffer(const StateDict& dict, const std::string& key, const char* name,
                               std::span<const std::int64_t> shape) {
  const auto v = dict.get_f32(field(key, name), shape);
  return {v.begin(), v.end()};
}

}  // namespace detail
}  // namespace fucina::optim
