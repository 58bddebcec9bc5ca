#pragma once
// Model weights as named-axis tensors borrowed from the GGUF mmap (no copy).
//
// Note [Weight layout]: a ggml matrix [ne0 = in, ne1 = out] is row-major Tensor<Out, In>;
// expert stacks [in, out, n_expert] are Tensor<"expert", Out, In>. f32 and f16 weights go
// through model/f16_matmul.hpp, which reads the rows in place and sums in llama.cpp's order
// (Note [ggml summation order]). Norm vectors are tiny and are kept (or converted to) f32.
#include <memory>
#include <string>
#include <vector>

#include "fucina/fucina.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/model/backward.hpp"
#include "fucina/model/config.hpp"
#include "fucina/model/f16_matmul.hpp"
#include "fucina/model/one_row.hpp"
#include "fucina/model/quant_matmul.hpp"

namespace fucina::model {

// A low-rank update of a [Out, In] matrix (LoRA): W'x = Wx + scale·B(Ax), as llama.cpp's
// build_lora_mm applies an adapter (scale = user scale · alpha / rank). a and b may be
// variables (training).
template <TagName Out, TagName In>
struct LoraFactors {
  Tensor<"rank", In> a;
  Tensor<Out, "rank"> b;
  float scale = 1.f;
};

// A [Out, In] matrix stored as f32, f16 or a ggml block-quantized type, with any LoRA
// adapters applied on top. An f32 matrix may be a variable (full-parameter training).
template <TagName Out, TagName In>
class Weight {
 public:
  using F32 = TensorT<DType::f32, Out, In>;
  using F16 = TensorT<DType::f16, Out, In>;
  using LoraA = Tensor<"rank", In>;
  using LoraB = Tensor<Out, "rank">;
  Weight() = default;
  explicit Weight(F32 w, GgmlOrder order = GgmlOrder::tiled) : f32_(std::move(w)), order_(order) {}
  explicit Weight(F16 w, GgmlOrder order = GgmlOrder::tiled) : f16_(std::move(w)), order_(order) {}
  explicit Weight(QuantMatrix q) : q_(std::move(q)) {}
  bool defined() const { return f32_.defined() || f16_.defined() || q_.data != nullptr; }
  bool is_f16() const { return f16_.defined(); }
  bool is_quant() const { return q_.data != nullptr; }
  const QuantMatrix& quant() const { return q_; }
  const F32& f32() const { return f32_; }
  const F16& f16() const { return f16_; }
  std::int64_t rows() const {
    if (is_quant()) return q_.rows;
    return is_f16() ? f16_.template size<Out>() : f32_.template size<Out>();
  }
  std::int64_t cols() const {
    if (is_quant()) return q_.cols;
    return is_f16() ? f16_.template size<In>() : f32_.template size<In>();
  }
  // Which ggml summation order a product of >= 2 rows follows (Note [ggml summation order]).
  GgmlOrder order() const { return order_; }
  // The stored rows, for the input gradient (Note [Frozen weight gradient]).
  WeightRows rows_source() const {
    if (is_quant()) return WeightRows{{}, q_};
    return WeightRows{is_f16() ? f16_.raw() : f32_.raw(), {}};
  }
  bool requires_grad() const { return f32_.requires_grad(); }
  const std::vector<LoraFactors<Out, In>>& lora() const { return lora_; }
  void add_lora(LoraFactors<Out, In> f) { lora_.push_back(std::move(f)); }
  void clear_lora() { lora_.clear(); }

 private:
  F32 f32_;
  F16 f16_;
  QuantMatrix q_;
  GgmlOrder order_ = GgmlOrder::tiled;
  std::vector<LoraFactors<Out, In>> lora_;
};

namespace detail {
// x rounded to f16 values (Note [f16 activations]), contiguous, in one parallel pass.
template <TagName R, TagName C>
Tensor<R, C> f16_rounded(Context& ctx, const Tensor<R, C>& x) {
  const auto xc = contiguous(ctx, x);
  auto xr = Tensor<R, C>::empty(ctx, {x.template size<R>(), x.template size<C>()});
  round_to_f16(ctx.pool(), xc.data().data(), xr.mutable_data().data(), xr.numel());
  return xr;
}

// xr (contiguous; already f16-rounded for an f16 weight) · Wᵀ for an f16 or f32 matrix
// wr [Out, C] with unit column stride.
template <TagName Out, TagName C, TagName R>
Tensor<R, Out> linear_ggml(Context& ctx, const Tensor<R, C>& xr, const RawTensor& wr, GgmlOrder tiled_order) {
  const std::int64_t k = xr.template size<C>(), n = xr.template size<R>(), n_out = wr.shape[0];
  FUCINA_ASSERT(wr.strides[1] == 1);
  auto y = Tensor<R, Out>::empty(ctx, {n, n_out});
  by_row_arithmetic(n, [&](std::int64_t r0, std::int64_t rows, bool one_row) {  // Note [One-row arithmetic]
    // tinyBLAS only runs for >= 2 activation rows (llamafile_sgemm returns early for one:
    // decode, the output head) and only takes k % 16 == 0, rows % 4 == 0; else ggml_vec_dot.
    const bool tiles = rows >= 2 && k % 16 == 0 && n_out % 4 == 0 && !one_row;
    const GgmlOrder order = tiles ? tiled_order : GgmlOrder::vec;
    const float* x = xr.data().data() + r0 * k;
    float* out = y.mutable_data().data() + r0 * n_out;
    if (wr.dtype == DType::f16)
      matmul_f16(ctx.pool(), x, rows, k, wr.template data<Half>(), wr.strides[0], n_out, out, order);
    else
      matmul_f32(ctx.pool(), x, rows, k, wr.template data<float>(), wr.strides[0], n_out, out, order);
  });
  return y;
}

// Links the backward of y = x·Wᵀ when x or W takes a gradient; `used` is the contiguous
// x the product read (saved only for W's gradient); w_node: W's node when W is a variable.
template <TagName C, TagName R, TagName Out>
void link_linear(Tensor<R, Out>& y, const Tensor<R, C>& x, const Tensor<R, C>& used, WeightRows rows,
                 const autograd::NodeRef& w_node) {
  if (!autograd::grad_enabled() || (!x.requires_grad() && !w_node)) return;
  y.set_node(autograd::make_node<LinearBackward>({x.node(), w_node}, std::move(rows), w_node ? used.raw() : RawTensor{}));
}

// x·Wᵀ for an f32 matrix held as a tensor (a LoRA factor), in ggml's f32 order.
template <TagName C, TagName R, TagName Out>
Tensor<R, Out> linear_f32(Context& ctx, const Tensor<R, C>& x, const Tensor<Out, C>& w) {
  FUCINA_CHECK(x.template size<C>() == w.template size<C>(), ShapeMismatch,
               "[linear] contracted axis '{}' is {} on the left, {} on the right", C.view(), x.template size<C>(),
               w.template size<C>());
  const auto used = contiguous(ctx, x);
  const RawTensor wr = w.raw().strides[1] == 1 ? w.raw() : contiguous(ctx, w.detach()).raw();
  auto y = linear_ggml<Out>(ctx, used, wr, GgmlOrder::tiled);
  link_linear(y, x, used, WeightRows{wr, {}}, w.node());
  return y;
}

template <TagName C, TagName R, TagName Out>
void check_contracted(const Tensor<R, C>& x, const Weight<Out, C>& w) {
  const std::int64_t k = w.is_quant() ? w.quant().cols : w.is_f16() ? w.f16().raw().shape[1] : x.template size<C>();
  FUCINA_CHECK(x.template size<C>() == k, ShapeMismatch, "[linear] contracted axis '{}' is {} on the left, {} on the right",
               C.view(), x.template size<C>(), k);
}
}  // namespace detail

namespace detail {
// x·Wᵀ of the stored matrix alone; `rounded`: x already rounded to f16 (or undefined);
// `acts`: x's packed encodings shared with other products of x (or null).
template <TagName C, TagName R, TagName Out>
Tensor<R, Out> stored_linear(Context& ctx, const Tensor<R, C>& x, const Tensor<R, C>& rounded, const Weight<Out, C>& w,
                             PackedActivations* acts = nullptr) {
  check_contracted(x, w);
  Tensor<R, Out> y;
  Tensor<R, C> used;
  if (w.is_quant()) {
    used = contiguous(ctx, x);
    y = Tensor<R, Out>::empty(ctx, {x.template size<R>(), w.quant().rows});
    matmul_quant(ctx.pool(), used.data().data(), x.template size<R>(), w.quant(), y.mutable_data().data(), acts);
  } else if (w.is_f16()) {
    y = linear_ggml<Out>(ctx, rounded.defined() ? rounded : f16_rounded(ctx, x), w.f16().raw(), w.order());
  } else {
    used = contiguous(ctx, x);
    y = linear_ggml<Out>(ctx, used, w.f32().raw(), w.order());
  }
  link_linear(y, x, used, w.rows_source(), w.requires_grad() ? w.f32().node() : autograd::NodeRef{});
  return y;
}

// y + Σ scale·B(Ax) over W's adapters, in build_lora_mm's order.
template <TagName C, TagName R, TagName Out>
Tensor<R, Out> add_lora(Context& ctx, const Tensor<R, C>& x, const Weight<Out, C>& w, Tensor<R, Out> y) {
  for (const LoraFactors<Out, C>& f : w.lora()) {
    auto ax = linear_f32(ctx, x, f.a);
    auto bax = linear_f32(ctx, ax, f.b);
    y = add(ctx, y, mul(ctx, bax, f.scale));
  }
  return y;
}
}  // namespace detail

// x · Wᵀ contracting In, by name: Tensor<R, In> · Weight<Out, In> -> Tensor<R, Out>, with
// llama.cpp's numerics for each weight format, LoRA adapters applied. Records its backward
// when x or W takes a gradient (Note [Frozen weight gradient]).
template <TagName C, TagName R, TagName Out>
Tensor<R, Out> linear(Context& ctx, const Tensor<R, C>& x, const Weight<Out, C>& w) {
  return detail::add_lora(ctx, x, w, detail::stored_linear(ctx, x, {}, w));
}

// One left operand of several linear()s (q/k/v, gate/up): the f16 rounding pass runs once,
// on the first f16 weight, and the packed int8 encoding once per activation format, instead
// of once per weight.
template <TagName R, TagName C>
class SharedInput {
 public:
  SharedInput(Context& ctx, const Tensor<R, C>& x) : ctx_(ctx), x_(x) {}
  template <TagName Out>
  Tensor<R, Out> linear(const Weight<Out, C>& w) {
    if (w.is_f16() && !rounded_.defined()) rounded_ = detail::f16_rounded(ctx_, x_);
    return detail::add_lora(ctx_, x_, w, detail::stored_linear(ctx_, x_, rounded_, w, &acts_));
  }

 private:
  Context& ctx_;
  Tensor<R, C> x_, rounded_;
  PackedActivations acts_;
};

// A stack of per-expert [Out, In] matrices (f32, f16 or one ggml block type).
template <TagName Out, TagName In>
class ExpertWeights {
 public:
  using F32 = TensorT<DType::f32, "expert", Out, In>;
  using F16 = TensorT<DType::f16, "expert", Out, In>;
  ExpertWeights() = default;
  explicit ExpertWeights(F32 w) : f32_(std::move(w)) {}
  explicit ExpertWeights(F16 w) : f16_(std::move(w)) {}
  // `stack` holds n_expert * Out rows, expert e's rows [e * Out, (e + 1) * Out).
  ExpertWeights(QuantMatrix stack, std::int64_t n_expert) : q_(std::move(stack)), n_expert_(n_expert) {
    FUCINA_ASSERT(n_expert_ > 0 && q_.rows % n_expert_ == 0);
  }
  bool is_quant() const { return q_.data != nullptr; }
  bool defined() const { return is_quant() || f16_.defined() || f32_.defined(); }
  std::int64_t n_expert() const {
    if (is_quant()) return n_expert_;
    return f16_.defined() ? f16_.template size<"expert">() : f32_.template size<"expert">();
  }
  Weight<Out, In> expert(std::int64_t e) const {
    FUCINA_CHECK(e >= 0 && e < n_expert(), IndexOutOfBounds, "[experts] expert {} is outside 0..{}", e, n_expert() - 1);
    if (is_quant()) {  // a row-offset view into the stack; mul_mat_id uses the plain vec_dot path too
      QuantMatrix m = q_;
      m.rows = q_.rows / n_expert_;
      m.data = q_.data + e * m.rows * q_.row_bytes;
      return Weight<Out, In>(std::move(m));
    }
    // ggml's mul_mat_id sums with ggml_vec_dot (Note [ggml summation order]).
    if (f16_.defined()) return Weight<Out, In>(select<"expert">(f16_, e), GgmlOrder::vec);
    return Weight<Out, In>(select<"expert">(f32_, e), GgmlOrder::vec);
  }

 private:
  F32 f32_;
  F16 f16_;
  QuantMatrix q_;
  std::int64_t n_expert_ = 0;
};

// Checks a stored routed-expert stack against [n_expert, out, in] (InvalidFile) and the
// kernels this build has (Unsupported); returns the bytes of one expert's matrix.
std::uint64_t check_expert_stack(const gguf::TensorInfo& info, std::int64_t n_expert, std::int64_t out, std::int64_t in);

namespace detail {
struct StackView {
  QuantMatrix quant;  // a block type (or BF16): n * out rows
  RawTensor raw;      // f32 / f16: [n, out, in]
};
StackView stack_view(const gguf::TensorInfo& info, BufferRef owner, const std::byte* data, std::int64_t n,
                     std::int64_t out, std::int64_t in, bool fast_prefill);
}  // namespace detail

// n consecutive experts of the (checked) stack `info`, over `data` (n matrices in the file's
// layout, kept alive by `owner`): what load_weights makes of a mapped stack, and what the
// expert store makes of one expert read from the file (n = 1), so both multiply alike.
template <TagName Out, TagName In>
ExpertWeights<Out, In> expert_stack(const gguf::TensorInfo& info, BufferRef owner, const std::byte* data, std::int64_t n,
                                    std::int64_t out, std::int64_t in, bool fast_prefill) {
  detail::StackView v = detail::stack_view(info, std::move(owner), data, n, out, in, fast_prefill);
  if (v.quant.data) return ExpertWeights<Out, In>(std::move(v.quant), n);
  if (v.raw.dtype == DType::f16) return ExpertWeights<Out, In>(TensorT<DType::f16, "expert", Out, In>(std::move(v.raw)));
  return ExpertWeights<Out, In>(TensorT<DType::f32, "expert", Out, In>(std::move(v.raw)));
}

class ExpertStore;  // model/expert_store.hpp

struct LayerWeights {
  Tensor<"embd"> attn_norm, ffn_norm;
  Tensor<"hd"> q_norm, k_norm;  // qwen3*: per-head RMSNorm of q and k
  Weight<"qd", "embd"> wq;
  Weight<"kd", "embd"> wk, wv;
  Weight<"embd", "qd"> wo;
  Weight<"ff", "embd"> gate, up;  // dense FFN
  Weight<"embd", "ff"> down;
  Weight<"expert", "embd"> router;  // MoE FFN
  ExpertWeights<"eff", "embd"> gate_exps, up_exps;
  ExpertWeights<"embd", "eff"> down_exps;
  // Set when the routed experts are read from the file on demand (Note [Streamed experts]):
  // the stacks above are then empty.
  std::shared_ptr<ExpertStore> expert_store;
};

struct ModelWeights {
  Weight<"vocab", "embd"> tok_embd;
  Tensor<"embd"> output_norm;
  Weight<"vocab", "embd"> output;  // token_embd when the file ties them
  bool tied = false;
  std::vector<LayerWeights> layers;
};

// Borrows every tensor the architecture needs from `file` (which must outlive the
// result). Missing tensors -> InvalidFile listing all of them; a shape that disagrees
// with the config -> InvalidFile; a weight type other than f32/f16 or a ggml block type
// with a dot kernel -> Unsupported.
struct LoadOptions {
  // Quantized products of >= 16 rows (prompts) through the f32 GEMM on decoded weights:
  // faster, not bit-exact with llama.cpp (Note [Quantized GEMM] in src/model/quant_matmul.cpp).
  bool fast_prefill = false;
  // Quantized matrices repacked at load into 16-row interleaved groups for the VNNI
  // kernels (Note [Interleaved weights] in quant/packed.hpp) and f16/f32 matrices copied,
  // both into huge-page memory, the file's pages released; off: the mapped file in place.
  bool repack = true;
  // Routed experts (ffn_{gate,up,down}_exps) left out: Model::load reads them from the file
  // on demand into a cache of moe_cache_bytes (Note [Streamed experts], model/expert_store.hpp).
  bool moe_stream = false;
  std::uint64_t moe_cache_bytes = std::uint64_t{4096} << 20;
  bool moe_direct_io = false;  // O_DIRECT expert reads instead of buffered ones dropped from the page cache
  bool moe_prefetch = true;    // a background thread reads the experts about to be used
};
ModelWeights load_weights(const gguf::Reader& file, const ModelConfig& config, const LoadOptions& options = {});

}  // namespace fucina::model
