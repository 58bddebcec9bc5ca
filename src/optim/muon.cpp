#include "fucina/optim/muon.hpp"

#include <algorithm>
#include <cmath>

#include "detail.hpp"
#include "fucina/kernels/gemm/sgemm.hpp"

namespace fucina::optim {

namespace {

constexpr float kA = 3.4445f, kB = -4.7750f, kC = 2.0315f;

// C[m,n] = A[m,k] * B[k,n] with explicit strides (all row-major unless strided otherwise).
void gemm(Context& ctx, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_rs,
          std::int64_t a_cs, const float* b, std::int64_t b_rs, std::int64_t b_cs, float* c) {
  kernels::GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a = a, g.a_rs = a_rs, g.a_cs = a_cs;
  g.b = b, g.b_rs = b_rs, g.b_cs = b_cs;
  g.c = c, g.c_rs = n, g.c_cs = 1;
  kernels::sgemm(g, &ctx.pool());
}

}  // namespace

void newton_schulz5(Context& ctx, std::span<float> x_io, std::int64_t rows, std::int64_t cols, int steps) {
  FUCINA_CHECK(rows > 0 && cols > 0 && static_cast<std::int64_t>(x_io.size()) == rows * cols, ShapeMismatch,
               "[newton_schulz5] {} elements for a {}x{} matrix", x_io.size(), rows, cols);
  FUCINA_CHECK(steps >= 0, InvalidArgument, "[newton_schulz5] steps {} < 0", steps);
  const bool transposed = rows > cols;
  const std::int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;  // m <= n
  std::vector<float> x(x_io.size()), bx(x_io.size()), a(static_cast<std::size_t>(m * m)), ca(a.size()), b(a.size());
  if (transposed) {
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) x[static_cast<std::size_t>(j * rows + i)] = x_io[static_cast<std::size_t>(i * cols + j)];
  } else {
    std::copy(x_io.begin(), x_io.end(), x.begin());
  }
  const float denom = detail::f32(std::sqrt(detail::sum_squares(ctx, x))) + 1e-7f;
  for (float& v : x) v = v / denom;
  for (int it = 0; it < steps; ++it) {
    gemm(ctx, m, m, n, x.data(), n, 1, x.data(), 1, n, a.data());  // A = X X^T
    for (std::size_t i = 0; i < a.size(); ++i) ca[i] = kC * a[i];
    gemm(ctx, m, m, m, ca.data(), m, 1, a.data(), m, 1, b.data());  // (c*A) A
    for (std::size_t i = 0; i < a.size(); ++i) b[i] = kB * a[i] + b[i];
    gemm(ctx, m, n, m, b.data(), m, 1, x.data(), n, 1, bx.data());  // B X
    detail::for_chunks(ctx, static_cast<std::int64_t>(x.size()), [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) x[i] = kA * x[i] + bx[i];
    });
  }
  if (transposed) {
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) x_io[static_cast<std::size_t>(i * cols + j)] = x[static_cast<std::size_t>(j * rows + i)];
  } else {
    std::copy(x.begin(), x.end(), x_io.begin());
  }
}

Muon::Muon(MuonOptions opts) : Optimizer(opts.lr), opts_(std::move(opts)) {
  detail::check_beta(opts_.momentum, "momentum", "Muon");
  detail::check_finite_nonneg(opts_.weight_decay, "weight_decay", "Muon");
  FUCINA_CHECK(opts_.ns_steps >= 0 && opts_.ns_steps <= 100, InvalidArgument, "[Muon] ns_steps {} outside [0, 100]",
               opts_.ns_steps);
  detail::check_finite_nonneg(opts_.adam_lr, "adam_lr", "Muon");
  detail::check_beta(opts_.adam_beta1, "adam_beta1", "Muon");
  detail::check_beta(opts_.adam_beta2, "adam_beta2", "Muon");
  detail::check_finite_nonneg(opts_.adam_eps, "adam_eps", "Muon");
  detail::check_finite_nonneg(opts_.adam_weight_decay, "adam_weight_decay", "Muon");
  FUCINA_CHECK(opts_.lr > 0.0 || opts_.adam_lr == 0.0, InvalidArgument,
               "[Muon] lr must be > 0 (the aux Adam lr is scaled by lr()/lr)");
}

bool Muon::uses_matrix_path(const std::string& key, std::span<const std::int64_t> shape) const {
  if (shape.size() != 2 || shape[0] == 0 || shape[1] == 0) return false;
  return std::find(opts_.fallback_params.begin(), opts_.fallback_params.end(), key) == opts_.fallback_params.end();
}

void Muon::step_impl(Context& ctx, std::span<ParamRef> params, float grad_scale) {
  detail::check_slot_shapes(slots_, params, "Muon");
  const double lr = this->lr();
  const double adam_lr = opts_.lr > 0.0 ? opts_.adam_lr * (lr / opts_.lr) : 0.0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    ParamRef& p = params[i];
    const std::string key = param_key(p, i);
    auto [it, fresh] = slots_.try_emplace(key);
    Slot& s = it->second;
    const auto n = static_cast<std::int64_t>(p.value.size());
    if (fresh) {
      s.shape = p.shape;
      s.matrix = uses_matrix_path(key, p.shape);
      if (s.matrix) s.momentum.assign(p.value.size(), 0.0f);
      else s.exp_avg.assign(p.value.size(), 0.0f), s.exp_avg_sq.assign(p.value.size(), 0.0f);
    }
    ++s.step;
    float* w = p.value.data();
    const float* g = p.grad.data();
    if (s.matrix) {
      const std::int64_t rows = p.shape[0], cols = p.shape[1];
      const float w_mom = detail::f32(1.0 - opts_.momentum), w_nest = detail::f32(opts_.momentum);
      std::vector<float> u(p.value.size());
      float* mb = s.momentum.data();
      const bool nesterov = opts_.nesterov;
      detail::for_chunks(ctx, n, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t j = b; j < e; ++j) {
          const float gj = g[j] * grad_scale;
          mb[j] = detail::lerp(mb[j], gj, w_mom);
          u[j] = nesterov ? detail::lerp(gj, mb[j], w_nest) : mb[j];
        }
      });
      newton_schulz5(ctx, u, rows, cols, opts_.ns_steps);
      const double ratio = static_cast<double>(rows) / static_cast<double>(cols);
      const float shape_scale = detail::f32(std::pow(std::max(1.0, ratio), 0.5));
      const float decay = detail::f32(1.0 - lr * opts_.weight_decay), neg_lr = detail::f32(-lr);
      detail::for_chunks(ctx, n, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t j = b; j < e; ++j) {
          const float o = u[j] * shape_scale;
          w[j] = w[j] * decay;
          w[j] = w[j] + neg_lr * o;
        }
      });
    } else {
      const double t = static_cast<double>(s.step);
      const float w1 = detail::f32(1.0 - opts_.adam_beta1), w2 = detail::f32(1.0 - opts_.adam_beta2);
      const float bc1 = detail::f32(1.0 - std::pow(opts_.adam_beta1, t));
      const float bc2 = detail::f32(1.0 - std::pow(opts_.adam_beta2, t));
      const float eps = detail::f32(opts_.adam_eps);
      const float decay = detail::f32(1.0 - adam_lr * opts_.adam_weight_decay), neg_lr = detail::f32(-adam_lr);
      float* m = s.exp_avg.data();
      float* v = s.exp_avg_sq.data();
      detail::for_chunks(ctx, n, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t j = b; j < e; ++j) {
          const float gj = g[j] * grad_scale;
          m[j] = detail::lerp(m[j], gj, w1);
          v[j] = detail::lerp(v[j], gj * gj, w2);
          const float upd = (m[j] / bc1) / (std::sqrt(v[j] / bc2) + eps);
          w[j] = w[j] * decay;
          w[j] = w[j] + neg_lr * upd;
        }
      });
    }
  }
}

void Muon::save_slots(StateDict& dict) const {
  for (const auto& [key, s] : slots_) {
    dict.put_i64s(detail::field(key, "shape"), s.shape);
    dict.put_i64(detail::field(key, "step"), s.step);
    if (s.matrix) {
      dict.put_f32(detail::field(key, "momentum_buffer"), s.shape, s.momentum);
    } else {
      dict.put_f32(detail::field(key, "exp_avg"), s.shape, s.exp_avg);
      dict.put_f32(detail::field(key, "exp_avg_sq"), s.shape, s.exp_avg_sq);
    }
  }
}

void Muon::load_slots(const StateDict& dict) {
  std::map<std::string, Slot> next;
  for (const auto& key : state_keys(dict)) {
    Slot s;
    s.shape = detail::load_shape(dict, key);
    s.step = detail::load_step(dict, key);
    s.matrix = uses_matrix_path(key, s.shape);
    if (s.matrix) {
      s.momentum = detail::load_buffer(dict, key, "momentum_buffer", s.shape);
    } else {
      s.exp_avg = detail::load_buffer(dict, key, "exp_avg", s.shape);
      s.exp_avg_sq = detail::load_buffer(dict, key, "exp_avg_sq", s.shape);
    }
    next.emplace(key, std::move(s));
  }
  slots_ = std::move(next);
}

}  // namespace fucina::optim
