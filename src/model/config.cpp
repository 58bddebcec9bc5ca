#include "fucina/model/config.hpp"

#include <fmt/format.h>

#include "fucina/core/error.hpp"
#include "fucina/gguf/reader.hpp"

namespace fucina::model {

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::llama: return "llama";
    case Arch::qwen3: return "qwen3";
    case Arch::qwen3moe: return "qwen3moe";
  }
  return "?";
}

namespace {

struct Keys {
  const gguf::Reader& f;
  std::string arch;
  std::string key(std::string_view k) const { return fmt::format("{}.{}", arch, k); }
  std::int64_t req_int(std::string_view k) const {
    const std::string full = key(k);
    FUCINA_CHECK(f.contains(full), InvalidFile, "[model] missing metadata key '{}'", full);
    return f.get_int(full);
  }
  std::int64_t opt_int(std::string_view k, std::int64_t def) const {
    const std::string full = key(k);
    return f.contains(full) ? f.get_int(full) : def;
  }
  double opt_num(std::string_view k, double def) const {
    const std::string full = key(k);
    return f.contains(full) ? f.get_number(full) : def;
  }
};

}  // namespace

ModelConfig read_config(const gguf::Reader& file) {
  FUCINA_CHECK(file.contains("general.architecture"), InvalidFile, "[model] missing metadata key 'general.architecture'");
  const std::string arch(file.get_string("general.architecture"));
  ModelConfig c;
  if (arch == "llama") c.arch = Arch::llama;
  else if (arch == "qwen3") c.arch = Arch::qwen3;
  else if (arch == "qwen3moe") c.arch = Arch::qwen3moe;
  else
    fail(ErrorCode::Unsupported,
         fmt::format("[model] architecture '{}' is not supported (supported: llama, qwen3, qwen3moe)",
                     gguf::printable(arch)));
  if (file.contains("general.name")) c.name = std::string(file.get_string("general.name"));
  const Keys k{file, arch};
  c.n_embd = k.req_int("embedding_length");
  c.n_layer = k.req_int("block_count");
  c.n_head = k.req_int("attention.head_count");
  c.n_head_kv = k.opt_int("attention.head_count_kv", c.n_head);
  c.n_ctx_train = k.req_int("context_length");
  FUCINA_CHECK(c.n_embd > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_head_kv > 0 && c.n_ctx_train > 0, InvalidFile,
               "[model] non-positive size in metadata (embd {}, layers {}, heads {}/{}, ctx {})", c.n_embd, c.n_layer,
               c.n_head, c.n_head_kv, c.n_ctx_train);
  // Every layer has its own tensors: a block_count the file cannot back is a broken file,
  // refused before anything is sized by it.
  FUCINA_CHECK(static_cast<std::uint64_t>(c.n_layer) <= file.tensors().size(), InvalidFile,
               "[model] block_count {} is more layers than the file's {} tensors can hold", c.n_layer,
               file.tensors().size());
  FUCINA_CHECK(c.n_head % c.n_head_kv == 0, InvalidFile, "[model] head_count {} is not a multiple of head_count_kv {}",
               c.n_head, c.n_head_kv);
  c.head_dim = k.opt_int("attention.key_length", c.n_embd / c.n_head);
  const std::int64_t v_len = k.opt_int("attention.value_length", c.head_dim);
  FUCINA_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0 && v_len == c.head_dim, Unsupported,
               "[model] head dims k={} v={} (need equal and even)", c.head_dim, v_len);
  const std::int64_t rot = k.opt_int("rope.dimension_count", c.head_dim);
  FUCINA_CHECK(rot == c.head_dim, Unsupported, "[model] partial RoPE (rope.dimension_count {} < head_dim {})", rot,
               c.head_dim);
  c.rope_base = static_cast<float>(k.opt_num("rope.freq_base", 10000.0));
  c.rms_eps = static_cast<float>(k.opt_num("attention.layer_norm_rms_epsilon", 1e-5));
  if (file.contains(k.key("rope.scaling.type"))) {
    const std::string_view t = file.get_string(k.key("rope.scaling.type"));
    FUCINA_CHECK(t == "none", Unsupported, "[model] RoPE scaling '{}' is not supported", t);
  }
  const double fscale = k.opt_num("rope.scaling.factor", 1.0);
  FUCINA_CHECK(fscale == 1.0 || fscale == 0.0, Unsupported, "[model] RoPE scaling factor {} is not supported", fscale);
  FUCINA_CHECK(!file.contains(k.key("attention.scale")), Unsupported, "[model] a custom attention.scale is not supported");

  if (file.contains("tokenizer.ggml.tokens")) c.n_vocab = static_cast<std::int64_t>(file.get_array_view("tokenizer.ggml.tokens").size());
  else c.n_vocab = k.opt_int("vocab_size", 0);
  if (c.n_vocab == 0)
    if (const auto* t = file.find_tensor("token_embd.weight")) c.n_vocab = t->ne[1];
  FUCINA_CHECK(c.n_vocab > 0, InvalidFile, "[model] cannot tell the vocabulary size");

  c.qk_norm = c.arch != Arch::llama;
  c.rope_mode = c.arch == Arch::llama ? RopeMode::normal : RopeMode::neox;
  if (c.arch == Arch::qwen3moe) {
    c.moe = true;
    c.n_expert = k.req_int("expert_count");
    c.n_expert_used = k.req_int("expert_used_count");
    FUCINA_CHECK(c.n_expert > 0 && c.n_expert_used > 0 && c.n_expert_used <= c.n_expert, InvalidFile,
                 "[model] expert_used_count {} must be in 1..expert_count {}", c.n_expert_used, c.n_expert);
    c.n_ff = k.opt_int("feed_forward_length", 0);
    c.n_ff_exp = k.opt_int("expert_feed_forward_length", c.n_ff / c.n_expert_used);
    FUCINA_CHECK(c.n_ff_exp > 0, InvalidFile, "[model] missing expert_feed_forward_length");
  } else {
    c.n_ff = k.req_int("feed_forward_length");
    FUCINA_CHECK(c.n_ff > 0, InvalidFile, "[model] feed_forward_length must be positive");
    FUCINA_CHECK(k.opt_int("expert_count", 0) == 0, Unsupported, "[model] {} with experts (Mixtral-style) is not supported",
                 arch);
  }
  return c;
}

}  // namespace fucina::model
