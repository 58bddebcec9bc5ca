#include "fucina/optim/apollo.hpp"

#include <algorithm>
#include <cmath>

#include "detail.hpp"
#include "fucina/core/rng.hpp"
#include "fucina/kernels/gemm/sgemm.hpp"

namespace fucina::optim {

std::uint64_t apollo_projection_stream(std::uint64_t seed, std::string_view key, std::int64_t generation) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the key: the stream follows the name, not the list order
  for (char c : key) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return rng::bits(seed ^ h, static_cast<std::uint64_t>(generation));
}

Apollo::Apollo(ApolloOptions opts) : Optimizer(opts.lr), opts_(std::move(opts)) {
  detail::check_beta(opts_.beta1, "beta1", "Apollo");
  detail::check_beta(opts_.beta2, "beta2", "Apollo");
  detail::check_finite_nonneg(opts_.eps, "eps", "Apollo");
  detail::check_finite_nonneg(opts_.weight_decay, "weight_decay", "Apollo");
  detail::check_finite_nonneg(opts_.scale, "scale", "Apollo");
  FUCINA_CHECK(opts_.rank >= 1, InvalidArgument, "[Apollo] rank {} < 1", opts_.rank);
  FUCINA_CHECK(opts_.update_proj_gap >= 1, InvalidArgument, "[Apollo] update_proj_gap {} < 1", opts_.update_proj_gap);
}

bool Apollo::uses_matrix_path(const std::string& key, std::span<const std::int64_t> shape) const {
  if (shape.size() != 2 || shape[0] == 0 || shape[1] == 0) return false;
  return std::find(opts_.fallback_params.begin(), opts_.fallback_params.end(), key) == opts_.fallback_params.end();
}

namespace {

// The projected moments' shape; channels run along G's other axis, which needs
// rank <= rows for tall and rank < cols for wide params (else the reference's own
// broadcast fails).
std::vector<std::int64_t> moment_shape(const std::string& key, std::span<const std::int64_t> shape, std::int64_t rank) {
  const std::int64_t m = shape[0], n = shape[1];
  const bool tall = m >= n;
  FUCINA_CHECK(tall ? rank <= m : rank < n, InvalidArgument,
               "[Apollo] rank {} is too large for param '{}' [{}, {}]; route it to fallback_params or lower the rank",
               rank, key, m, n);
  return tall ? std::vector<std::int64_t>{m, rank} : std::vector<std::int64_t>{rank, n};
}

}  // namespace

void Apollo::step_matrix(Context& ctx, const std::string& key, ParamRef& p, Slot& s, float grad_scale) {
  const std::int64_t m = p.shape[0], n = p.shape[1], r = opts_.rank;
  const bool tall = m >= n;
  const auto numel = static_cast<std::int64_t>(p.value.size());
  // G = grad * scale, materialized once: the projection and the scaling both read it.
  std::vector<float> g(p.grad.size());
  detail::for_chunks(ctx, numel, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t j = b; j < e; ++j) g[j] = p.grad[j] * grad_scale;
  });
  // P for this step's generation: tall [r, n], wide [m, r].
  const std::uint64_t stream = apollo_projection_stream(opts_.seed, key, s.step / opts_.update_proj_gap);
  const std::int64_t p_numel = tall ? r * n : m * r;
  const float inv = detail::f32(std::sqrt(static_cast<double>(r)));
  std::vector<float> proj(static_cast<std::size_t>(p_numel));
  detail::for_chunks(ctx, p_numel, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t j = b; j < e; ++j) proj[j] = rng::normal(stream, static_cast<std::uint64_t>(j)) / inv;
  });
  const std::int64_t rr = s.moment_shape[0], rc = s.moment_shape[1];
  std::vector<float> proj_grad(static_cast<std::size_t>(rr * rc));
  kernels::GemmArgs ga;
  if (tall) {  // R = G P^T
    ga.m = m, ga.n = r, ga.k = n;
    ga.a = g.data(), ga.a_rs = n, ga.a_cs = 1;
    ga.b = proj.data(), ga.b_rs = 1, ga.b_cs = n;
  } else {  // R = P^T G
    ga.m = r, ga.n = n, ga.k = m;
    ga.a = proj.data(), ga.a_rs = 1, ga.a_cs = r;
    ga.b = g.data(), ga.b_rs = n, ga.b_cs = 1;
  }
  ga.c = proj_grad.data(), ga.c_rs = rc, ga.c_cs = 1;
  kernels::sgemm(ga, &ctx.pool());

  ++s.step;
  const double t = static_cast<double>(s.step);
  const float b1 = detail::f32(opts_.beta1), b2 = detail::f32(opts_.beta2);
  const float one_b1 = detail::f32(1.0 - opts_.beta1), one_b2 = detail::f32(1.0 - opts_.beta2);
  const float eps = detail::f32(opts_.eps);
  std::vector<float> normed(proj_grad.size());
  float* mo = s.exp_avg.data();
  float* vo = s.exp_avg_sq.data();
  for (std::size_t j = 0; j < proj_grad.size(); ++j) {
    const float x = proj_grad[j];
    mo[j] = mo[j] * b1 + one_b1 * x;
    vo[j] = vo[j] * b2 + (one_b2 * x) * x;
    normed[j] = mo[j] / (std::sqrt(vo[j]) + eps);
  }

  // Scaling factors: per channel (rows of R when tall, columns when wide) or one for all.
  std::vector<float> factor;
  if (opts_.scale_type == ApolloScale::tensor) {
    const float num = detail::f32(std::sqrt(detail::sum_squares(ctx, normed)));
    const float den = detail::f32(std::sqrt(detail::sum_squares(ctx, proj_grad))) + 1e-8f;
    factor.assign(1, num / den);
  } else if (tall) {
    factor.resize(static_cast<std::size_t>(rr));
    for (std::int64_t i = 0; i < rr; ++i) {
      double sn = 0.0, sr = 0.0;
      for (std::int64_t k = 0; k < rc; ++k) {
        const double a = normed[i * rc + k], b = proj_grad[i * rc + k];
        sn += a * a, sr += b * b;
      }
      factor[i] = detail::f32(std::sqrt(sn)) / (detail::f32(std::sqrt(sr)) + 1e-8f);
    }
  } else {
    std::vector<double> sn(static_cast<std::size_t>(rc), 0.0), sr(static_cast<std::size_t>(rc), 0.0);
    for (std::int64_t i = 0; i < rr; ++i)
      for (std::int64_t k = 0; k < rc; ++k) {
        const double a = normed[i * rc + k], b = proj_grad[i * rc + k];
        sn[k] += a * a, sr[k] += b * b;
      }
    factor.resize(static_cast<std::size_t>(rc));
    for (std::int64_t k = 0; k < rc; ++k) factor[k] = detail::f32(std::sqrt(sn[k])) / (detail::f32(std::sqrt(sr[k])) + 1e-8f);
  }
  const bool per_row = opts_.scale_type == ApolloScale::channel && tall;
  const bool per_col = opts_.scale_type == ApolloScale::channel && !tall;
  detail::for_chunks(ctx, numel, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t j = b; j < e; ++j) {
      const float f = per_row ? factor[j / n] : per_col ? factor[j % n] : factor[0];
      g[j] = g[j] * f;
    }
  });

  // Fira norm-growth limiter: |S| may grow by at most 1.01x per step.
  if (opts_.norm_growth_limiter) {
    const float norm = detail::f32(std::sqrt(detail::sum_squares(ctx, g)));
    if (s.has_prev_norm) {
      const float ratio = norm / (s.prev_norm + 1e-8f);
      if (!(1.01f > ratio)) {
        const float limiter = ratio / 1.01f;
        detail::for_chunks(ctx, numel, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t j = b; j < e; ++j) g[j] = g[j] / limiter;
        });
        s.prev_norm = norm / limiter;
      } else {
        s.prev_norm = norm;
      }
    } else {
      s.prev_norm = norm;
      s.has_prev_norm = true;
    }
  }

  const double bc1 = 1.0 - std::pow(opts_.beta1, t), bc2 = 1.0 - std::pow(opts_.beta2, t);
  const float neg_step = detail::f32(-(this->lr() * std::sqrt(bc2) / bc1));
  const float sqrt_scale = detail::f32(std::sqrt(opts_.scale));
  const bool decay = opts_.weight_decay > 0.0;
  const float neg_decay = detail::f32(-this->lr() * opts_.weight_decay);
  float* w = p.value.data();
  detail::for_chunks(ctx, numel, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t j = b; j < e; ++j) {
      w[j] = w[j] + neg_step * (g[j] * sqrt_scale);
      if (decay) w[j] = w[j] + neg_decay * w[j];
    }
  });
}

void Apollo::step_impl(Context& ctx, std::span<ParamRef> params, float grad_scale) {
  detail::check_slot_shapes(slots_, params, "Apollo");
  for (std::size_t i = 0; i < params.size(); ++i) {  // rank checks before any update
    const std::string key = param_key(params[i], i);
    if (!slots_.count(key) && uses_matrix_path(key, params[i].shape)) moment_shape(key, params[i].shape, opts_.rank);
  }
  const float b1 = detail::f32(opts_.beta1), b2 = detail::f32(opts_.beta2);
  const float one_b1 = detail::f32(1.0 - opts_.beta1), one_b2 = detail::f32(1.0 - opts_.beta2);
  const float eps = detail::f32(opts_.eps);
  for (std::size_t i = 0; i < params.size(); ++i) {
    ParamRef& p = params[i];
    const std::string key = param_key(p, i);
    auto [it, fresh] = slots_.try_emplace(key);
    Slot& s = it->second;
    if (fresh) {
      s.shape = p.shape;
      s.matrix = uses_matrix_path(key, p.shape);
      s.moment_shape = s.matrix ? moment_shape(key, p.shape, opts_.rank) : p.shape;
      const auto mn = static_cast<std::size_t>(shape_numel(s.moment_shape));
      s.exp_avg.assign(mn, 0.0f);
      s.exp_avg_sq.assign(mn, 0.0f);
    }
    if (s.matrix) {
      step_matrix(ctx, key, p, s, grad_scale);
      continue;
    }
    ++s.step;
    const double t = static_cast<double>(s.step);
    const double bc1 = 1.0 - std::pow(opts_.beta1, t), bc2 = 1.0 - std::pow(opts_.beta2, t);
    const float neg_step = detail::f32(-(this->lr() * std::sqrt(bc2) / bc1));
    const bool decay = opts_.weight_decay > 0.0;
    const float neg_decay = detail::f32(-this->lr() * opts_.weight_decay);
    float* w = p.value.data();
    const float* g = p.grad.data();
    float* m = s.exp_avg.data();
    float* v = s.exp_avg_sq.data();
    detail::for_chunks(ctx, static_cast<std::int64_t>(p.value.size()), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t j = b; j < e; ++j) {
        const float gj = g[j] * grad_scale;
        m[j] = m[j] * b1 + one_b1 * gj;
        v[j] = v[j] * b2 + (one_b2 * gj) * gj;
        w[j] = w[j] + neg_step * (m[j] / (std::sqrt(v[j]) + eps));
        if (decay) w[j] = w[j] + neg_decay * w[j];
      }
    });
  }
}

void Apollo::save_slots(StateDict& dict) const {
  for (const auto& [key, s] : slots_) {
    dict.put_i64s(detail::field(key, "shape"), s.shape);
    dict.put_i64(detail::field(key, "step"), s.step);
    dict.put_f32(detail::field(key, "exp_avg"), s.moment_shape, s.exp_avg);
    dict.put_f32(detail::field(key, "exp_avg_sq"), s.moment_shape, s.exp_avg_sq);
    if (s.has_prev_norm) {
      const std::int64_t one[1] = {1};
      dict.put_f32(detail::field(key, "scaled_grad_norm"), one, std::span<const float>(&s.prev_norm, 1));
    }
  }
}

void Apollo::load_slots(const StateDict& dict) {
  std::map<std::string, Slot> next;
  for (const auto& key : state_keys(dict)) {
    Slot s;
    s.shape = detail::load_shape(dict, key);
    s.step = detail::load_step(dict, key);
    s.matrix = uses_matrix_path(key, s.shape);
    s.moment_shape = s.matrix ? moment_shape(key, s.shape, opts_.rank) : s.shape;
    s.exp_avg = detail::load_buffer(dict, key, "exp_avg", s.moment_shape);
    s.exp_avg_sq = detail::load_buffer(dict, key, "exp_avg_sq", s.moment_shape);
    if (dict.contains(detail::field(key, "scaled_grad_norm"))) {
      const std::int64_t one[1] = {1};
      s.prev_norm = dict.get_f32(detail::field(key, "scaled_grad_norm"), one)[0];
      s.has_prev_norm = true;
    }
    next.emplace(key, std::move(s));
  }
  slots_ = std::move(next);
}

}  // namespace fucina::optim
