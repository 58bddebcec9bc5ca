#pragma once
// Structure-copying ops: concat and stack along a name, gather rows (embedding lookup).
#include <span>
#include <vector>

#include "fucina/core/ops/view.hpp"

namespace fucina {

// a and b joined along T; every other axis must agree.
template <TagName T, AnyTensor A, AnyTensor B>
A concat(Context& ctx, const A& a, const B& b) {
  static_assert(std::is_same_v<A, B>, "concat operands must have the same tags and dtype");
  constexpr int ax = A::template axis_of<T>();
  for (int i = 0; i < a.raw().rank; ++i)
    if (i != ax)
      FUCINA_CHECK(a.raw().shape[i] == b.raw().shape[i], ShapeMismatch, "[concat] axis '{}' is {} on the left, {} on the right",
                   A::tag_list[static_cast<std::size_t>(i)].view(), a.raw().shape[i], b.raw().shape[i]);
  Dims shape = a.raw().shape;
  shape[ax] += b.raw().shape[ax];
  A out(ctx.empty(A::dtype, a.raw().rank, shape));
  RawTensor lo = narrow<T>(out, 0, a.raw().shape[ax]).raw();
  RawTensor hi = narrow<T>(out, a.raw().shape[ax], b.raw().shape[ax]).raw();
  raw::copy(ctx, a.raw(), lo);
  raw::copy(ctx, b.raw(), hi);
  if (autograd::grad_enabled() && (a.requires_grad() || b.requires_grad()))
    out.set_node(autograd::make_node<autograd::ConcatBackward>({a.node(), b.node()}, ax,
                                                               std::vector<std::int64_t>{a.raw().shape[ax], b.raw().shape[ax]}));
  return out;
}

// Stacks same-shaped tensors along a new leading axis T.
template <TagName T, AnyTensor X>
auto stack(Context& ctx, std::span<const X> parts) {
  static_assert(!tags::contains(X::tag_list, T), "stack tag already exists");
  using R = TensorFromList<X::dtype, tags::concat(tags::List<1>{T}, X::tag_list)>;
  FUCINA_CHECK(!parts.empty(), InvalidArgument, "[stack] needs at least one tensor");
  Dims shape{};
  shape[0] = static_cast<std::int64_t>(parts.size());
  for (std::size_t i = 0; i < X::rank; ++i) shape[i + 1] = parts[0].raw().shape[i];
  R out(ctx.empty(X::dtype, static_cast<int>(X::rank) + 1, shape));
  for (std::size_t p = 0; p < parts.size(); ++p) {
    for (std::size_t i = 0; i < X::rank; ++i)
      FUCINA_CHECK(parts[p].raw().shape[i] == shape[i + 1], ShapeMismatch, "[stack] part {} has axis '{}' of size {}, expected {}",
                   p, X::tag_list[i].view(), parts[p].raw().shape[i], shape[i + 1]);
    RawTensor slot = select<T>(out, static_cast<std::int64_t>(p)).raw();
    raw::copy(ctx, parts[p].raw(), slot);
  }
  bool any = false;
  for (const auto& p : parts) any = any || p.requires_grad();
  if (autograd::grad_enabled() && any) {
    std::vector<autograd::NodeRef> links;
    for (const auto& p : parts) links.push_back(p.node());
    auto n = autograd::make_node<autograd::ConcatBackward>(std::move(links), 0, std::vector<std::int64_t>(parts.size(), 1));
    static_cast<autograd::ConcatBackward&>(*n.get()).set_stacked();
    out.set_node(std::move(n));
  }
  return out;
}

// Rows of `table` picked by `ids` along T: the result has ids' tags, then table's other
// tags (embedding lookup: table <"vocab","embd">, ids <"seq"> -> <"seq","embd">).
template <TagName T, AnyTensor Table, AnyTensor Ids>
auto gather(Context& ctx, const Table& table, const Ids& ids) {
  static_assert(Ids::dtype == DType::i32, "gather indices must be i32");
  constexpr int ax = Table::template axis_of<T>();
  constexpr auto rest = detail::drop_at(Table::tag_list, ax);
  static_assert(tags::count_common(rest, Ids::tag_list) == 0, "gather index tags collide with the table's tags");
  using R = TensorFromList<Table::dtype, tags::concat(Ids::tag_list, rest)>;
  Dims shape{};
  int r = 0;
  for (std::size_t i = 0; i < Ids::rank; ++i) shape[r++] = ids.raw().shape[i];
  for (int i = 0; i < table.raw().rank; ++i)
    if (i != ax) shape[r++] = table.raw().shape[i];
  R out(ctx.empty(Table::dtype, r, shape));
  const std::vector<std::int32_t> idv = ids.to_vector();
  const std::int64_t vocab = table.raw().shape[ax];
  // Each output row is a copy of select<T>(table, id).
  RawTensor dst = out.raw();
  dst.rank = r - static_cast<int>(Ids::rank);
  for (int i = 0; i < dst.rank; ++i) {
    dst.shape[i] = shape[static_cast<int>(Ids::rank) + i];
    dst.strides[i] = out.raw().strides[static_cast<int>(Ids::rank) + i];
  }
  const std::int64_t row_elems = dst.numel();
  for (std::size_t n = 0; n < idv.size(); ++n) {
    const std::int64_t id = idv[n];
    FUCINA_CHECK(id >= 0 && id < vocab, IndexOutOfBounds, "[gather] index {} is outside axis '{}' of size {}", id, T.view(), vocab);
    RawTensor src = select<T>(table, id).raw();
    RawTensor d = dst;
    d.offset = static_cast<std::int64_t>(n) * row_elems;
    raw::copy(ctx, src, d);
  }
  if constexpr (Table::dtype == DType::f32)
    if (autograd::grad_enabled() && table.requires_grad())
      out.set_node(autograd::make_node<autograd::GatherBackward>({table.node()}, idv, ax, table.raw().rank, table.raw().shape));
  return out;
}

}  // namespace fucina
