#pragma once
// Deterministic synthetic qwen3-shaped GGUF models for the quantize goldens.
//
// Note [Synthetic quantize inputs]
// The goldens in tests/data/quantize/goldens.json hash llama-quantize's output for these
// exact bytes (tools/dev/quantize_goldens/ writes them with write_synth and runs the peer),
// so any change here must regenerate the goldens; the recorded input_sha256 catches it.
// Values come from integer arithmetic and single float operations only (no libm), so every
// platform and compiler produces the same file. The first model's row lengths are all
// multiples of 256 (every K-quant path); the second has a 160-wide FFN (fits 32-blocks, not
// 256), so the fallback types run too.
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fucina/gguf/writer.hpp"
#include "fucina/quant/fp16.hpp"

namespace fucina::test {

struct SynthSpec {
  std::string name;
  int layers = 8;
  int hidden = 256;
  int heads = 4;
  int kv_heads = 1;
  int head_dim = 64;
  int ffn = 256;
  int vocab = 256;
  bool tied = false;  // no output.weight: token_embd doubles as the output projection
  bool f32 = false;   // weights in f32 instead of f16 (norms are always f32)
  std::uint64_t seed = 1;
};

// The models the goldens cover: an 8-layer f16 model (every use_more_bits layer pattern,
// n_gqa 4) and a 2-layer f32 model with tied embeddings and fallbacks.
inline std::vector<SynthSpec> synth_specs() {
  SynthSpec a;
  a.name = "synth-qwen3-l8-f16";
  SynthSpec b;
  b.name = "synth-qwen3-l2-tied-f32";
  b.layers = 2;
  b.heads = 2;
  b.kv_heads = 2;
  b.head_dim = 128;
  b.ffn = 160;
  b.vocab = 128;
  b.tied = true;
  b.f32 = true;
  b.seed = 2;
  return {a, b};
}

class SynthRng {
 public:
  explicit SynthRng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1), exactly representable (24 random bits).
  float uniform() { return static_cast<float>(static_cast<std::int32_t>(next() >> 40) - (1 << 23)) * 0x1p-23f; }
  // Roughly normal (Irwin-Hall of 4 uniforms), with a rare large outlier to stress the
  // scale searches of the K-quants.
  float normal() {
    float s = uniform() + uniform();
    s = s + uniform();
    s = s + uniform();
    if (next() % 97 == 0) s = s * 8.0f;
    return s;
  }

 private:
  std::uint64_t s_;
};

// Builds the whole file in memory.
inline std::vector<std::byte> make_synth_model(const SynthSpec& sp) {
  using gguf::GgmlType;
  SynthRng rng(sp.seed);
  std::vector<std::vector<std::byte>> store;  // tensor bytes, alive until to_bytes()
  gguf::Writer w;
  w.set_string("general.architecture", "qwen3");
  w.set_string("general.name", sp.name);
  w.set_u32("qwen3.context_length", 256);
  w.set_u32("qwen3.embedding_length", static_cast<std::uint32_t>(sp.hidden));
  w.set_u32("qwen3.block_count", static_cast<std::uint32_t>(sp.layers));
  w.set_u32("qwen3.feed_forward_length", static_cast<std::uint32_t>(sp.ffn));
  w.set_u32("qwen3.attention.head_count", static_cast<std::uint32_t>(sp.heads));
  w.set_u32("qwen3.attention.head_count_kv", static_cast<std::uint32_t>(sp.kv_heads));
  w.set_u32("qwen3.attention.key_length", static_cast<std::uint32_t>(sp.head_dim));
  w.set_u32("qwen3.attention.value_length", static_cast<std::uint32_t>(sp.head_dim));
  w.set_f32("qwen3.rope.freq_base", 1000000.0f);
  w.set_f32("qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32("general.file_type", sp.f32 ? 0u : 1u);

  auto add = [&](const std::string& name, std::int64_t cols, std::int64_t rows, float scale, bool norm) {
    const std::int64_t n = cols * rows;
    const bool half = !norm && !sp.f32;
    std::vector<std::byte> bytes(static_cast<std::size_t>(n) * (half ? 2 : 4));
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = norm ? 1.0f + 0.125f * rng.uniform() : scale * rng.normal();
      if (half) {
        const std::uint16_t h = quant::fp32_to_fp16(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      } else {
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      }
    }
    const std::array<std::int64_t, 2> ne{cols, rows};
    store.push_back(std::move(bytes));
    w.add_tensor(name, half ? GgmlType::F16 : GgmlType::F32,
                 std::span<const std::int64_t>(ne.data(), norm ? 1 : 2), store.back());
  };
  const std::int64_t h = sp.hidden, q = sp.heads * sp.head_dim, kv = sp.kv_heads * sp.head_dim;
  // gguf-py's order: embeddings, the blocks, then the final norm and output.
  add("token_embd.weight", h, sp.vocab, sp.tied ? 0.0625f : 0.5f, false);
  for (int l = 0; l < sp.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", h, 1, 0, true);
    add(b + "attn_q.weight", h, q, 0.03125f, false);
    add(b + "attn_k.weight", h, kv, 0.03125f, false);
    add(b + "attn_v.weight", h, kv, 0.03125f, false);
    add(b + "attn_output.weight", q, h, 0.03125f, false);
    add(b + "attn_q_norm.weight", sp.head_dim, 1, 0, true);
    add(b + "attn_k_norm.weight", sp.head_dim, 1, 0, true);
    add(b + "ffn_norm.weight", h, 1, 0, true);
    add(b + "ffn_gate.weight", h, sp.ffn, 0.03125f, false);
    add(b + "ffn_up.weight", h, sp.ffn, 0.03125f, false);
    add(b + "ffn_down.weight", sp.ffn, h, 0.03125f, false);
  }
  add("output_norm.weight", h, 1, 0, true);
  if (!sp.tied) add("output.weight", h, sp.vocab, 0.03125f, false);
  return w.to_bytes();
}

}  // namespace fucina::test
