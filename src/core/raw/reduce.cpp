#include "fucina/core/raw/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/core/raw/strided.hpp"

namespace fucina::raw {

namespace {

// Puts `axis` last. For an output without the axis (reduced), its stride there is 0.
template <std::size_t K>
Layout<K> axis_last_layout(const RawTensor& x, int axis, const std::array<const RawTensor*, K>& ops,
                           const std::array<bool, K>& reduced) {
  Layout<K> l;
  l.rank = x.rank;
  int j = 0;
  for (int i = 0; i < x.rank; ++i) {
    if (i == axis) continue;
    l.shape[j] = x.shape[i];
    for (std::size_t k = 0; k < K; ++k) {
      const int src = reduced[k] ? (i < axis ? i : i - 1) : i;
      l.strides[k][j] = ops[k]->strides[src];
    }
    ++j;
  }
  l.shape[j] = x.shape[axis];
  for (std::size_t k = 0; k < K; ++k) l.strides[k][j] = reduced[k] ? 0 : ops[k]->strides[axis];
  if (l.rank == 0) {  // scalar input: one row of length 1
    l.rank = 1;
    l.shape[0] = 1;
  }
  return l;
}

void check_axis(const RawTensor& x, int axis, std::string_view op) {
  FUCINA_CHECK(axis >= 0 && axis < x.rank, InvalidArgument, "[{}] axis {} out of range for rank {}", op, axis, x.rank);
  FUCINA_CHECK(x.dtype == DType::f32, InvalidArgument, "[{}] expects f32, got {}", op, dtype_name(x.dtype));
}

float row_max(const float* p, std::int64_t n, std::int64_t s) {
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, p[i * s]);
  return m;
}

// Sequential float sum in 8 interleaved partials (vectorisable, order fixed by n only).
float row_sum(const float* p, std::int64_t n, std::int64_t s) {
  float acc[8] = {};
  std::int64_t i = 0;
  if (s == 1) {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  }
  for (; i < n; ++i) acc[i & 7] += p[i * s];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

void reduce(Context& ctx, ReduceOp op, const RawTensor& x, int axis, RawTensor& out) {
  check_axis(x, axis, "reduce");
  auto l = axis_last_layout<2>(x, axis, {&out, &x}, {true, false});
  const float* xs = x.data<float>();
  float* ys = out.data<float>();
  const std::int64_t s = l.strides[1][l.rank - 1];
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 2>& off, std::int64_t n) {
    const float* p = xs + off[1];
    float r = 0.f;
    switch (op) {
      case ReduceOp::sum: r = row_sum(p, n, s); break;
      case ReduceOp::mean: r = row_sum(p, n, s) / static_cast<float>(n); break;
      case ReduceOp::max: r = row_max(p, n, s); break;
      case ReduceOp::min: {
        r = std::numeric_limits<float>::infinity();
        for (std::int64_t i = 0; i < n; ++i) r = std::min(r, p[i * s]);
        break;
      }
      case ReduceOp::logsumexp: {
        const float m = row_max(p, n, s);
        if (std::isinf(m)) {
          r = m;
          break;
        }
        float acc = 0.f;
        for (std::int64_t i = 0; i < n; ++i) acc += std::exp(p[i * s] - m);
        r = m + std::log(acc);
        break;
      }
    }
    ys[off[0]] = r;
  });
}

void argmax(Context& ctx, const RawTensor& x, int axis, RawTensor& out) {
  check_axis(x, axis, "argmax");
  auto l = axis_last_layout<2>(x, axis, {&out, &x}, {true, false});
  const float* xs = x.data<float>();
  auto* ys = out.data<std::int32_t>();
  const std::int64_t s = l.strides[1][l.rank - 1];
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 2>& off, std::int64_t n) {
    const float* p = xs + off[1];
    std::int64_t best = 0;
    for (std::int64_t i = 1; i < n; ++i)
      if (p[i * s] > p[best * s]) best = i;
    ys[off[0]] = static_cast<std::int32_t>(best);
  });
}

void topk(Context& ctx, const RawTensor& x, int axis, std::int64_t k, RawTensor& values, RawTensor& indices) {
  check_axis(x, axis, "topk");
  FUCINA_CHECK(k >= 1 && k <= x.shape[axis], InvalidArgument, "[topk] k={} must be in 1..{}", k, x.shape[axis]);
  // Rows of the output are length k, rows of the input length n: iterate the input.
  auto l = axis_last_layout<3>(x, axis, {&x, &values, &indices}, {false, false, false});
  const float* xs = x.data<float>();
  float* vs = values.data<float>();
  auto* is = indices.data<std::int32_t>();
  const std::int64_t sx = l.strides[0][l.rank - 1], sv = l.strides[1][l.rank - 1], si = l.strides[2][l.rank - 1];
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 3>& off, std::int64_t n) {
    std::vector<std::int32_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const float* p = xs + off[0];
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int32_t a, std::int32_t b) {
      const float va = p[a * sx], vb = p[b * sx];
      return va > vb || (va == vb && a < b);
    });
    for (std::int64_t j = 0; j < k; ++j) {
      vs[off[1] + j * sv] = p[order[static_cast<std::size_t>(j)] * sx];
      is[off[2] + j * si] = order[static_cast<std::size_t>(j)];
    }
  });
}

void softmax(Context& ctx, const RawTensor& x, int axis, RawTensor& out, bool log_space) {
  check_axis(x, axis, "softmax");
  auto l = axis_last_layout<2>(x, axis, {&out, &x}, {false, false});
  const float* xs = x.data<float>();
  float* ys = out.data<float>();
  const std::int64_t so = l.strides[0][l.rank - 1], sx = l.strides[1][l.rank - 1];
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 2>& off, std::int64_t n) {
    const float* p = xs + off[1];
    float* y = ys + off[0];
    const float m = row_max(p, n, sx);
    if (std::isinf(m) && m < 0) {  // fully masked row: define as uniform zeros / -inf
      for (std::int64_t i = 0; i < n; ++i) y[i * so] = log_space ? -std::numeric_limits<float>::infinity() : 0.f;
      return;
    }
    float sum = 0.f;
    if (log_space) {
      for (std::int64_t i = 0; i < n; ++i) sum += std::exp(p[i * sx] - m);
      const float lse = m + std::log(sum);
      for (std::int64_t i = 0; i < n; ++i) y[i * so] = p[i * sx] - lse;
    } else {
      for (std::int64_t i = 0; i < n; ++i) {
        const float e = std::exp(p[i * sx] - m);
        y[i * so] = e;
        sum += e;
      }
      const float inv = 1.f / sum;
      for (std::int64_t i = 0; i < n; ++i) y[i * so] *= inv;
    }
  });
}

namespace {

// 1 / sqrt(mean + eps) from a row's sum of squares, as ggml rounds it.
float rms_scale(double ss, std::int64_t n, float eps) {
  const float mean = static_cast<float>(ss / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

// Note [Interleaved RMS sums]: ggml sums a row's f32 squares in double, one element after
// the other, and so do we (bit parity). That chain is latency-bound: one double add per
// add latency. Rows are independent, so G contiguous rows of n advance their chains
// together, each in its own order: the same sums, G at a time. y = x·scale (·w when w).
template <int G>
void rms_norm_rows(const float* x, std::int64_t n, const float* w, float eps, float* y) {
  double ss[G] = {};
  for (std::int64_t i = 0; i < n; ++i)
    for (int r = 0; r < G; ++r) {
      const float v = x[r * n + i];
      ss[r] += static_cast<double>(v * v);
    }
  for (int r = 0; r < G; ++r) {
    const float scale = rms_scale(ss[r], n, eps);
    const float* p = x + r * n;
    float* o = y + r * n;
    if (w == nullptr) {
      for (std::int64_t i = 0; i < n; ++i) o[i] = p[i] * scale;
    } else {
      for (std::int64_t i = 0; i < n; ++i) o[i] = (p[i] * scale) * w[i];  // rms_norm, then mul: two roundings
    }
  }
}

// rows x n contiguous rows of x into y, by Note [Interleaved RMS sums]: groups of 8 rows
// spread over the pool when there is enough work, the remainder 4, 2, 1 at a time.
void rms_norm_contiguous(ThreadPool& pool, const float* x, std::int64_t rows, std::int64_t n, const float* w, float eps,
                         float* y) {
  constexpr int kGroup = 8;
  // Below this a pool dispatch costs more than it saves. Splitting smaller ops too (with the
  // adds, SwiGLU and f16 roundings, from 4096 elements: a verifying forward's 8-17 rows of the
  // default model) made bench_verify's 16-row forward 4-5% slower on 2 threads (i23l).
  constexpr std::int64_t kParallelElems = 1 << 13;
  const std::int64_t groups = rows / kGroup;
  const auto group = [&](std::int64_t g) { rms_norm_rows<kGroup>(x + g * kGroup * n, n, w, eps, y + g * kGroup * n); };
  if (groups >= 2 && rows * n >= kParallelElems) {
    pool.parallel_range(groups, 1, [&](std::int64_t g0, std::int64_t g1) {
      for (std::int64_t g = g0; g < g1; ++g) group(g);
    });
  } else {
    for (std::int64_t g = 0; g < groups; ++g) group(g);
  }
  std::int64_t r = groups * kGroup;
  for (; r + 4 <= rows; r += 4) rms_norm_rows<4>(x + r * n, n, w, eps, y + r * n);
  for (; r + 2 <= rows; r += 2) rms_norm_rows<2>(x + r * n, n, w, eps, y + r * n);
  for (; r < rows; ++r) rms_norm_rows<1>(x + r * n, n, w, eps, y + r * n);
}

}  // namespace

void rms_norm(Context& ctx, const RawTensor& x, int axis, float eps, RawTensor& out) {
  rms_norm_mul(ctx, x, axis, nullptr, eps, out);
}

void rms_norm_mul(Context& ctx, const RawTensor& x, int axis, const float* w, float eps, RawTensor& out) {
  check_axis(x, axis, "rms_norm");
  const std::int64_t n = x.shape[axis];
  if (axis == x.rank - 1 && x.is_contiguous() && out.is_contiguous() && n > 0)
    return rms_norm_contiguous(ctx.pool(), x.data<float>(), x.numel() / n, n, w, eps, out.data<float>());
  auto l = axis_last_layout<2>(x, axis, {&out, &x}, {false, false});
  const float* xs = x.data<float>();
  float* ys = out.data<float>();
  const std::int64_t so = l.strides[0][l.rank - 1], sx = l.strides[1][l.rank - 1];
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 2>& off, std::int64_t len) {
    const float* p = xs + off[1];
    float* y = ys + off[0];
    double ss = 0.0;  // as ggml: f32 squares accumulated in double
    for (std::int64_t i = 0; i < len; ++i) ss += static_cast<double>(p[i * sx] * p[i * sx]);
    const float scale = rms_scale(ss, len, eps);
    if (w == nullptr) {
      for (std::int64_t i = 0; i < len; ++i) y[i * so] = p[i * sx] * scale;
    } else {
      for (std::int64_t i = 0; i < len; ++i) y[i * so] = (p[i * sx] * scale) * w[i];
    }
  });
}

void layer_norm(Context& ctx, const RawTensor& x, int axis, float eps, RawTensor& out) {
  check_axis(x, axis, "layer_norm");
  auto l = axis_last_layout<2>(x, axis, {&out, &x}, {false, false});
  const float* xs = x.data<float>();
  float* ys = out.data<float>();
  const std::int64_t so = l.strides[0][l.rank - 1], sx = l.strides[1][l.rank - 1];
  for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 2>& off, std::int64_t n) {
    const float* p = xs + off[1];
    float* y = ys + off[0];
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) sum += p[i * sx];
    const double mean = sum / static_cast<double>(n);
    double var = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = p[i * sx] - mean;
      var += d * d;
    }
    var /= static_cast<double>(n);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    const float fmean = static_cast<float>(mean);
    for (std::int64_t i = 0; i < n; ++i) y[i * so] = (p[i * sx] - fmean) * inv;
  });
}

namespace {
// Pair (a, b) rotated by (c, s) in the form of Note [Rope arithmetic] (reduce.hpp).
// Reads both inputs before writing, so y0/y1 may alias a/b's storage.
inline void rotate_pair(float a, float b, float c, float s, float& y0, float& y1) {
  y0 = std::fma(a, c, -(b * s));
  y1 = std::fma(a, s, b * c);
}

// One head's pairs, contiguous in and out (src may be dst): plain runs, so it vectorizes.
void rotate_run(const float* src, float* dst, const float* cos_, const float* sin_, std::int64_t h, bool neox) {
  if (neox) {
    for (std::int64_t i = 0; i < h; ++i) rotate_pair(src[i], src[i + h], cos_[i], sin_[i], dst[i], dst[i + h]);
    return;
  }
  for (std::int64_t i = 0; i < h; ++i)
    rotate_pair(src[2 * i], src[2 * i + 1], cos_[i], sin_[i], dst[2 * i], dst[2 * i + 1]);
}
}  // namespace

void rope(Context& ctx, const RawTensor& x, int pos_axis, int dim_axis, std::span<const std::int32_t> positions,
          float base, bool neox, RawTensor& out) {
  check_axis(x, pos_axis, "rope");
  check_axis(x, dim_axis, "rope");
  FUCINA_CHECK(pos_axis != dim_axis, InvalidArgument, "[rope] position and rotated axes must differ");
  const std::int64_t d = x.shape[dim_axis];
  FUCINA_CHECK(d % 2 == 0, InvalidShape, "[rope] rotated axis has odd size {}", d);
  FUCINA_CHECK(static_cast<std::int64_t>(positions.size()) == x.shape[pos_axis], ShapeMismatch,
               "[rope] {} positions for a position axis of size {}", positions.size(), x.shape[pos_axis]);
  // Other axes (neither pos nor dim) form the rows under each position.
  Layout<2> l;
  for (int i = 0; i < x.rank; ++i) {
    if (i == pos_axis || i == dim_axis) continue;
    l.shape[l.rank] = x.shape[i];
    l.strides[0][l.rank] = out.strides[i];
    l.strides[1][l.rank] = x.strides[i];
    ++l.rank;
  }
  l.shape[l.rank] = 1;  // dummy row axis; the row body handles the rotated axis itself
  l.strides[0][l.rank] = 0;
  l.strides[1][l.rank] = 0;
  ++l.rank;
  const float* xs = x.data<float>();
  float* ys = out.data<float>();
  const std::int64_t sxd = x.strides[dim_axis], syd = out.strides[dim_axis];
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(d));
  const std::int64_t h = d / 2;
  ctx.pool().parallel_for(x.shape[pos_axis], [&](std::int64_t p) {
    thread_local std::vector<float> cs;  // cos of pairs 0..h-1, then their sin
    cs.resize(static_cast<std::size_t>(d));
    float* const cos_ = cs.data();
    float* const sin_ = cs.data() + h;
    float theta = static_cast<float>(positions[static_cast<std::size_t>(p)]);
    for (std::int64_t i = 0; i < h; ++i) {
      cos_[i] = std::cos(theta);
      sin_[i] = std::sin(theta);
      theta *= theta_scale;
    }
    const std::int64_t bx = p * x.strides[pos_axis], by = p * out.strides[pos_axis];
    for_each_row(nullptr, l, [&](const std::array<std::int64_t, 2>& off, std::int64_t) {
      const float* src = xs + bx + off[1];
      float* dst = ys + by + off[0];
      if (sxd == 1 && syd == 1) return rotate_run(src, dst, cos_, sin_, h, neox);  // vectorizes
      for (std::int64_t i = 0; i < h; ++i) {
        const std::int64_t i0 = neox ? i : 2 * i;
        const std::int64_t i1 = neox ? i + h : 2 * i + 1;
        rotate_pair(src[i0 * sxd], src[i1 * sxd], cos_[i], sin_[i], dst[i0 * syd], dst[i1 * syd]);
      }
    });
  });
}

}  // namespace fucina::raw
