#include "fucina/core/raw/contract.hpp"

#include <optional>

#include "fucina/core/error.hpp"
#include "fucina/core/raw/elementwise.hpp"
#include "fucina/kernels/gemm/sgemm.hpp"

namespace fucina::raw {

namespace {

struct Merged {
  std::int64_t size = 1;
  std::int64_t stride = 0;
};

// Merges the listed axes (in list order) into one (size, stride), if the layout allows.
std::optional<Merged> merge_axes(const RawTensor& t, const int* axes, int count) {
  Merged m;
  bool first = true;
  for (int i = 0; i < count; ++i) {
    const std::int64_t n = t.shape[axes[i]], s = t.strides[axes[i]];
    if (n == 1) continue;
    if (first) {
      m = {n, s};
      first = false;
      continue;
    }
    if (m.stride != s * n) return std::nullopt;
    m.size *= n;
    m.stride = s;
  }
  return m;
}

// Copy of t with its axes reordered to `order` (a permutation), contiguous.
RawTensor permuted_copy(Context& ctx, const RawTensor& t, const std::array<int, kMaxRank>& order, int rank) {
  RawTensor view = t;
  for (int i = 0; i < rank; ++i) {
    view.shape[i] = t.shape[order[i]];
    view.strides[i] = t.strides[order[i]];
  }
  RawTensor out = ctx.empty(t.dtype, rank, view.shape);
  copy(ctx, view, out);
  return out;
}

// Appends the axes of groups g1, g2, g3 (their side `pick`) into a permutation.
template <class Pick>
int gather_order(std::array<int, kMaxRank>& order, std::initializer_list<const ContractSpec::Group*> groups, Pick pick) {
  int r = 0;
  for (const auto* g : groups)
    for (int i = 0; i < g->count; ++i) order[r++] = pick(*g, i);
  return r;
}

}  // namespace

void contract(Context& ctx, const RawTensor& a_in, const RawTensor& b_in, RawTensor& c, const ContractSpec& spec,
              bool accumulate) {
  FUCINA_CHECK(a_in.dtype == DType::f32 && b_in.dtype == DType::f32 && c.dtype == DType::f32, InvalidArgument,
               "[contract] expects f32 operands");
  RawTensor a = a_in, b = b_in;
  ContractSpec sp = spec;
  auto ga = [](const ContractSpec::Group& g, int i) { return g.a[i]; };
  auto gb = [](const ContractSpec::Group& g, int i) { return g.b[i]; };
  auto gc = [](const ContractSpec::Group& g, int i) { return g.c[i]; };

  auto ab = merge_axes(a, sp.batch.a.data(), sp.batch.count);
  auto am = merge_axes(a, sp.m.a.data(), sp.m.count);
  auto ak = merge_axes(a, sp.k.a.data(), sp.k.count);
  if (!ab || !am || !ak) {  // copy A into [batch, m, k] order
    std::array<int, kMaxRank> order{};
    const int r = gather_order(order, {&sp.batch, &sp.m, &sp.k}, ga);
    a = permuted_copy(ctx, a, order, r);
    int pos = 0;
    for (auto* g : {&sp.batch, &sp.m, &sp.k})
      for (int i = 0; i < g->count; ++i) g->a[i] = pos++;
    ab = merge_axes(a, sp.batch.a.data(), sp.batch.count);
    am = merge_axes(a, sp.m.a.data(), sp.m.count);
    ak = merge_axes(a, sp.k.a.data(), sp.k.count);
  }
  auto bb = merge_axes(b, sp.batch.b.data(), sp.batch.count);
  auto bk = merge_axes(b, sp.k.b.data(), sp.k.count);
  auto bn = merge_axes(b, sp.n.b.data(), sp.n.count);
  if (!bb || !bk || !bn) {  // copy B into [batch, k, n] order
    std::array<int, kMaxRank> order{};
    const int r = gather_order(order, {&sp.batch, &sp.k, &sp.n}, gb);
    b = permuted_copy(ctx, b, order, r);
    int pos = 0;
    for (auto* g : {&sp.batch, &sp.k, &sp.n})
      for (int i = 0; i < g->count; ++i) g->b[i] = pos++;
    bb = merge_axes(b, sp.batch.b.data(), sp.batch.count);
    bk = merge_axes(b, sp.k.b.data(), sp.k.count);
    bn = merge_axes(b, sp.n.b.data(), sp.n.count);
  }
  FUCINA_ASSERT(ab && am && ak && bb && bk && bn);

  auto cb = merge_axes(c, sp.batch.c.data(), sp.batch.count);
  auto cm = merge_axes(c, sp.m.c.data(), sp.m.count);
  auto cn = merge_axes(c, sp.n.c.data(), sp.n.count);
  RawTensor target = c;
  const bool via_temp = !cb || !cm || !cn;
  std::array<int, kMaxRank> c_order{};
  int c_rank = 0;
  if (via_temp) {  // compute into [batch, m, n] and copy out
    c_rank = gather_order(c_order, {&sp.batch, &sp.m, &sp.n}, gc);
    Dims shape{};
    for (int i = 0; i < c_rank; ++i) shape[i] = c.shape[c_order[i]];
    target = ctx.empty(DType::f32, c_rank, shape);
    if (accumulate) {
      RawTensor cview = c;
      for (int i = 0; i < c_rank; ++i) {
        cview.shape[i] = c.shape[c_order[i]];
        cview.strides[i] = c.strides[c_order[i]];
      }
      copy(ctx, cview, target);
    }
    int pos = 0;
    for (auto* g : {&sp.batch, &sp.m, &sp.n})
      for (int i = 0; i < g->count; ++i) g->c[i] = pos++;
    cb = merge_axes(target, sp.batch.c.data(), sp.batch.count);
    cm = merge_axes(target, sp.m.c.data(), sp.m.count);
    cn = merge_axes(target, sp.n.c.data(), sp.n.count);
  }
  FUCINA_ASSERT(cb && cm && cn);

  kernels::GemmArgs g;
  g.batch = cb->size;
  g.m = cm->size;
  g.n = cn->size;
  g.k = ak->size;
  g.a = a.data<float>();
  g.a_bs = ab->stride;
  g.a_rs = am->stride;
  g.a_cs = ak->stride;
  g.b = b.data<float>();
  g.b_bs = bb->stride;
  g.b_rs = bk->stride;
  g.b_cs = bn->stride;
  g.c = target.data<float>();
  g.c_bs = cb->stride;
  g.c_rs = cm->stride;
  g.c_cs = cn->stride;
  g.accumulate = accumulate;
  kernels::sgemm(g, &ctx.pool());

  if (via_temp) {
    RawTensor cview = c;
    for (int i = 0; i < c_rank; ++i) {
      cview.shape[i] = c.shape[c_order[i]];
      cview.strides[i] = c.strides[c_order[i]];
    }
    copy(ctx, target, cview);
  }
}

}  // namespace fucina::raw
