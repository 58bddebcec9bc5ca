#pragma once
// Zero-copy views by name: narrow, select, permute, rename, split, merge, broadcast,
// reshape. A view shares its parent's buffer (refcount +1) and outlives it safely.
#include "fucina/autograd/backward/nodes.hpp"
#include "fucina/core/tensor.hpp"

namespace fucina {

namespace detail {
template <std::size_t N>
constexpr tags::List<N - 1> drop_at(const tags::List<N>& l, int at) {
  tags::List<N - 1> out{};
  std::size_t k = 0;
  for (std::size_t i = 0; i < N; ++i)
    if (static_cast<int>(i) != at) out[k++] = l[i];
  return out;
}
template <std::size_t N>
constexpr tags::List<N> replace_tag(tags::List<N> l, TagName from, TagName to) {
  for (auto& t : l)
    if (t == from) t = to;
  return l;
}
template <std::size_t N>
constexpr tags::List<N + 1> split_tag(const tags::List<N>& l, TagName t, TagName a, TagName b) {
  tags::List<N + 1> out{};
  std::size_t k = 0;
  for (std::size_t i = 0; i < N; ++i) {
    if (l[i] == t) {
      out[k++] = a;
      out[k++] = b;
    } else {
      out[k++] = l[i];
    }
  }
  return out;
}
template <std::size_t N>
constexpr tags::List<N - 1> merge_tags(const tags::List<N>& l, TagName a, TagName b, TagName ab) {
  tags::List<N - 1> out{};
  std::size_t k = 0;
  for (std::size_t i = 0; i < N; ++i) {
    if (l[i] == a) out[k++] = ab;
    else if (l[i] != b) out[k++] = l[i];
  }
  return out;
}
// Wraps a view's RawTensor in R and, when x is a variable, links a ViewBackward that
// `configure` describes.
template <class R, class X, class F>
R view_result(RawTensor r, const X& x, F&& configure) {
  R out(std::move(r));
  if (autograd::grad_enabled() && x.requires_grad()) {
    autograd::NodeRef n = autograd::make_node<autograd::ViewBackward>({x.node()});
    auto& v = static_cast<autograd::ViewBackward&>(*n.get());
    v.rank = x.raw().rank;
    v.shape = x.raw().shape;
    configure(v);
    out.set_node(std::move(n));
  }
  return out;
}

template <class R, class X>
R reinterpret_result(RawTensor r, const X& x) {
  return view_result<R>(std::move(r), x, [](autograd::ViewBackward& v) { v.kind = autograd::ViewKind::reinterpret; });
}

}  // namespace detail

// Axis T restricted to [start, start + length).
template <TagName T, AnyTensor X>
X narrow(const X& x, std::int64_t start, std::int64_t length) {
  constexpr int ax = X::template axis_of<T>();
  RawTensor r = x.raw();
  FUCINA_CHECK(start >= 0 && length > 0 && start + length <= r.shape[ax], IndexOutOfBounds,
               "[narrow] range [{}, {}) is outside axis '{}' of size {}", start, start + length, T.view(), r.shape[ax]);
  r.offset += start * r.strides[ax];
  r.shape[ax] = length;
  return detail::view_result<X>(std::move(r), x, [&](autograd::ViewBackward& v) {
    v.kind = autograd::ViewKind::slice;
    v.axis = ax;
    v.start = start;
  });
}

// Index `index` of axis T; the tag disappears from the result.
template <TagName T, AnyTensor X>
auto select(const X& x, std::int64_t index) {
  constexpr int ax = X::template axis_of<T>();
  using R = TensorFromList<X::dtype, detail::drop_at(X::tag_list, ax)>;
  const RawTensor& s = x.raw();
  FUCINA_CHECK(index >= 0 && index < s.shape[ax], IndexOutOfBounds, "[select] index {} is outside axis '{}' of size {}",
               index, T.view(), s.shape[ax]);
  RawTensor r = s;
  r.offset += index * s.strides[ax];
  r.rank = s.rank - 1;
  for (int i = ax; i < r.rank; ++i) {
    r.shape[i] = s.shape[i + 1];
    r.strides[i] = s.strides[i + 1];
  }
  return detail::view_result<R>(std::move(r), x, [&](autograd::ViewBackward& v) {
    v.kind = autograd::ViewKind::slice;
    v.axis = ax;
    v.start = index;
    v.drop_axis = true;
  });
}

// The same axes in the tag order Order... (align_to).
template <TagName... Order, AnyTensor X>
auto permute(const X& x) {
  constexpr tags::List<sizeof...(Order)> order{Order...};
  static_assert(tags::same_set(order, X::tag_list), "permute to a different tag set");
  using R = TensorT<X::dtype, Order...>;
  const RawTensor& s = x.raw();
  RawTensor r = s;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int from = tags::index_of(X::tag_list, order[i]);
    if (from < 0) continue;  // unreachable: same_set is asserted above
    r.shape[i] = s.shape[from];
    r.strides[i] = s.strides[from];
  }
  return detail::view_result<R>(std::move(r), x, [&](autograd::ViewBackward& v) {
    v.kind = autograd::ViewKind::permute;
    for (std::size_t i = 0; i < X::rank; ++i) v.map[i] = tags::index_of(order, X::tag_list[i]);
  });
}

// Renames tag From to To (same data, same layout).
template <TagName From, TagName To, AnyTensor X>
auto rename(const X& x) {
  static_assert(tags::contains(X::tag_list, From), "tensor tag not found");
  static_assert(!tags::contains(X::tag_list, To), "rename target tag already exists");
  using R = TensorFromList<X::dtype, detail::replace_tag(X::tag_list, From, To)>;
  return detail::reinterpret_result<R>(x.raw(), x);
}

// Splits axis T into (A, B) with B of size `size_b` (A = size / size_b).
template <TagName T, TagName A, TagName B, AnyTensor X>
auto split(const X& x, std::int64_t size_b) {
  constexpr int ax = X::template axis_of<T>();
  static_assert(!tags::contains(X::tag_list, A) || A == T, "split target tag collides with an existing tag");
  static_assert(!tags::contains(X::tag_list, B) || B == T, "split target tag collides with an existing tag");
  using R = TensorFromList<X::dtype, detail::split_tag(X::tag_list, T, A, B)>;
  const RawTensor& s = x.raw();
  FUCINA_CHECK(size_b > 0 && s.shape[ax] % size_b == 0, InvalidShape,
               "[split] axis '{}' of size {} is not divisible by {}", T.view(), s.shape[ax], size_b);
  RawTensor r = s;
  r.rank = s.rank + 1;
  for (int i = s.rank - 1; i > ax; --i) {
    r.shape[i + 1] = s.shape[i];
    r.strides[i + 1] = s.strides[i];
  }
  r.shape[ax] = s.shape[ax] / size_b;
  r.strides[ax] = s.strides[ax] * size_b;
  r.shape[ax + 1] = size_b;
  r.strides[ax + 1] = s.strides[ax];
  return detail::reinterpret_result<R>(std::move(r), x);
}

// Merges adjacent axes A, B (A directly before B) into AB. Throws UnsupportedView when
// the strides do not allow it (call contiguous() first).
template <TagName A, TagName B, TagName AB, AnyTensor X>
auto merge(const X& x) {
  constexpr int a = X::template axis_of<A>();
  constexpr int b = X::template axis_of<B>();
  static_assert(b == a + 1, "merge tags must be adjacent and in tensor order");
  static_assert(!tags::contains(X::tag_list, AB) || AB == A || AB == B, "merge target tag collides with an existing tag");
  using R = TensorFromList<X::dtype, detail::merge_tags(X::tag_list, A, B, AB)>;
  const RawTensor& s = x.raw();
  FUCINA_CHECK(s.shape[a] == 1 || s.shape[b] == 1 || s.strides[a] == s.strides[b] * s.shape[b], UnsupportedView,
               "[merge] axes '{}' and '{}' are not contiguous together; call contiguous() first", A.view(), B.view());
  RawTensor r = s;
  r.rank = s.rank - 1;
  r.shape[a] = s.shape[a] * s.shape[b];
  r.strides[a] = s.shape[b] == 1 ? s.strides[a] : s.strides[b];
  for (int i = b; i < r.rank; ++i) {
    r.shape[i] = s.shape[i + 1];
    r.strides[i] = s.strides[i + 1];
  }
  return detail::reinterpret_result<R>(std::move(r), x);
}

// Appends a new axis T of `size` that repeats the data (stride 0, no copy).
template <TagName T, AnyTensor X>
auto broadcast(const X& x, std::int64_t size) {
  static_assert(!tags::contains(X::tag_list, T), "broadcast tag already exists");
  using R = TensorFromList<X::dtype, tags::concat(X::tag_list, tags::List<1>{T})>;
  FUCINA_CHECK(size > 0, InvalidShape, "[broadcast] size {} for axis '{}' must be positive", size, T.view());
  RawTensor r = x.raw();
  r.shape[r.rank] = size;
  r.strides[r.rank] = 0;
  ++r.rank;
  return detail::view_result<R>(std::move(r), x, [&](autograd::ViewBackward& v) {
    v.kind = autograd::ViewKind::broadcast;
    v.axis = static_cast<int>(X::rank);
  });
}

// New tags and sizes over the same contiguous data.
template <TagName... Ts, AnyTensor X>
auto reshape(const X& x, const std::array<std::int64_t, sizeof...(Ts)>& sizes) {
  using R = TensorT<X::dtype, Ts...>;
  const RawTensor& s = x.raw();
  FUCINA_CHECK(s.is_contiguous(), UnsupportedView, "[reshape] tensor is a strided view; call contiguous() first");
  std::int64_t n = 1;
  for (auto v : sizes) n *= v;
  FUCINA_CHECK(n == s.numel(), ShapeMismatch, "[reshape] {} elements cannot be viewed as {}", s.numel(), n);
  RawTensor r = s;
  r.rank = static_cast<int>(sizeof...(Ts));
  for (std::size_t i = 0; i < sizeof...(Ts); ++i) r.shape[i] = sizes[i];
  r.strides = contiguous_strides(r.shape, r.rank);
  return detail::reinterpret_result<R>(std::move(r), x);
}

// Always a fresh contiguous copy.
template <AnyTensor X>
X clone(Context& ctx, const X& x) {
  RawTensor out = ctx.empty(X::dtype, x.raw().rank, x.raw().shape);
  raw::copy(ctx, x.raw(), out);
  X r(std::move(out));
  if (autograd::grad_enabled() && x.requires_grad()) r.set_node(autograd::make_node<autograd::IdentityBackward>({x.node()}));
  return r;
}

// A contiguous copy (or the tensor itself when already contiguous).
template <AnyTensor X>
X contiguous(Context& ctx, const X& x) {
  if (x.is_contiguous()) return x;
  return clone(ctx, x);
}


// Converts the element type (f32 <-> f16/bf16, i32 -> f32, ...).
template <DType D2, AnyTensor X>
auto to(Context& ctx, const X& x) {
  using R = TensorFromList<D2, X::tag_list>;
  RawTensor out = ctx.empty(D2, x.raw().rank, x.raw().shape);
  raw::copy(ctx, x.raw(), out);
  R r(std::move(out));
  if constexpr (D2 == DType::f32 && X::dtype == DType::f32)
    if (autograd::grad_enabled() && x.requires_grad()) r.set_node(autograd::make_node<autograd::IdentityBackward>({x.node()}));
  return r;
}

}  // namespace fucina
