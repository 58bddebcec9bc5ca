#pragma once
// The public tensor: TensorT<DType, "tag"...>, a value handle over a refcounted buffer
// whose axes are named in the type. Copying a handle makes a view (the buffer's refcount
// goes up); the buffer returns to its pool when the last handle goes.
//
// Note [Tags and layout]: the rank is the number of tags and axis i of the RawTensor is
// tag i. Ops compute result tags at compile time (core/tags/tag_algebra.hpp) and the
// sizes at run time; a tag rule violation is a static_assert, a size clash a
// fucina::Error(ShapeMismatch) naming the op, the tag and both sizes.
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include "fucina/autograd/node.hpp"
#include "fucina/core/context.hpp"
#include "fucina/core/error.hpp"
#include "fucina/core/raw/elementwise.hpp"
#include "fucina/core/raw_tensor.hpp"
#include "fucina/core/rng.hpp"
#include "fucina/core/tags/tag_algebra.hpp"

namespace fucina {

template <DType D, TagName... Ts>
class TensorT;

template <TagName... Ts>
using Tensor = TensorT<DType::f32, Ts...>;

namespace detail {
// The bodies of TensorT's method sugar (core/ops/methods.hpp), reached through a dependent
// name so they may call free functions declared after TensorT. (Out-of-line member
// definitions would do, but clang 14 rejects them for a class template with a pack of
// class-type parameters such as TagName... Ts.)
template <class X>
struct TensorMethods;
template <DType D, auto L, class Seq = std::make_index_sequence<L.size()>>
struct tensor_from_list;
template <DType D, auto L, std::size_t... I>
struct tensor_from_list<D, L, std::index_sequence<I...>> {
  using type = TensorT<D, L[I]...>;
};
template <std::size_t R, class Seq = std::make_index_sequence<R>>
struct rank_tensor;
template <std::size_t R, std::size_t... I>
struct rank_tensor<R, std::index_sequence<I...>> {
  using type = TensorT<DType::f32, kPositionalTags[I]...>;
};
}  // namespace detail

// The tensor type whose tags are the constexpr list L.
template <DType D, auto L>
using TensorFromList = typename detail::tensor_from_list<D, L>::type;

// Rank-only tensors use positional tags: RankTensor<2> is Tensor<"_0","_1">.
template <std::size_t R>
using RankTensor = typename detail::rank_tensor<R>::type;

template <class T>
struct is_tensor : std::false_type {};
template <DType D, TagName... Ts>
struct is_tensor<TensorT<D, Ts...>> : std::true_type {};
template <class T>
concept AnyTensor = is_tensor<std::remove_cvref_t<T>>::value;
template <class T>
concept FloatTensor = AnyTensor<T> && std::remove_cvref_t<T>::dtype == DType::f32;

template <DType D, TagName... Ts>
class TensorT {
 public:
  static constexpr std::size_t rank = sizeof...(Ts);
  static constexpr tags::List<rank> tag_list{Ts...};
  static constexpr DType dtype = D;
  using value_type = element_t<D>;
  using Sizes = std::array<std::int64_t, rank>;
  static_assert(rank <= static_cast<std::size_t>(kMaxRank), "a tensor has at most 8 axes");
  static_assert(tags::unique(tag_list), "duplicate tag");

  template <TagName T>
  static constexpr int axis_of() {
    constexpr int i = tags::index_of(tag_list, T);
    static_assert(i >= 0, "tensor tag not found");
    return i;
  }
  template <TagName T>
  static constexpr bool has_tag = tags::contains(tag_list, T);

  TensorT() = default;
  explicit TensorT(RawTensor raw, autograd::NodeRef node = {}) : raw_(std::move(raw)), node_(std::move(node)) {
    FUCINA_CHECK(raw_.rank == static_cast<int>(rank) && raw_.dtype == D, Internal,
                 "[Tensor] raw rank {} / dtype {} does not match the type (rank {}, {})", raw_.rank,
                 dtype_name(raw_.dtype), rank, dtype_name(D));
  }

  // ---- construction -------------------------------------------------------------
  static TensorT empty(Context& ctx, const Sizes& sizes) {
    Dims d{};
    for (std::size_t i = 0; i < rank; ++i) d[i] = sizes[i];
    return TensorT(ctx.empty(D, static_cast<int>(rank), d));
  }
  static TensorT full(Context& ctx, const Sizes& sizes, float value) {
    TensorT t = empty(ctx, sizes);
    raw::fill(ctx, t.raw_, value);
    return t;
  }
  static TensorT zeros(Context& ctx, const Sizes& sizes) { return full(ctx, sizes, 0.f); }
  static TensorT ones(Context& ctx, const Sizes& sizes) { return full(ctx, sizes, 1.f); }
  static TensorT scalar(Context& ctx, float value)
    requires(rank == 0)
  {
    return full(ctx, {}, value);
  }
  static TensorT from_data(Context& ctx, const Sizes& sizes, std::span<const value_type> values) {
    TensorT t = empty(ctx, sizes);
    FUCINA_CHECK(static_cast<std::int64_t>(values.size()) == t.numel(), ShapeMismatch,
                 "[from_data] {} values for a tensor of {} elements", values.size(), t.numel());
    std::memcpy(t.raw_.buf.bytes(), values.data(), values.size() * sizeof(value_type));
    return t;
  }
  static TensorT from_data(Context& ctx, const Sizes& sizes, std::initializer_list<value_type> values) {
    return from_data(ctx, sizes, std::span<const value_type>(values.begin(), values.size()));
  }
  static TensorT arange(Context& ctx, std::int64_t n, float start = 0.f, float step = 1.f)
    requires(rank == 1 && D == DType::f32)
  {
    TensorT t = empty(ctx, {n});
    float* p = t.raw_.template data<float>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = start + step * static_cast<float>(i);
    return t;
  }
  // Seeded normal / uniform: element i (row-major) depends only on (seed, i).
  static TensorT randn(Context& ctx, const Sizes& sizes, std::uint64_t seed, float mean = 0.f, float stddev = 1.f)
    requires(D == DType::f32)
  {
    TensorT t = empty(ctx, sizes);
    float* p = t.raw_.template data<float>();
    ctx.pool().parallel_range(t.numel(), 1 << 14, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) p[i] = mean + stddev * rng::normal(seed, static_cast<std::uint64_t>(i));
    });
    return t;
  }
  static TensorT uniform(Context& ctx, const Sizes& sizes, std::uint64_t seed, float lo = 0.f, float hi = 1.f)
    requires(D == DType::f32)
  {
    TensorT t = empty(ctx, sizes);
    float* p = t.raw_.template data<float>();
    ctx.pool().parallel_range(t.numel(), 1 << 14, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) p[i] = lo + (hi - lo) * rng::uniform(seed, static_cast<std::uint64_t>(i));
    });
    return t;
  }

  // ---- shape and data -------------------------------------------------------------
  bool defined() const noexcept { return static_cast<bool>(raw_.buf); }
  std::int64_t numel() const noexcept { return raw_.numel(); }
  Sizes sizes() const noexcept {
    Sizes s{};
    for (std::size_t i = 0; i < rank; ++i) s[i] = raw_.shape[i];
    return s;
  }
  template <TagName T>
  std::int64_t size() const noexcept {
    return raw_.shape[axis_of<T>()];
  }
  bool is_contiguous() const noexcept { return raw_.is_contiguous(); }
  const RawTensor& raw() const noexcept { return raw_; }
  RawTensor& raw_mut() noexcept { return raw_; }

  // Contiguous storage only (a strided view throws UnsupportedView: use contiguous()).
  std::span<const value_type> data() const {
    FUCINA_CHECK(raw_.is_contiguous(), UnsupportedView, "[data] tensor is a strided view; call contiguous() first");
    return {raw_.template data<value_type>(), static_cast<std::size_t>(numel())};
  }
  std::span<value_type> mutable_data() {
    FUCINA_CHECK(!node_ || node_->is_leaf(), InvalidArgument,
                 "[mutable_data] this tensor is an intermediate of a graph; detach() it first");
    FUCINA_CHECK(raw_.is_contiguous(), UnsupportedView, "[mutable_data] tensor is a strided view; call contiguous() first");
    return {raw_.template data<value_type>(), static_cast<std::size_t>(numel())};
  }
  // Elements in row-major logical order (any layout).
  std::vector<value_type> to_vector() const {
    // Contiguous storage is one copy; the index walk below costs ~5 ns an element (a
    // verification's rows of logits: ~40 us per 8192-token row).
    if (raw_.is_contiguous()) return {raw_.template data<value_type>(), raw_.template data<value_type>() + numel()};
    std::vector<value_type> out(static_cast<std::size_t>(numel()));
    Dims idx{};
    const value_type* base = raw_.template data<value_type>();
    for (std::size_t n = 0; n < out.size(); ++n) {
      std::int64_t off = 0;
      for (std::size_t i = 0; i < rank; ++i) off += idx[i] * raw_.strides[i];
      out[n] = base[off];
      for (int i = static_cast<int>(rank) - 1; i >= 0; --i) {
        if (++idx[i] < raw_.shape[i]) break;
        idx[i] = 0;
      }
    }
    return out;
  }
  value_type at(const Sizes& index) const {
    std::int64_t off = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      FUCINA_CHECK(index[i] >= 0 && index[i] < raw_.shape[i], IndexOutOfBounds,
                   "[at] index {} out of range for axis '{}' of size {}", index[i], tag_list[i].view(), raw_.shape[i]);
      off += index[i] * raw_.strides[i];
    }
    return raw_.template data<value_type>()[off];
  }
  value_type item() const {
    FUCINA_CHECK(numel() == 1, InvalidShape, "[item] tensor has {} elements, not 1", numel());
    return raw_.template data<value_type>()[0];
  }

  // ---- autograd -------------------------------------------------------------------
  // A variable carries the node that produced it (or its own leaf node); a constant
  // carries none. Both take the same ops and kernels.
  bool requires_grad() const noexcept { return static_cast<bool>(node_); }
  const autograd::NodeRef& node() const noexcept { return node_; }
  void set_node(autograd::NodeRef n) noexcept { node_ = std::move(n); }
  // A leaf variable over the same data (gradients accumulate into it).
  TensorT variable() const
    requires(D == DType::f32)
  {
    return TensorT(raw_, autograd::NodeRef(new autograd::LeafNode));
  }
  // The same data with no link to the graph.
  TensorT detach() const { return TensorT(raw_); }
  bool is_leaf() const noexcept { return node_ && node_->is_leaf(); }
  // The accumulated gradient of a leaf variable (undefined until a backward reached it).
  TensorT grad() const {
    FUCINA_CHECK(is_leaf(), InvalidArgument, "[grad] only leaf variables keep gradients (use variable())");
    RawTensor g = node_->grad();
    return g.buf ? TensorT(std::move(g)) : TensorT();
  }
  void zero_grad() {
    FUCINA_CHECK(is_leaf(), InvalidArgument, "[zero_grad] only leaf variables keep gradients");
    node_->set_grad(RawTensor{});
  }
  // Backpropagates from this tensor: a scalar (one element) is seeded with 1.
  void backward(Context& ctx) const {
    FUCINA_CHECK(numel() == 1, InvalidArgument,
                 "[backward] a tensor of {} elements needs an explicit output gradient", numel());
    RawTensor seed = ctx.empty(DType::f32, raw_.rank, raw_.shape);
    raw::fill(ctx, seed, 1.f);
    autograd::run_backward(ctx, node_, seed);
  }
  void backward(Context& ctx, const TensorT& output_grad) const {
    for (std::size_t i = 0; i < rank; ++i)
      FUCINA_CHECK(output_grad.raw().shape[i] == raw_.shape[i], ShapeMismatch,
                   "[backward] output gradient axis '{}' is {}, the tensor's is {}", tag_list[i].view(),
                   output_grad.raw().shape[i], raw_.shape[i]);
    autograd::run_backward(ctx, node_, output_grad.raw());
  }

  // ---- method sugar over the free functions (bodies in core/ops/methods.hpp) ---------
  template <TagName... C, AnyTensor W>
  auto dot(Context& ctx, const W& w) const {
    return detail::TensorMethods<TensorT>::template dot<C...>(ctx, *this, w);
  }
  template <TagName... Out, AnyTensor W>
  auto einsum(Context& ctx, const W& w) const {
    return detail::TensorMethods<TensorT>::template einsum<Out...>(ctx, *this, w);
  }
  template <TagName... R>
  auto sum(Context& ctx) const {
    return detail::TensorMethods<TensorT>::template sum<R...>(ctx, *this);
  }
  template <TagName... R>
  auto mean(Context& ctx) const {
    return detail::TensorMethods<TensorT>::template mean<R...>(ctx, *this);
  }
  template <TagName T>
  auto softmax(Context& ctx) const {
    return detail::TensorMethods<TensorT>::template softmax<T>(ctx, *this);
  }
  template <TagName T>
  auto log_softmax(Context& ctx) const {
    return detail::TensorMethods<TensorT>::template log_softmax<T>(ctx, *this);
  }
  template <TagName T>
  auto narrow(std::int64_t start, std::int64_t length) const {
    return detail::TensorMethods<TensorT>::template narrow<T>(*this, start, length);
  }
  template <TagName T>
  auto select(std::int64_t index) const {
    return detail::TensorMethods<TensorT>::template select<T>(*this, index);
  }
  template <TagName... Order>
  auto permute() const {
    return detail::TensorMethods<TensorT>::template permute<Order...>(*this);
  }
  template <TagName From, TagName To>
  auto rename() const {
    return detail::TensorMethods<TensorT>::template rename<From, To>(*this);
  }
  template <DType D2>
  auto to(Context& ctx) const {
    return detail::TensorMethods<TensorT>::template to<D2>(ctx, *this);
  }
  TensorT contiguous(Context& ctx) const { return detail::TensorMethods<TensorT>::contiguous(ctx, *this); }

 private:
  RawTensor raw_;
  autograd::NodeRef node_;
};

}  // namespace fucina
