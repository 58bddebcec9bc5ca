// Gradient formulas of the core ops (see include/fucina/autograd/backward/nodes.hpp).
#include <cmath>

#include "fucina/autograd/backward/nodes.hpp"
#include "fucina/core/error.hpp"
#include "fucina/core/raw/backward.hpp"
#include "fucina/core/raw/strided.hpp"

namespace fucina::autograd {

namespace {

// out[i] = f(p[i], q[i], r[i]) over `ref`'s shape (operands aligned to it).
template <class F>
RawTensor zip3(Context& ctx, const RawTensor& ref, const RawTensor& p, const RawTensor& q, const RawTensor& r, F f) {
  RawTensor out = ctx.empty(DType::f32, ref.rank, ref.shape);
  raw::Layout<4> l;
  l.rank = ref.rank;
  l.shape = ref.shape;
  l.strides = {out.strides, p.strides, q.strides, r.strides};
  l = raw::collapse(l);
  const int k = l.rank - 1;
  const float *pp = p.data<float>(), *qq = q.data<float>(), *rr = r.data<float>();
  float* o = out.data<float>();
  raw::for_each_row(&ctx.pool(), l, [&](const std::array<std::int64_t, 4>& off, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
      o[off[0] + i * l.strides[0][k]] =
          f(pp[off[1] + i * l.strides[1][k]], qq[off[2] + i * l.strides[2][k]], rr[off[3] + i * l.strides[3][k]]);
  });
  return out;
}

// A reduced tensor (axis removed) viewed with stride 0 along that axis.
RawTensor expand_axis(const RawTensor& reduced, int rank, const Dims& shape, int axis) {
  RawTensor r = reduced;
  r.rank = rank;
  r.shape = shape;
  for (int i = 0, j = 0; i < rank; ++i) r.strides[i] = i == axis ? 0 : reduced.strides[j++];
  return r;
}

RawTensor zeros(Context& ctx, int rank, const Dims& shape) {
  RawTensor t = ctx.empty(DType::f32, rank, shape);
  raw::fill(ctx, t, 0.f);
  return t;
}

}  // namespace

void BinaryBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  using raw::BinaryOp;
  const bool need_a = static_cast<bool>(inputs_[0]), need_b = static_cast<bool>(inputs_[1]);
  RawTensor ga, gb;
  switch (op_) {
    case BinaryOp::add:
      ga = gy, gb = gy;
      break;
    case BinaryOp::sub:
      ga = gy;
      if (need_b) gb = zip3(ctx, gy, gy, gy, gy, [](float g, float, float) { return -g; });
      break;
    case BinaryOp::mul:
      if (need_a) ga = zip3(ctx, gy, gy, b_, b_, [](float g, float b, float) { return g * b; });
      if (need_b) gb = zip3(ctx, gy, gy, a_, a_, [](float g, float a, float) { return g * a; });
      break;
    case BinaryOp::div:
      if (need_a) ga = zip3(ctx, gy, gy, b_, b_, [](float g, float b, float) { return g / b; });
      if (need_b) gb = zip3(ctx, gy, gy, out_, b_, [](float g, float y, float b) { return -g * y / b; });
      break;
    case BinaryOp::maximum:
      if (need_a) ga = zip3(ctx, gy, gy, a_, b_, [](float g, float a, float b) { return a >= b ? g : 0.f; });
      if (need_b) gb = zip3(ctx, gy, gy, a_, b_, [](float g, float a, float b) { return a >= b ? 0.f : g; });
      break;
    case BinaryOp::minimum:
      if (need_a) ga = zip3(ctx, gy, gy, a_, b_, [](float g, float a, float b) { return a <= b ? g : 0.f; });
      if (need_b) gb = zip3(ctx, gy, gy, a_, b_, [](float g, float a, float b) { return a <= b ? 0.f : g; });
      break;
    case BinaryOp::pow:
      if (need_a)
        ga = zip3(ctx, gy, gy, a_, b_, [](float g, float a, float b) { return g * b * std::pow(a, b - 1.f); });
      if (need_b) gb = zip3(ctx, gy, gy, out_, a_, [](float g, float y, float a) { return g * y * std::log(a); });
      break;
  }
  if (need_a) grads[0] = raw::reduce_to(ctx, ga, ra_, ma_);
  if (need_b) grads[1] = raw::reduce_to(ctx, gb, rb_, mb_);
}

void UnaryBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  RawTensor gx = ctx.empty(DType::f32, x_.rank, x_.shape);
  raw::unary_backward(ctx, op_, x_, y_, gy, gx, p0_, p1_);
  grads[0] = std::move(gx);
}

void WhereBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  if (inputs_[0]) {
    RawTensor g = zip3(ctx, gy, gy, cond_, cond_, [](float g, float c, float) { return c != 0.f ? g : 0.f; });
    grads[0] = raw::reduce_to(ctx, g, ra_, ma_);
  }
  if (inputs_[1]) {
    RawTensor g = zip3(ctx, gy, gy, cond_, cond_, [](float g, float c, float) { return c != 0.f ? 0.f : g; });
    grads[1] = raw::reduce_to(ctx, g, rb_, mb_);
  }
}

void ReduceBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  using raw::ReduceOp;
  const float n = static_cast<float>(x_.shape[axis_]);
  switch (op_) {
    case ReduceOp::sum:
      grads[0] = expand_axis(gy, x_.rank, x_.shape, axis_);
      break;
    case ReduceOp::mean: {
      RawTensor scaled = ctx.empty(DType::f32, gy.rank, gy.shape);
      raw::unary(ctx, raw::UnaryOp::mul_scalar, gy, scaled, 1.f / n);
      grads[0] = expand_axis(scaled, x_.rank, x_.shape, axis_);
      break;
    }
    case ReduceOp::max:
    case ReduceOp::min: {
      RawTensor gx = ctx.empty(DType::f32, x_.rank, x_.shape);
      raw::extremum_backward(ctx, x_, y_, gy, axis_, gx);
      grads[0] = std::move(gx);
      break;
    }
    case ReduceOp::logsumexp:
      grads[0] = zip3(ctx, x_, x_, expand_axis(y_, x_.rank, x_.shape, axis_), expand_axis(gy, x_.rank, x_.shape, axis_),
                      [](float x, float y, float g) { return g * std::exp(x - y); });
      break;
  }
}

void TopkBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  RawTensor gx = ctx.empty(DType::f32, rank_, shape_);
  raw::scatter_backward(ctx, idx_, gy, axis_, gx);
  grads[0] = std::move(gx);
}

void RowBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  RawTensor gx = ctx.empty(DType::f32, saved_.rank, saved_.shape);
  switch (op_) {
    case RowOp::softmax: raw::softmax_backward(ctx, saved_, gy, axis_, false, gx); break;
    case RowOp::log_softmax: raw::softmax_backward(ctx, saved_, gy, axis_, true, gx); break;
    case RowOp::rms_norm: raw::rms_norm_backward(ctx, saved_, gy, axis_, eps_, gx); break;
    case RowOp::layer_norm: raw::layer_norm_backward(ctx, saved_, gy, axis_, eps_, gx); break;
  }
  grads[0] = std::move(gx);
}

void RopeBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  // The inverse rotation: the same angles negated.
  std::vector<std::int32_t> neg(positions_.size());
  for (std::size_t i = 0; i < neg.size(); ++i) neg[i] = -positions_[i];
  RawTensor gx = ctx.empty(DType::f32, gy.rank, gy.shape);
  raw::rope(ctx, gy, pos_axis_, dim_axis_, neg, base_, neox_, gx);
  grads[0] = std::move(gx);
}

namespace {
using Group = raw::ContractSpec::Group;
using Side = std::array<int, kMaxRank> Group::*;

// to = from's axes, with to's a/b/c sides read from the given sides of `from` (null: unused).
void take(Group& to, const Group& from, Side a, Side b, Side c) {
  to.count = from.count;
  for (int i = 0; i < from.count; ++i) {
    if (a) to.a[i] = (from.*a)[i];
    if (b) to.b[i] = (from.*b)[i];
    if (c) to.c[i] = (from.*c)[i];
  }
}
}  // namespace

void ContractBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  const auto& s = spec_;
  if (inputs_[0]) {  // ga[batch, m, k] = sum_n gy[batch, m, n] * b[batch, k, n]
    raw::ContractSpec g;
    take(g.batch, s.batch, &Group::c, &Group::b, &Group::a);
    take(g.m, s.m, &Group::c, nullptr, &Group::a);
    take(g.n, s.k, nullptr, &Group::b, &Group::a);
    take(g.k, s.n, &Group::c, &Group::b, nullptr);
    RawTensor ga = ctx.empty(DType::f32, a_.rank, a_.shape);
    raw::contract(ctx, gy, b_, ga, g);
    grads[0] = std::move(ga);
  }
  if (inputs_[1]) {  // gb[batch, k, n] = sum_m a[batch, m, k] * gy[batch, m, n]
    raw::ContractSpec g;
    take(g.batch, s.batch, &Group::a, &Group::c, &Group::b);
    take(g.m, s.k, &Group::a, nullptr, &Group::b);
    take(g.n, s.n, nullptr, &Group::c, &Group::b);
    take(g.k, s.m, &Group::a, &Group::c, nullptr);
    RawTensor gb = ctx.empty(DType::f32, b_.rank, b_.shape);
    raw::contract(ctx, a_, gy, gb, g);
    grads[1] = std::move(gb);
  }
}

void ViewBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  switch (kind) {
    case ViewKind::reinterpret: {
      RawTensor g = gy;
      if (!g.is_contiguous()) {
        g = ctx.empty(DType::f32, gy.rank, gy.shape);
        raw::copy(ctx, gy, g);
      }
      g.rank = rank;
      g.shape = shape;
      g.strides = contiguous_strides(shape, rank);
      grads[0] = std::move(g);
      break;
    }
    case ViewKind::permute: {
      RawTensor g = gy;
      g.rank = rank;
      for (int i = 0; i < rank; ++i) g.shape[i] = gy.shape[map[i]], g.strides[i] = gy.strides[map[i]];
      grads[0] = std::move(g);
      break;
    }
    case ViewKind::slice: {
      RawTensor g = zeros(ctx, rank, shape);
      RawTensor dst = g;
      dst.offset += start * g.strides[axis];
      if (drop_axis) {  // select: the output lacks the axis
        dst.rank = rank - 1;
        for (int i = axis; i < dst.rank; ++i) dst.shape[i] = g.shape[i + 1], dst.strides[i] = g.strides[i + 1];
      } else {
        dst.shape[axis] = gy.shape[axis];
      }
      raw::copy(ctx, gy, dst);
      grads[0] = std::move(g);
      break;
    }
    case ViewKind::broadcast: {
      RawTensor g = ctx.empty(DType::f32, rank, shape);
      raw::reduce(ctx, raw::ReduceOp::sum, gy, axis, g);
      grads[0] = std::move(g);
      break;
    }
  }
}

void ConcatBackward::backward(Context&, const RawTensor& gy, std::span<RawTensor> grads) {
  std::int64_t at = 0;
  for (std::size_t i = 0; i < sizes_.size(); ++i) {
    if (inputs_[i]) {
      RawTensor g = gy;
      g.offset += at * gy.strides[axis_];
      if (stacked_) {
        g.rank = gy.rank - 1;
        for (int j = axis_; j < g.rank; ++j) g.shape[j] = gy.shape[j + 1], g.strides[j] = gy.strides[j + 1];
      } else {
        g.shape[axis_] = sizes_[i];
      }
      grads[i] = std::move(g);
    }
    at += sizes_[i];
  }
}

void GatherBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  RawTensor gx = zeros(ctx, rank_, shape_);
  RawTensor g = gy;
  if (!g.is_contiguous()) {
    g = ctx.empty(DType::f32, gy.rank, gy.shape);
    raw::copy(ctx, gy, g);
  }
  RawTensor dst = gx;  // one table row (axis removed)
  dst.rank = rank_ - 1;
  for (int i = axis_; i < dst.rank; ++i) dst.shape[i] = gx.shape[i + 1], dst.strides[i] = gx.strides[i + 1];
  const std::int64_t row = dst.numel();
  RawTensor src = g;
  src.rank = dst.rank;
  src.shape = dst.shape;
  src.strides = contiguous_strides(dst.shape, dst.rank);
  for (std::size_t n = 0; n < ids_.size(); ++n) {  // serial: repeated ids accumulate in order
    RawTensor d = dst;
    d.offset = gx.offset + ids_[n] * gx.strides[axis_];
    RawTensor s = src;
    s.offset = g.offset + static_cast<std::int64_t>(n) * row;
    raw::binary(ctx, raw::BinaryOp::add, d, s, d);
  }
  grads[0] = std::move(gx);
}

void SavedGradBackward::backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) {
  const RawTensor* saved[2] = {&g_, &g2_};
  for (std::size_t i = 0; i < grads.size() && i < 2; ++i) {
    if (!inputs_[i]) continue;
    if (gy.data<float>()[0] == 1.f) {  // backward() from the loss itself: the saved gradient as it is
      grads[i] = *saved[i];
      continue;
    }
    RawTensor scale = gy;  // the loss is a scalar: broadcast it
    scale.rank = saved[i]->rank;
    scale.shape = saved[i]->shape;
    scale.strides = Dims{};
    RawTensor g = ctx.empty(DType::f32, saved[i]->rank, saved[i]->shape);
    raw::binary(ctx, raw::BinaryOp::mul, *saved[i], scale, g);
    grads[i] = std::move(g);
  }
}

}  // namespace fucina::autograd
