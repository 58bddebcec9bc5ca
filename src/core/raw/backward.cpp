#include "fucina/core/raw/backward.hpp"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/core/raw/strided.hpp"
#include "fucina/kernels/arch.hpp"

#if FUCINA_ARCH_SIMD
#include <xsimd/xsimd.hpp>
#endif

namespace fucina::raw {

namespace {

// Layout with `axis` last for operands that all have the same rank and shape.
template <std::size_t K>
Layout<K> rows_along(const RawTensor& ref, int axis, const std::array<const RawTensor*, K>& ops) {
  Layout<K> l;
  l.rank = ref.rank;
  int j = 0;
  for (int i = 0; i < ref.rank; ++i) {
    if (i == axis) continue;
    l.shape[j] = ref.shape[i];
    for (std::size_t k = 0; k < K; ++k) l.strides[k][j] = ops[k]->strides[i];
    ++j;
  }
  l.shape[j] = ref.shape[axis];
  for (std::size_t k = 0; k < K; ++k) l.strides[k][j] = ops[k]->strides[axis];
  return l;
}

// Row view handed to the per-row gradient formulas: input row p (stride sp), upstream
// gradient row g (stride sg), output row o (stride so), length n.
struct RowRefs {
  const float* p;
  std::int64_t sp;
  const float* g;
  std::int64_t sg;
  float* o;
  std::int64_t so;
  std::int64_t n;
};

// Runs fn(RowRefs) over every row along `axis` of (p, g) -> out.
template <class F>
void rows3(Context& ctx, const RawTensor& p, const RawTensor& g, int axis, RawTensor& out, F&& fn) {
  auto l = rows_along<3>(out, axis, {&out, &p, &g});
  const int r = l.rank - 1;
  const float* ps = p.data<float>();
  const float* gs = g.data<float>();
  float* os = out.data<float>();
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 3>& off, std::int64_t n) {
    fn(RowRefs{ps + off[1], l.strides[1][r], gs + off[2], l.strides[2][r], os + off[0], l.strides[0][r], n});
  });
}

// A reduced operand (axis removed) seen with stride 0 along that axis.
RawTensor expand_axis(const RawTensor& reduced, const RawTensor& full, int axis) {
  RawTensor r = reduced;
  r.rank = full.rank;
  r.shape = full.shape;
  for (int i = 0, j = 0; i < full.rank; ++i) r.strides[i] = i == axis ? 0 : reduced.strides[j++];
  return r;
}

}  // namespace

namespace {

// d f(x) / dx for the unary op (y = f(x) is given for ops whose derivative uses it).
template <UnaryOp Op>
inline float unary_derivative(float xv, float yv, float p0, float p1) {
  if constexpr (Op == UnaryOp::exp) return yv;
  else if constexpr (Op == UnaryOp::log) return 1.f / xv;
  else if constexpr (Op == UnaryOp::tanh) return 1.f - yv * yv;
  else if constexpr (Op == UnaryOp::sigmoid) return yv * (1.f - yv);
  else if constexpr (Op == UnaryOp::silu) {
    const float s = 1.f / (1.f + std::exp(-xv));
    return s * (1.f + xv * (1.f - s));
  } else if constexpr (Op == UnaryOp::gelu) {
    const float cdf = 0.5f * (1.f + std::erf(xv * 0.70710678118654752f));
    return cdf + xv * 0.39894228040143268f * std::exp(-0.5f * xv * xv);
  } else if constexpr (Op == UnaryOp::relu) return xv > 0.f ? 1.f : 0.f;
  else if constexpr (Op == UnaryOp::sqrt) return 0.5f / yv;
  else if constexpr (Op == UnaryOp::rsqrt) return -0.5f * yv * yv * yv;
  else if constexpr (Op == UnaryOp::neg) return -1.f;
  else if constexpr (Op == UnaryOp::abs) return xv > 0.f ? 1.f : (xv < 0.f ? -1.f : 0.f);
  else if constexpr (Op == UnaryOp::square) return 2.f * xv;
  else if constexpr (Op == UnaryOp::pow) return p0 * std::pow(xv, p0 - 1.f);
  else if constexpr (Op == UnaryOp::clamp) return (xv >= p0 && xv <= p1) ? 1.f : 0.f;
  else if constexpr (Op == UnaryOp::add_scalar) return 1.f;
  else if constexpr (Op == UnaryOp::mul_scalar) return p0;
  else return 0.f;  // step
}

// The op is a template argument so each row loop is a plain (vectorisable) loop.
template <UnaryOp Op>
void unary_backward_rows(ThreadPool* pool, const Layout<4>& l, const float* xs, const float* ys, const float* gs,
                         float* out, float p0, float p1) {
  const int r = l.rank - 1;
  const std::int64_t so = l.strides[0][r], sx = l.strides[1][r], sy = l.strides[2][r], sg = l.strides[3][r];
  for_each_row(pool, l, [&](const std::array<std::int64_t, 4>& off, std::int64_t n) {
    const float *x = xs + off[1], *y = ys + off[2], *g = gs + off[3];
    float* o = out + off[0];
    if (so == 1 && sx == 1 && sy == 1 && sg == 1) {
      for (std::int64_t i = 0; i < n; ++i) o[i] = g[i] * unary_derivative<Op>(x[i], y[i], p0, p1);
    } else {
      for (std::int64_t i = 0; i < n; ++i)
        o[i * so] = g[i * sg] * unary_derivative<Op>(x[i * sx], y[i * sy], p0, p1);
    }
  });
}

using UnaryBackwardRows = void (*)(ThreadPool*, const Layout<4>&, const float*, const float*, const float*, float*,
                                   float, float);

template <std::size_t... I>
constexpr std::array<UnaryBackwardRows, sizeof...(I)> unary_backward_table(std::index_sequence<I...>) {
  return {&unary_backward_rows<static_cast<UnaryOp>(I)>...};
}

}  // namespace

void unary_backward(Context& ctx, UnaryOp op, const RawTensor& x, const RawTensor& y, const RawTensor& gy,
                    RawTensor& gx, float p0, float p1) {
  static constexpr auto table =
      unary_backward_table(std::make_index_sequence<static_cast<std::size_t>(UnaryOp::step) + 1>{});
  Layout<4> l;
  l.rank = gx.rank;
  l.shape = gx.shape;
  l.strides = {gx.strides, x.strides, y.strides, gy.strides};
  l = collapse(l);
  table[static_cast<std::size_t>(op)](&ctx.pool(), l, x.data<float>(), y.data<float>(), gy.data<float>(),
                                      gx.data<float>(), p0, p1);
}

void softmax_backward(Context& ctx, const RawTensor& y, const RawTensor& gy, int axis, bool log_space, RawTensor& gx) {
  rows3(ctx, y, gy, axis, gx, [&](const RowRefs& r) {
    float dot = 0.f;
    if (log_space) {
      for (std::int64_t i = 0; i < r.n; ++i) dot += r.g[i * r.sg];
      for (std::int64_t i = 0; i < r.n; ++i) r.o[i * r.so] = r.g[i * r.sg] - std::exp(r.p[i * r.sp]) * dot;
    } else {
      for (std::int64_t i = 0; i < r.n; ++i) dot += r.g[i * r.sg] * r.p[i * r.sp];
      for (std::int64_t i = 0; i < r.n; ++i) r.o[i * r.so] = r.p[i * r.sp] * (r.g[i * r.sg] - dot);
    }
  });
}

void rms_norm_backward(Context& ctx, const RawTensor& x, const RawTensor& gy, int axis, float eps, RawTensor& gx) {
  rows3(ctx, x, gy, axis, gx, [&](const RowRefs& r) {
    double ss = 0.0, gxs = 0.0;
    for (std::int64_t i = 0; i < r.n; ++i) {
      const double xv = r.p[i * r.sp];
      ss += xv * xv;
      gxs += xv * r.g[i * r.sg];
    }
    const double rstd = 1.0 / std::sqrt(static_cast<float>(ss / static_cast<double>(r.n)) + eps);
    const double c = rstd * rstd * rstd * gxs / static_cast<double>(r.n);
    for (std::int64_t i = 0; i < r.n; ++i) r.o[i * r.so] = static_cast<float>(rstd * r.g[i * r.sg] - c * r.p[i * r.sp]);
  });
}

void layer_norm_backward(Context& ctx, const RawTensor& x, const RawTensor& gy, int axis, float eps, RawTensor& gx) {
  rows3(ctx, x, gy, axis, gx, [&](const RowRefs& r) {
    const double dn = static_cast<double>(r.n);
    double mean = 0.0;
    for (std::int64_t i = 0; i < r.n; ++i) mean += r.p[i * r.sp];
    mean /= dn;
    double var = 0.0;
    for (std::int64_t i = 0; i < r.n; ++i) var += (r.p[i * r.sp] - mean) * (r.p[i * r.sp] - mean);
    var /= dn;
    const double rstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
    double gmean = 0.0, gymean = 0.0;
    for (std::int64_t i = 0; i < r.n; ++i) {
      gmean += r.g[i * r.sg];
      gymean += r.g[i * r.sg] * (r.p[i * r.sp] - mean) * rstd;
    }
    gmean /= dn;
    gymean /= dn;
    for (std::int64_t i = 0; i < r.n; ++i) {
      const double yv = (r.p[i * r.sp] - mean) * rstd;
      r.o[i * r.so] = static_cast<float>(rstd * (r.g[i * r.sg] - gmean - yv * gymean));
    }
  });
}

void extremum_backward(Context& ctx, const RawTensor& x, const RawTensor& y, const RawTensor& gy, int axis, RawTensor& gx) {
  const RawTensor ye = expand_axis(y, x, axis), ge = expand_axis(gy, x, axis);
  auto l = rows_along<4>(gx, axis, {&gx, &x, &ye, &ge});
  const int r = l.rank - 1;
  const float* xs = x.data<float>();
  const float* ys = ye.data<float>();
  const float* gs = ge.data<float>();
  float* out = gx.data<float>();
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 4>& off, std::int64_t n) {
    const float target = ys[off[2]], g = gs[off[3]];
    std::int64_t ties = 0;
    for (std::int64_t i = 0; i < n; ++i) ties += xs[off[1] + i * l.strides[1][r]] == target;
    const float share = ties ? g / static_cast<float>(ties) : 0.f;
    for (std::int64_t i = 0; i < n; ++i)
      out[off[0] + i * l.strides[0][r]] = xs[off[1] + i * l.strides[1][r]] == target ? share : 0.f;
  });
}

void scatter_backward(Context& ctx, const RawTensor& indices, const RawTensor& gy, int axis, RawTensor& gx) {
  fill(ctx, gx, 0.f);
  // Rows along axis: indices/gy have length k, gx has length n.
  Layout<3> l;
  l.rank = gx.rank;
  int j = 0;
  for (int i = 0; i < gx.rank; ++i) {
    if (i == axis) continue;
    l.shape[j] = gx.shape[i];
    l.strides[0][j] = gx.strides[i];
    l.strides[1][j] = indices.strides[i];
    l.strides[2][j] = gy.strides[i];
    ++j;
  }
  l.shape[j] = indices.shape[axis];
  l.strides[0][j] = gx.strides[axis];
  l.strides[1][j] = indices.strides[axis];
  l.strides[2][j] = gy.strides[axis];
  const auto* is = indices.data<std::int32_t>();
  const float* gs = gy.data<float>();
  float* out = gx.data<float>();
  const std::int64_t sx = gx.strides[axis];
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 3>& off, std::int64_t k) {
    for (std::int64_t i = 0; i < k; ++i)
      out[off[0] + is[off[1] + i * l.strides[1][j]] * sx] += gs[off[2] + i * l.strides[2][j]];
  });
}

float cross_entropy(Context& ctx, const RawTensor& logits, int class_axis, const RawTensor& targets,
                    std::int32_t ignore_index, RawTensor* grad) {
  FUCINA_CHECK(logits.rank == 2, InvalidShape, "[cross_entropy] logits must have a row and a class axis");
  const int row_axis = 1 - class_axis;
  const std::int64_t rows = logits.shape[row_axis], classes = logits.shape[class_axis];
  FUCINA_CHECK(targets.rank == 1 && targets.shape[0] == rows, ShapeMismatch,
               "[cross_entropy] {} targets for {} rows", targets.rank == 1 ? targets.shape[0] : -1, rows);
  const float* xs = logits.data<float>();
  const auto* ts = targets.data<std::int32_t>();
  const std::int64_t sr = logits.strides[row_axis], sc = logits.strides[class_axis];
  std::vector<double> losses(static_cast<std::size_t>(rows), 0.0);
  std::vector<char> counted(static_cast<std::size_t>(rows), 0);
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int32_t t = ts[i * targets.strides[0]];
    if (t == ignore_index) continue;
    FUCINA_CHECK(t >= 0 && t < classes, IndexOutOfBounds, "[cross_entropy] target {} at row {} is outside 0..{}", t, i,
                 classes - 1);
    counted[static_cast<std::size_t>(i)] = 1;
  }
  std::int64_t count = 0;
  for (char c : counted) count += c;
  const float inv = count ? 1.f / static_cast<float>(count) : 0.f;
  ctx.pool().parallel_range(rows, 8, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const float* row = xs + i * sr;
#if FUCINA_ARCH_SIMD
      // Contiguous classes (a vocabulary): one SIMD pass for the max, one for exp(x - m) kept
      // in the gradient row, one to scale it (xsimd's exp; the scalar twin below uses libm's).
      if (sc == 1 && (!grad || !grad->buf || grad->strides[class_axis] == 1)) {
        using B = xsimd::batch<float>;
        constexpr std::int64_t L = B::size;
        const std::int64_t nv = classes / L * L;
        float m = -std::numeric_limits<float>::infinity();
        B mv(m);
        for (std::int64_t c = 0; c < nv; c += L) mv = xsimd::max(mv, B::load_unaligned(row + c));
        alignas(64) float lanes[L];
        mv.store_aligned(lanes);
        for (float v : lanes) m = std::max(m, v);
        for (std::int64_t c = nv; c < classes; ++c) m = std::max(m, row[c]);
        float* g = grad && grad->buf ? grad->data<float>() + i * grad->strides[row_axis] : nullptr;
        B sv(0.f);
        float s = 0.f;
        for (std::int64_t c = 0; c < nv; c += L) {
          const B ev = xsimd::exp(B::load_unaligned(row + c) - B(m));
          if (g) ev.store_unaligned(g + c);
          sv += ev;
        }
        for (std::int64_t c = nv; c < classes; ++c) {
          const float ev = std::exp(row[c] - m);
          if (g) g[c] = ev;
          s += ev;
        }
        s += xsimd::hadd(sv);
        const bool on = counted[static_cast<std::size_t>(i)];
        const std::int32_t t = ts[i * targets.strides[0]];
        if (on) losses[static_cast<std::size_t>(i)] = static_cast<double>(m + std::log(s) - row[t]);
        if (g) {
          const float k = on ? inv / s : 0.f;
          for (std::int64_t c = 0; c < nv; c += L) (B::load_unaligned(g + c) * B(k)).store_unaligned(g + c);
          for (std::int64_t c = nv; c < classes; ++c) g[c] *= k;
          if (on) g[t] -= inv;
        }
        continue;
      }
#endif
      float m = -std::numeric_limits<float>::infinity();
      for (std::int64_t c = 0; c < classes; ++c) m = std::max(m, row[c * sc]);
      float s = 0.f;
      for (std::int64_t c = 0; c < classes; ++c) s += std::exp(row[c * sc] - m);
      const float lse = m + std::log(s);
      const bool on = counted[static_cast<std::size_t>(i)];
      const std::int32_t t = ts[i * targets.strides[0]];
      if (on) losses[static_cast<std::size_t>(i)] = static_cast<double>(lse - row[t * sc]);
      if (grad && grad->buf) {
        float* g = grad->data<float>() + i * grad->strides[row_axis];
        const std::int64_t gc = grad->strides[class_axis];
        for (std::int64_t c = 0; c < classes; ++c)
          g[c * gc] = on ? (std::exp(row[c * sc] - lse) - (c == t ? 1.f : 0.f)) * inv : 0.f;
      }
    }
  });
  double total = 0.0;
  for (double v : losses) total += v;
  return count ? static_cast<float>(total / static_cast<double>(count)) : 0.f;
}

RawTensor reduce_to(Context& ctx, const RawTensor& g, int op_rank, const std::array<int, kMaxRank>& map) {
  std::array<bool, kMaxRank> kept{};
  for (int i = 0; i < op_rank; ++i) kept[static_cast<std::size_t>(map[i])] = true;
  RawTensor cur = g;
  for (int ax = g.rank - 1; ax >= 0; --ax) {
    if (kept[static_cast<std::size_t>(ax)]) continue;
    Dims shape{};
    for (int i = 0, j = 0; i < cur.rank; ++i)
      if (i != ax) shape[j++] = cur.shape[i];
    RawTensor out = ctx.empty(DType::f32, cur.rank - 1, shape);
    reduce(ctx, ReduceOp::sum, cur, ax, out);
    cur = std::move(out);
  }
  RawTensor r = cur;
  r.rank = op_rank;
  for (int i = 0; i < op_rank; ++i) {
    int pos = 0;
    for (int a = 0; a < map[i]; ++a) pos += kept[static_cast<std::size_t>(a)] ? 1 : 0;
    r.shape[i] = cur.shape[pos];
    r.strides[i] = cur.strides[pos];
  }
  return r;
}

}  // namespace fucina::raw
