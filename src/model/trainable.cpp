#include "fucina/model/trainable.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "fucina/core/half.hpp"
#include "fucina/core/rng.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/quant/traits.hpp"

namespace fucina::model {

optim::ParamRef param_ref(const Trainable& t) {
  optim::ParamRef p;
  p.name = t.name;
  p.value = {t.value.data<float>(), static_cast<std::size_t>(t.value.numel())};
  if (const RawTensor g = t.leaf->grad(); g.buf) p.grad = {g.data<float>(), static_cast<std::size_t>(g.numel())};
  p.shape.assign(t.value.sizes().begin(), t.value.sizes().end());
  return p;
}

void zero_grads(std::span<const Trainable> params) {
  for (const Trainable& t : params) t.leaf->set_grad({});
}

namespace {

template <AnyTensor T>
Trainable leaf_of(std::string name, const T& var) {
  return Trainable{std::move(name), var.raw(), var.node()};
}

// Calls fn(name, weight) for the matrix short name t (lora_targets) of block b ("blk.N.").
template <class F>
void for_each_target(LayerWeights& L, const std::string& b, std::string_view t, F&& fn) {
  const auto* target = std::find_if(std::begin(lora_targets), std::end(lora_targets), [&](const LoraTarget& x) { return x.name == t; });
  FUCINA_ASSERT(target != std::end(lora_targets));
  const std::string name = fmt::format("{}{}.weight", b, target->tensor);
  if (t == "q") fn(name, L.wq);
  if (t == "k") fn(name, L.wk);
  if (t == "v") fn(name, L.wv);
  if (t == "o") fn(name, L.wo);
  if (t == "gate") fn(name, L.gate);
  if (t == "up") fn(name, L.up);
  if (t == "down") fn(name, L.down);
}

// The f32 copy of a stored matrix [rows, cols].
RawTensor widened(Context& ctx, const WeightRows& src) {
  Dims shape{};
  shape[0] = src.rows(), shape[1] = src.cols();
  RawTensor out = ctx.empty(DType::f32, 2, shape);
  ctx.pool().parallel_range(src.rows(), 16, [&](std::int64_t b, std::int64_t e) {
    src.decode(b, e - b, out.data<float>() + b * src.cols());
  });
  return out;
}

template <TagName Out, TagName In>
void make_matrix_trainable(Context& ctx, const std::string& name, Weight<Out, In>& w, std::vector<Trainable>& out) {
  if (!w.defined()) return;
  FUCINA_CHECK(!w.is_quant() || w.quant().type == quant::QuantType::BF16, Unsupported,
               "[finetune] '{}' is {}: full training needs f32, f16 or BF16 weights; train a LoRA (--lora) on a "
               "quantized model",
               name, quant::codec_traits(w.quant().type).name);
  auto var = TensorT<DType::f32, Out, In>(widened(ctx, w.rows_source())).variable();
  w = Weight<Out, In>(var, w.order());
  out.push_back(leaf_of(name, var));
}

template <TagName Out, TagName In>
void make_experts_trainable(Context& ctx, const std::string& name, ExpertWeights<Out, In>& w, std::vector<Trainable>& out) {
  if (!w.defined()) return;
  const std::int64_t n = w.n_expert();
  std::vector<RawTensor> parts;
  std::int64_t rows = 0, cols = 0;
  for (std::int64_t e = 0; e < n; ++e) {
    const Weight<Out, In> m = w.expert(e);
    FUCINA_CHECK(!m.is_quant(), Unsupported, "[finetune] '{}' is quantized: train a LoRA (--lora) on a quantized model", name);
    parts.push_back(widened(ctx, m.rows_source()));
    rows = parts.back().shape[0], cols = parts.back().shape[1];
  }
  Dims shape{};
  shape[0] = n, shape[1] = rows, shape[2] = cols;
  RawTensor stack = ctx.empty(DType::f32, 3, shape);
  for (std::int64_t e = 0; e < n; ++e)
    std::copy_n(parts[static_cast<std::size_t>(e)].data<float>(), rows * cols, stack.data<float>() + e * rows * cols);
  auto var = TensorT<DType::f32, "expert", Out, In>(stack).variable();
  w = ExpertWeights<Out, In>(var);
  out.push_back(leaf_of(name, var));
}

template <TagName T>
void make_vector_trainable(Context& ctx, const std::string& name, Tensor<T>& v, std::vector<Trainable>& out) {
  if (!v.defined()) return;
  v = clone(ctx, v.detach()).variable();
  out.push_back(leaf_of(name, v));
}

}  // namespace

std::vector<Trainable> attach_lora(Context& ctx, ModelWeights& w, const ModelConfig& c, const LoraSpec& spec) {
  FUCINA_CHECK(!spec.targets.empty(), InvalidArgument, "[lora] no target matrices");
  FUCINA_CHECK(spec.rank > 0, InvalidArgument, "[lora] rank must be positive, got {}", spec.rank);
  FUCINA_CHECK(spec.alpha > 0, InvalidArgument, "[lora] alpha must be positive, got {}", spec.alpha);
  std::vector<Trainable> out;
  std::uint64_t stream = 0;
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    for (const std::string& t : spec.targets) {
      FUCINA_CHECK(!c.moe || t == "q" || t == "k" || t == "v" || t == "o", Unsupported,
                   "[lora] target '{}': LoRA on the experts of a mixture-of-experts model is not supported (use q,k,v,o)", t);
      for_each_target(w.layers[l], b, t, [&](const std::string& name, auto& m) {
        using W = std::remove_reference_t<decltype(m)>;
        const std::int64_t n_out = m.rows(), n_in = m.cols();
        const float bound = 1.f / std::sqrt(static_cast<float>(n_in));
        std::vector<float> a(static_cast<std::size_t>(spec.rank * n_in));
        const std::uint64_t seed = rng::bits(spec.seed, stream++);
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = bound * (2.f * rng::uniform(seed, i) - 1.f);
        auto av = W::LoraA::from_data(ctx, {spec.rank, n_in}, std::span<const float>(a)).variable();
        auto bv = W::LoraB::zeros(ctx, {n_out, spec.rank}).variable();
        m.add_lora({av, bv, spec.alpha / static_cast<float>(spec.rank)});
        out.push_back(leaf_of(name + ".lora_a", av));
        out.push_back(leaf_of(name + ".lora_b", bv));
      });
    }
  }
  return out;
}

std::vector<Trainable> make_trainable(Context& ctx, ModelWeights& w, const ModelConfig& c) {
  (void)c;
  std::vector<Trainable> out;
  make_matrix_trainable(ctx, "token_embd.weight", w.tok_embd, out);
  if (w.tied)
    w.output = w.tok_embd;
  else
    make_matrix_trainable(ctx, "output.weight", w.output, out);
  make_vector_trainable(ctx, "output_norm.weight", w.output_norm, out);
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& L = w.layers[l];
    const std::string b = fmt::format("blk.{}.", l);
    make_vector_trainable(ctx, b + "attn_norm.weight", L.attn_norm, out);
    make_matrix_trainable(ctx, b + "attn_q.weight", L.wq, out);
    make_matrix_trainable(ctx, b + "attn_k.weight", L.wk, out);
    make_matrix_trainable(ctx, b + "attn_v.weight", L.wv, out);
    make_matrix_trainable(ctx, b + "attn_output.weight", L.wo, out);
    make_vector_trainable(ctx, b + "attn_q_norm.weight", L.q_norm, out);
    make_vector_trainable(ctx, b + "attn_k_norm.weight", L.k_norm, out);
    make_vector_trainable(ctx, b + "ffn_norm.weight", L.ffn_norm, out);
    make_matrix_trainable(ctx, b + "ffn_gate.weight", L.gate, out);
    make_matrix_trainable(ctx, b + "ffn_up.weight", L.up, out);
    make_matrix_trainable(ctx, b + "ffn_down.weight", L.down, out);
    make_matrix_trainable(ctx, b + "ffn_gate_inp.weight", L.router, out);
    make_experts_trainable(ctx, b + "ffn_gate_exps.weight", L.gate_exps, out);
    make_experts_trainable(ctx, b + "ffn_up_exps.weight", L.up_exps, out);
    make_experts_trainable(ctx, b + "ffn_down_exps.weight", L.down_exps, out);
  }
  return out;
}

void apply_lora(Context& ctx, ModelWeights& w, const LoraAdapter& adapter, float user_scale) {
  std::size_t used = 0;
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    for (const LoraTarget& target : lora_targets)
      for_each_target(w.layers[l], b, target.name, [&](const std::string& name, auto& m) {
        using W = std::remove_reference_t<decltype(m)>;
        const LoraMatrix* f = adapter.find(name);
        if (!f || !m.defined()) return;
        FUCINA_CHECK(f->n_in == m.cols() && f->n_out == m.rows(), InvalidFile,
                     "[lora] '{}' adapts a {}x{} matrix, the model's is {}x{}", name, f->n_out, f->n_in, m.rows(), m.cols());
        m.add_lora({W::LoraA::from_data(ctx, {f->rank, f->n_in}, std::span<const float>(f->a)),
                    W::LoraB::from_data(ctx, {f->n_out, f->rank}, std::span<const float>(f->b)),
                    adapter.scale(*f, user_scale)});
        ++used;
      });
  }
  FUCINA_CHECK(used == adapter.matrices.size(), InvalidFile,
               "[lora] the adapter adapts {} matrices, {} of them are attention/FFN matrices of this model",
               adapter.matrices.size(), used);
}

void apply_lora_file(Context& ctx, Model& model, const std::filesystem::path& adapter, float user_scale) {
  const LoraAdapter a = read_lora(adapter);
  check_lora_matches(a, model.file());
  apply_lora(ctx, model.mutable_weights(), a, user_scale);
}

LoraAdapter lora_adapter_of(std::span<const Trainable> params, const std::string& arch, float alpha) {
  LoraAdapter out;
  out.arch = arch;
  out.alpha = alpha;
  for (std::size_t i = 0; i + 1 < params.size(); i += 2) {
    const Trainable &a = params[i], &b = params[i + 1];
    const std::string target = a.name.substr(0, a.name.size() - lora_a_suffix.size());
    FUCINA_ASSERT(a.name.ends_with(lora_a_suffix) && b.name == target + std::string(lora_b_suffix));
    LoraMatrix m;
    m.target = target;
    m.rank = a.value.shape[0], m.n_in = a.value.shape[1], m.n_out = b.value.shape[0];
    m.a.assign(a.value.data<float>(), a.value.data<float>() + a.value.numel());
    m.b.assign(b.value.data<float>(), b.value.data<float>() + b.value.numel());
    out.matrices.push_back(std::move(m));
  }
  return out;
}

void write_trained_model(const std::filesystem::path& out, const gguf::Reader& base, std::span<const Trainable> params) {
  gguf::Writer w = gguf::Writer::from_reader(base);
  std::vector<std::vector<std::byte>> owned;
  for (const Trainable& p : params) {
    const gguf::TensorInfo* t = base.find_tensor(p.name);
    FUCINA_CHECK(t != nullptr, InvalidArgument, "[finetune] the base has no tensor '{}'", p.name);
    const float* v = p.value.data<float>();
    const auto n = static_cast<std::size_t>(p.value.numel());
    std::vector<std::byte> bytes;
    if (t->type == gguf::GgmlType::F32) {
      bytes.resize(n * sizeof(float));
      std::memcpy(bytes.data(), v, bytes.size());
    } else if (t->type == gguf::GgmlType::F16 || t->type == gguf::GgmlType::BF16) {
      std::vector<std::uint16_t> h(n);
      for (std::size_t i = 0; i < n; ++i) h[i] = t->type == gguf::GgmlType::F16 ? float_to_half(v[i]) : float_to_bf16(v[i]);
      bytes.resize(n * sizeof(std::uint16_t));
      std::memcpy(bytes.data(), h.data(), bytes.size());
    } else {
      FUCINA_CHECK(false, Unsupported, "[finetune] cannot write trained '{}' as {}", p.name, gguf::to_string(t->type));
    }
    owned.push_back(std::move(bytes));
    w.set_tensor_data(p.name, owned.back());
  }
  w.write_file(out);
}

}  // namespace fucina::model
