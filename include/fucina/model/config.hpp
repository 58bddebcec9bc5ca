#pragma once
// Model hyper-parameters read from GGUF metadata (`<arch>.*` keys), for the
// architectures Fucina runs: llama, qwen3, qwen3moe.
//
// Note [Config keys]: head_dim is `<arch>.attention.key_length` when present (Qwen3
// decouples it from hidden/heads), else embedding_length / head_count. n_vocab is the
// length of tokenizer.ggml.tokens, else `<arch>.vocab_size`, else token_embd's rows.
// RoPE pairing follows llama.cpp: adjacent pairs (NORM) for llama, halves (NEOX) for qwen3*.
#include <cstdint>
#include <string>
#include <string_view>

#include "fucina/core/ops/nn.hpp"

namespace fucina::gguf {
class Reader;
}

namespace fucina::model {

enum class Arch { llama, qwen3, qwen3moe };

std::string_view arch_name(Arch a);

struct ModelConfig {
  Arch arch = Arch::llama;
  std::string name;
  std::int64_t n_vocab = 0;
  std::int64_t n_embd = 0;
  std::int64_t n_layer = 0;
  std::int64_t n_head = 0;
  std::int64_t n_head_kv = 0;
  std::int64_t head_dim = 0;
  std::int64_t n_ff = 0;          // dense FFN width (0 for qwen3moe)
  std::int64_t n_expert = 0;      // qwen3moe
  std::int64_t n_expert_used = 0;
  std::int64_t n_ff_exp = 0;      // width of one expert's FFN
  std::int64_t n_ctx_train = 0;   // context length the model was trained for
  float rope_base = 10000.f;
  float rms_eps = 1e-6f;
  RopeMode rope_mode = RopeMode::normal;
  bool qk_norm = false;           // per-head RMSNorm of q and k (qwen3)
  bool moe = false;

  std::int64_t q_dim() const { return n_head * head_dim; }
  std::int64_t kv_dim() const { return n_head_kv * head_dim; }
  std::int64_t group() const { return n_head / n_head_kv; }
};

// Throws Unsupported for an architecture other than llama/qwen3/qwen3moe or a RoPE
// scaling Fucina does not implement, InvalidFile for missing or inconsistent keys.
ModelConfig read_config(const gguf::Reader& file);

}  // namespace fucina::model
