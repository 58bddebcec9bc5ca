#include "fucina/model/backward.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "fucina/core/error.hpp"
#include "fucina/core/half.hpp"
#include "fucina/kernels/gemm/sgemm.hpp"
#include "fucina/quant/traits.hpp"

namespace fucina::model {

namespace {

RawTensor zeros(Context& ctx, int rank, const Dims& shape) {
  RawTensor t = ctx.empty(DType::f32, rank, shape);
  std::fill_n(t.data<float>(), t.numel(), 0.f);
  return t;
}

Dims dims2(std::int64_t a, std::int64_t b) {
  Dims d{};
  d[0] = a, d[1] = b;
  return d;
}

}  // namespace

void WeightRows::decode(std::int64_t r0, std::int64_t n, float* dst) const {
  const std::int64_t c = cols();
  for (std::int64_t r = 0; r < n; ++r) {
    float* out = dst + r * c;
    if (quant.data) {
      quant::dequantize_row(quant.type, quant.row(r0 + r), out, c);
    } else if (dense.dtype == DType::f16) {
      const Half* src = dense.data<Half>() + (r0 + r) * dense.strides[0];
      for (std::int64_t j = 0; j < c; ++j) out[j] = half_to_float(src[j].bits);
    } else {
      std::memcpy(out, dense.data<float>() + (r0 + r) * dense.strides[0], static_cast<std::size_t>(c) * sizeof(float));
    }
  }
}

RawTensor linear_input_grad(Context& ctx, const RawTensor& gy, const WeightRows& w) {
  const std::int64_t n = gy.shape[0], n_out = w.rows(), n_in = w.cols();
  FUCINA_ASSERT(gy.rank == 2 && gy.shape[1] == n_out);
  RawTensor gx = ctx.empty(DType::f32, 2, dims2(n, n_in));
  kernels::GemmArgs g;
  g.m = n, g.n = n_in;
  g.a = gy.data<float>(), g.a_rs = gy.strides[0], g.a_cs = gy.strides[1];
  g.c = gx.data<float>(), g.c_rs = n_in;
  if (!w.quant.data && w.dense.dtype == DType::f32) {  // W read in place
    g.k = n_out;
    g.b = w.dense.data<float>(), g.b_rs = w.dense.strides[0];
    kernels::sgemm(g, &ctx.pool());
    return gx;
  }
  // A block of W's rows at a time, decoded in parallel (Note [Frozen weight gradient]).
  const std::int64_t block = std::clamp<std::int64_t>((std::int64_t{1} << 20) / std::max<std::int64_t>(1, n_in), 16, 512);
  std::vector<float> rows(static_cast<std::size_t>(std::min(block, n_out) * n_in));
  for (std::int64_t r0 = 0; r0 < n_out; r0 += block) {
    const std::int64_t nr = std::min(block, n_out - r0);
    ctx.pool().parallel_range(nr, 4, [&](std::int64_t b, std::int64_t e) { w.decode(r0 + b, e - b, rows.data() + b * n_in); });
    kernels::GemmArgs gb = g;
    gb.k = nr;
    gb.a = gy.data<float>() + r0 * gy.strides[1];
    gb.b = rows.data(), gb.b_rs = n_in;
    gb.accumulate = r0 > 0;
    kernels::sgemm(gb, &ctx.pool());
  }
  return gx;
}

RawTensor linear_weight_grad(Context& ctx, const RawTensor& gy, const RawTensor& x) {
  const std::int64_t n = gy.shape[0], n_out = gy.shape[1], n_in = x.shape[1];
  FUCINA_ASSERT(x.rank == 2 && x.shape[0] == n);
  RawTensor gw = ctx.empty(DType::f32, 2, dims2(n_out, n_in));
  kernels::GemmArgs g;
  g.m = n_out, g.n = n_in, g.k = n;
  g.a = gy.data<float>(), g.a_rs = gy.strides[1], g.a_cs = gy.strides[0];
  g.b = x.data<float>(), g.b_rs = x.strides[0], g.b_cs = x.strides[1];
  g.c = gw.data<float>(), g.c_rs = n_in;
  kernels::sgemm(g, &ctx.pool());
  return gw;
}

void LinearBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  if (inputs_[0]) grads[0] = linear_input_grad(ctx, gy, w_);
  if (inputs_[1]) grads[1] = linear_weight_grad(ctx, gy, x_);
}

void SwigluBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  const std::int64_t rows = gate_.shape[0], n = gate_.shape[1];
  RawTensor gg = ctx.empty(DType::f32, 2, gate_.shape), gu = ctx.empty(DType::f32, 2, gate_.shape);
  const float *g = gate_.data<float>(), *u = up_.data<float>(), *dy = gy.data<float>();
  float *dg = gg.data<float>(), *du = gu.data<float>();
  ctx.pool().parallel_range(rows, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r)
      for (std::int64_t j = 0; j < n; ++j) {
        const std::int64_t i = r * n + j;
        const float d = dy[r * gy.strides[0] + j * gy.strides[1]];
        const float s = 1.f / (1.f + std::exp(-g[i]));
        du[i] = d * g[i] * s;
        dg[i] = d * u[i] * s * (1.f + g[i] * (1.f - s));
      }
  });
  if (inputs_[0]) grads[0] = std::move(gg);
  if (inputs_[1]) grads[1] = std::move(gu);
}

void CausalAttentionBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  const std::int64_t kvh = q_.shape[1], grp = q_.shape[2], hd = q_.shape[3];
  const std::int64_t qs = kvh * grp * hd, ks = kvh * hd;  // row strides
  RawTensor gq = ctx.empty(DType::f32, 4, q_.shape), gk = zeros(ctx, 3, k_.shape), gv = zeros(ctx, 3, v_.shape);
  const std::int64_t n_seq = static_cast<std::int64_t>(starts_.size()) - 1;
  // One task per (sequence, kv head): it owns that head's dk/dv rows, summed over its groups.
  ctx.pool().parallel_for(n_seq * kvh, [&](std::int64_t task) {
    const std::int64_t s = task / kvh, h = task % kvh;
    const std::int64_t r0 = starts_[static_cast<std::size_t>(s)], n = starts_[static_cast<std::size_t>(s) + 1] - r0;
    std::vector<float> p(static_cast<std::size_t>(n * n)), dp(static_cast<std::size_t>(n * n));
    const float* k = k_.data<float>() + r0 * ks + h * hd;
    const float* v = v_.data<float>() + r0 * ks + h * hd;
    float* dk = gk.data<float>() + r0 * ks + h * hd;
    float* dv = gv.data<float>() + r0 * ks + h * hd;
    for (std::int64_t g = 0; g < grp; ++g) {
      const float* q = q_.data<float>() + r0 * qs + (h * grp + g) * hd;
      float* dq = gq.data<float>() + r0 * qs + (h * grp + g) * hd;
      const float* dout = gy.data<float>() + r0 * gy.strides[0] + h * gy.strides[1] + g * gy.strides[2];
      kernels::GemmArgs a;  // p = q·kᵀ, dp = dout·vᵀ
      a.m = n, a.n = n, a.k = hd;
      a.a = q, a.a_rs = qs;
      a.b = k, a.b_rs = 1, a.b_cs = ks;
      a.c = p.data(), a.c_rs = n;
      kernels::sgemm(a, nullptr);
      a.a = dout, a.a_rs = gy.strides[0], a.a_cs = gy.strides[3];
      a.b = v;
      a.c = dp.data();
      kernels::sgemm(a, nullptr);
      for (std::int64_t i = 0; i < n; ++i) {  // softmax over keys 0..i, then dS = P·(dP - Σ P·dP)·scale
        float* pi = p.data() + i * n;
        float* di = dp.data() + i * n;
        float m = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = 0; j <= i; ++j) m = std::max(m, pi[j] * scale_);
        double sum = 0;
        for (std::int64_t j = 0; j <= i; ++j) sum += (pi[j] = std::exp(pi[j] * scale_ - m));
        const float inv = static_cast<float>(1.0 / sum);
        double dot = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          pi[j] *= inv;
          dot += static_cast<double>(pi[j]) * di[j];
        }
        for (std::int64_t j = 0; j <= i; ++j) di[j] = pi[j] * (di[j] - static_cast<float>(dot)) * scale_;
        std::fill(pi + i + 1, pi + n, 0.f);
        std::fill(di + i + 1, di + n, 0.f);
      }
      kernels::GemmArgs b;  // dq = dS·k
      b.m = n, b.n = hd, b.k = n;
      b.a = dp.data(), b.a_rs = n;
      b.b = k, b.b_rs = ks;
      b.c = dq, b.c_rs = qs;
      kernels::sgemm(b, nullptr);
      b.a_rs = 1, b.a_cs = n;  // dk += dSᵀ·q
      b.b = q, b.b_rs = qs;
      b.c = dk, b.c_rs = ks, b.accumulate = true;
      kernels::sgemm(b, nullptr);
      b.a = p.data();  // dv += Pᵀ·dout
      b.b = dout, b.b_rs = gy.strides[0], b.b_cs = gy.strides[3];
      b.c = dv;
      kernels::sgemm(b, nullptr);
    }
  });
  if (inputs_[0]) grads[0] = std::move(gq);
  if (inputs_[1]) grads[1] = std::move(gk);
  if (inputs_[2]) grads[2] = std::move(gv);
}

void RouterWeightsBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  if (!inputs_[0]) return;
  const std::int64_t n = gy.shape[0];
  RawTensor gz = ctx.empty(DType::f32, 2, dims2(n, n_expert_));
  std::vector<float> dp(static_cast<std::size_t>(n_expert_));
  for (std::int64_t t = 0; t < n; ++t) {
    const float* p = probs_.data() + t * n_expert_;
    const float sum = sums_[static_cast<std::size_t>(t)];
    // w_s = p[e_s] / sum: d p[e_s] = g_s / sum - Σ_s' g_s' p[e_s'] / sum² (when sum was not clamped)
    double gw = 0;
    for (std::int64_t s = 0; s < k_; ++s)
      gw += static_cast<double>(gy.data<float>()[t * gy.strides[0] + s * gy.strides[1]]) *
            p[chosen_[static_cast<std::size_t>(t * k_ + s)]];
    const bool clamped = sum <= 6.103515625e-5f;
    std::fill(dp.begin(), dp.end(), 0.f);
    for (std::int64_t s = 0; s < k_; ++s) {
      const float g = gy.data<float>()[t * gy.strides[0] + s * gy.strides[1]];
      dp[static_cast<std::size_t>(chosen_[static_cast<std::size_t>(t * k_ + s)])] +=
          g / sum - (clamped ? 0.f : static_cast<float>(gw / (static_cast<double>(sum) * sum)));
    }
    // softmax: dz = p·(dp - Σ p·dp)
    double dot = 0;
    for (std::int64_t e = 0; e < n_expert_; ++e) dot += static_cast<double>(p[e]) * dp[static_cast<std::size_t>(e)];
    float* out = gz.data<float>() + t * n_expert_;
    for (std::int64_t e = 0; e < n_expert_; ++e) out[e] = p[e] * (dp[static_cast<std::size_t>(e)] - static_cast<float>(dot));
  }
  grads[0] = std::move(gz);
}

void MoeCombineBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  const std::int64_t embd = gy.shape[1];
  for (std::size_t e = 0; e < rows_.size(); ++e) {
    if (!inputs_[e]) continue;
    const auto& rows = rows_[e];
    RawTensor g = ctx.empty(DType::f32, 2, dims2(static_cast<std::int64_t>(rows.size()), embd));
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const float* src = gy.data<float>() + (rows[r] / k_) * gy.strides[0];
      float* dst = g.data<float>() + static_cast<std::int64_t>(r) * embd;
      for (std::int64_t d = 0; d < embd; ++d) dst[d] = src[d * gy.strides[1]];
    }
    grads[e] = std::move(g);
  }
}

}  // namespace fucina::model
