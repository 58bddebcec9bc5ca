#include "fucina/model/weights.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fucina/core/buffer.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/quant/packed.hpp"
#include "fucina/quant/vec_dot.hpp"

#include <cstring>
#include <optional>

namespace fucina::model {

namespace {

// Resolves tensors by name, remembering every missing one so the error lists them all.
class Loader {
 public:
  Loader(const gguf::Reader& f, const LoadOptions& options) : f_(f), options_(options) {}

  // The tensor as a RawTensor of shape `shape` (outermost first), borrowed from the mmap.
  // Returns an empty RawTensor when absent (recorded when required).
  RawTensor raw(const std::string& name, std::initializer_list<std::int64_t> shape, bool required = true) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t) {
      if (required) missing_.push_back(name);
      return {};
    }
    const int rank = static_cast<int>(shape.size());
    Dims want{};
    int i = 0;
    for (auto s : shape) want[i++] = s;
    bool ok = static_cast<int>(t->n_dims) <= rank;
    for (int d = 0; d < 4 && ok; ++d) {
      const std::int64_t expect = d < rank ? want[rank - 1 - d] : 1;
      ok = t->ne[static_cast<std::size_t>(d)] == expect;
    }
    FUCINA_CHECK(ok, InvalidFile, "[model] tensor '{}' has shape [{}] (ggml order), expected [{}]", name,
                 fmt::join(t->shape(), ", "), fmt::join(std::vector<std::int64_t>(shape.begin(), shape.end()) , ", "));
    DType dt;
    if (t->type == gguf::GgmlType::F32) dt = DType::f32;
    else if (t->type == gguf::GgmlType::F16) dt = DType::f16;
    else
      fail(ErrorCode::Unsupported, fmt::format("[model] tensor '{}' has type {}: only f32/f16 {} are supported", name,
                                               gguf::to_string(t->type), rank == 2 ? "here" : "norms and expert stacks"));
    const gguf::Bytes bytes = f_.tensor_data(*t);
    RawTensor r;
    // The mapping is read-only; inference never writes through weight tensors.
    r.buf = borrow_buffer(const_cast<std::byte*>(bytes.data()), bytes.size());
    r.dtype = dt;
    r.rank = rank;
    r.shape = want;
    r.strides = contiguous_strides(want, rank);
    return r;
  }

  // A weight in a ggml block format with a dot kernel, borrowed, as one QuantMatrix of
  // n * out rows (n experts stacked; n = 0 for a plain 2-D matrix); nullopt for f32/f16
  // (or when absent).
  std::optional<QuantMatrix> quantized_rows(const std::string& name, std::int64_t n, std::int64_t out, std::int64_t in) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t || t->type == gguf::GgmlType::F32 || t->type == gguf::GgmlType::F16) return std::nullopt;
    const auto traits = quant::find_codec_traits(static_cast<std::uint32_t>(t->type));
    const bool bf16 = t->type == gguf::GgmlType::BF16;  // read by matmul_quant's bf16 arm
    if (!traits || (!bf16 && (traits->block_size <= 1 || !quant::dot_kernel(quant::best_dot_arm(), traits->type))))
      return std::nullopt;
    const bool shape_ok = n == 0 ? t->n_dims == 2 && t->ne[0] == in && t->ne[1] == out
                                 : t->n_dims == 3 && t->ne[0] == in && t->ne[1] == out && t->ne[2] == n;
    FUCINA_CHECK(shape_ok, InvalidFile, "[model] tensor '{}' has shape [{}] (ggml order), expected [{}, {}{}]", name,
                 fmt::join(t->shape(), ", "), in, out, n == 0 ? std::string() : fmt::format(", {}", n));
    const gguf::Bytes bytes = f_.tensor_data(*t);
    QuantMatrix q;
    q.owner = borrow_buffer(const_cast<std::byte*>(bytes.data()), bytes.size());
    q.data = bytes.data();
    q.type = traits->type;
    q.rows = std::max<std::int64_t>(n, 1) * out;
    q.cols = in;
    q.row_bytes = quant::row_bytes(traits->type, in);
    q.fast_prefill = options_.fast_prefill;
    FUCINA_CHECK(q.row_bytes * q.rows == static_cast<std::int64_t>(bytes.size()), InvalidFile,
                 "[model] tensor '{}' holds {} bytes, {} rows of {} expected", name, bytes.size(), q.rows, q.row_bytes);
    return q;
  }

  // The matrix copied into 2 MiB-aligned huge-page memory and the file's pages released:
  // streaming it through 2 MiB pages instead of 4 KiB page-cache pages ran F16 decode 7%
  // and prompts 4% faster (docs/BENCHMARK.md, session 4). RSS stays one copy.
  RawTensor copy_to_huge_pages(RawTensor r) {
    const std::size_t bytes = static_cast<std::size_t>(r.numel()) * dtype_size(r.dtype);
    auto holder = new std::shared_ptr<std::byte>(arena_.allocate(bytes));
    std::byte* dst = holder->get();
    const std::byte* src = r.buf.bytes();
    const std::size_t chunk = std::size_t{1} << 20;
    const auto n = static_cast<std::int64_t>((bytes + chunk - 1) / chunk);
    pool_.parallel_for(n, [&](std::int64_t i) {
      const std::size_t off = static_cast<std::size_t>(i) * chunk;
      std::memcpy(dst + off, src + off, std::min(chunk, bytes - off));
    });
    f_.release_pages({src, bytes});
    r.buf = borrow_buffer(dst, bytes, [](void* u) { delete static_cast<std::shared_ptr<std::byte>*>(u); }, holder);
    return r;
  }

  template <TagName Out, TagName In>
  // pack: the matrix is multiplied (not only gathered from), so repacking pays.
  Weight<Out, In> matrix(const std::string& name, std::int64_t out, std::int64_t in, bool required = true, bool pack = true) {
    if (auto q = quantized_rows(name, 0, out, in)) {
      if (pack && options_.repack && quant::packed_fast_arm_compiled() && quant::packable(q->type, q->cols)) {
        q->packed = std::make_shared<const quant::PackedMatrix>(
            quant::pack_matrix(q->type, q->data, q->rows, q->cols, q->row_bytes, &pool_, &arena_));
        f_.release_pages({q->data, static_cast<std::size_t>(q->rows * q->row_bytes)});
      }
      return Weight<Out, In>(std::move(*q));
    }
    RawTensor r = raw(name, {out, in}, required);
    if (!r.buf) return {};
    if (options_.repack) r = copy_to_huge_pages(std::move(r));
    if (r.dtype == DType::f16) return Weight<Out, In>(TensorT<DType::f16, Out, In>(std::move(r)));
    return Weight<Out, In>(TensorT<DType::f32, Out, In>(std::move(r)));
  }

  // A routed-expert stack borrowed from the mapping; checked only (left empty) when the
  // experts are streamed.
  template <TagName Out, TagName In>
  ExpertWeights<Out, In> experts(const std::string& name, std::int64_t n, std::int64_t out, std::int64_t in) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t) {
      missing_.push_back(name);
      return {};
    }
    (void)check_expert_stack(*t, n, out, in);
    if (options_.moe_stream) return {};
    const gguf::Bytes bytes = f_.tensor_data(*t);
    return expert_stack<Out, In>(*t, borrow_buffer(const_cast<std::byte*>(bytes.data()), bytes.size()), bytes.data(), n,
                                 out, in, options_.fast_prefill);
  }

  template <TagName T>
  Tensor<T> vector(Context& ctx, const std::string& name, std::int64_t n) {
    RawTensor r = raw(name, {n});
    if (!r.buf) return {};
    if (r.dtype == DType::f32) return Tensor<T>(std::move(r));
    return TensorT<DType::f16, T>(std::move(r)).template to<DType::f32>(ctx);
  }

  void finish() const {
    FUCINA_CHECK(missing_.empty(), InvalidFile, "[model] missing {} tensor(s): {}", missing_.size(),
                 fmt::join(missing_, ", "));
  }

 private:
  const gguf::Reader& f_;
  LoadOptions options_;
  ThreadPool pool_;  // packs the matrices
  quant::PackedArena arena_;
  std::vector<std::string> missing_;
};

}  // namespace

std::uint64_t check_expert_stack(const gguf::TensorInfo& t, std::int64_t n, std::int64_t out, std::int64_t in) {
  FUCINA_CHECK(t.n_dims == 3 && t.ne[0] == in && t.ne[1] == out && t.ne[2] == n, InvalidFile,
               "[model] tensor '{}' has shape [{}] (ggml order), expected [{}, {}, {}]", t.name, fmt::join(t.shape(), ", "),
               in, out, n);
  if (t.type != gguf::GgmlType::F32 && t.type != gguf::GgmlType::F16) {
    const auto traits = quant::find_codec_traits(static_cast<std::uint32_t>(t.type));
    const bool bf16 = t.type == gguf::GgmlType::BF16;  // read by matmul_quant's bf16 arm
    FUCINA_CHECK(traits && (bf16 || (traits->block_size > 1 && quant::dot_kernel(quant::best_dot_arm(), traits->type))),
                 Unsupported, "[model] tensor '{}' has type {}: no product kernel for it", t.name, gguf::to_string(t.type));
  }
  return t.size_bytes / static_cast<std::uint64_t>(n);
}

namespace detail {
StackView stack_view(const gguf::TensorInfo& t, BufferRef owner, const std::byte* data, std::int64_t n, std::int64_t out,
                     std::int64_t in, bool fast_prefill) {
  StackView v;
  if (t.type == gguf::GgmlType::F32 || t.type == gguf::GgmlType::F16) {
    const Dims shape{n, out, in};
    FUCINA_ASSERT(owner.bytes() == data);
    // Read-only memory (the mapping, the expert cache): inference never writes through weights.
    v.raw.buf = std::move(owner);
    v.raw.dtype = t.type == gguf::GgmlType::F32 ? DType::f32 : DType::f16;
    v.raw.rank = 3;
    v.raw.shape = shape;
    v.raw.strides = contiguous_strides(shape, 3);
    return v;
  }
  const auto traits = quant::find_codec_traits(static_cast<std::uint32_t>(t.type));
  v.quant.owner = std::move(owner);
  v.quant.data = data;
  v.quant.type = traits->type;
  v.quant.rows = n * out;
  v.quant.cols = in;
  v.quant.row_bytes = quant::row_bytes(traits->type, in);
  v.quant.fast_prefill = fast_prefill;
  return v;
}
}  // namespace detail

ModelWeights load_weights(const gguf::Reader& file, const ModelConfig& c, const LoadOptions& options) {
  Context ctx({.threads = 1});  // only converts the odd f16 norm vector
  Loader ld(file, options);
  ModelWeights w;
  // An untied token table is only gathered from: no packing.
  const bool tied_in_file = file.find_tensor("output.weight") == nullptr;
  w.tok_embd = ld.matrix<"vocab", "embd">("token_embd.weight", c.n_vocab, c.n_embd, true, tied_in_file);
  w.output_norm = ld.vector<"embd">(ctx, "output_norm.weight", c.n_embd);
  w.output = ld.matrix<"vocab", "embd">("output.weight", c.n_vocab, c.n_embd, false);
  w.tied = !w.output.defined();
  if (w.tied) w.output = w.tok_embd;
  FUCINA_CHECK(!file.find_tensor("rope_freqs.weight"), Unsupported, "[model] rope_freqs (Llama 3.1 RoPE scaling) is not supported yet");
  w.layers.resize(static_cast<std::size_t>(c.n_layer));
  for (std::int64_t l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    const std::string b = fmt::format("blk.{}.", l);
    L.attn_norm = ld.vector<"embd">(ctx, b + "attn_norm.weight", c.n_embd);
    L.ffn_norm = ld.vector<"embd">(ctx, b + "ffn_norm.weight", c.n_embd);
    L.wq = ld.matrix<"qd", "embd">(b + "attn_q.weight", c.q_dim(), c.n_embd);
    L.wk = ld.matrix<"kd", "embd">(b + "attn_k.weight", c.kv_dim(), c.n_embd);
    L.wv = ld.matrix<"kd", "embd">(b + "attn_v.weight", c.kv_dim(), c.n_embd);
    L.wo = ld.matrix<"embd", "qd">(b + "attn_output.weight", c.n_embd, c.q_dim());
    FUCINA_CHECK(!file.find_tensor(b + "attn_q.bias"), Unsupported, "[model] attention biases are not supported");
    if (c.qk_norm) {
      L.q_norm = ld.vector<"hd">(ctx, b + "attn_q_norm.weight", c.head_dim);
      L.k_norm = ld.vector<"hd">(ctx, b + "attn_k_norm.weight", c.head_dim);
    }
    if (c.moe) {
      L.router = ld.matrix<"expert", "embd">(b + "ffn_gate_inp.weight", c.n_expert, c.n_embd);
      L.gate_exps = ld.experts<"eff", "embd">(b + "ffn_gate_exps.weight", c.n_expert, c.n_ff_exp, c.n_embd);
      L.up_exps = ld.experts<"eff", "embd">(b + "ffn_up_exps.weight", c.n_expert, c.n_ff_exp, c.n_embd);
      L.down_exps = ld.experts<"embd", "eff">(b + "ffn_down_exps.weight", c.n_expert, c.n_embd, c.n_ff_exp);
    } else {
      L.gate = ld.matrix<"ff", "embd">(b + "ffn_gate.weight", c.n_ff, c.n_embd);
      L.up = ld.matrix<"ff", "embd">(b + "ffn_up.weight", c.n_ff, c.n_embd);
      L.down = ld.matrix<"embd", "ff">(b + "ffn_down.weight", c.n_embd, c.n_ff);
    }
  }
  ld.finish();
  return w;
}

}  // namespace fucina::model
