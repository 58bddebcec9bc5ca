#pragma once
// Random-weight GGUF models of the architectures Fucina runs (llama, qwen3, qwen3moe), for
// trying the CLI and benchmarking at real shapes without a trained model.
//
// Note [Synthetic models]: the file mirrors ../shared/models/synth_gguf.py: the same
// metadata keys in the same order, the same tensor names, shapes, order and types
// (matrices in `dtype`, norms and the MoE router f32), and the same statistics: matrices
// N(0, std^2) with std = 1/sqrt(n_embd) unless given, norms 1 + 0.1 N(0,1), the router
// N(0, 0.25), token embeddings N(0,1) (0.1 std when the output is tied to them). Values
// are not numpy's: tensor t draws element i of synth_normals(rng::bits(seed, t)), so the
// bytes are a pure function of the spec, whatever the thread count. The tokenizer is every
// tokenizer.* key of `vocab_from`, or a built-in SPM byte vocabulary (Note [Built-in vocab]).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "fucina/core/dtype.hpp"

namespace fucina {
class ThreadPool;
}

namespace fucina::model {

struct SynthSpec {
  std::string arch = "qwen3";  // llama | qwen3 | qwen3moe
  std::int64_t n_embd = 64, n_layer = 2, n_head = 4, n_head_kv = 2, head_dim = 0 /*0: n_embd/n_head*/, n_ff = 172,
               n_expert = 8, n_expert_used = 2, n_ff_exp = 64, n_ctx = 512;
  float rope_base = 10000.f, rms_eps = 1e-6f, std = 0.f /*0: 1/sqrt(n_embd)*/;
  bool tied = false;
  DType dtype = DType::f32;  // f32 | f16 | bf16 for matrices; norms f32
  // qwen3moe: the routed experts as random Q4_K blocks (uniform 4-bit values, the matrices'
  // std), written at disk speed: MoE files larger than memory for --moe-stream benchmarks.
  bool q4_k_experts = false;
  std::uint64_t seed = 0;
  std::filesystem::path vocab_from;  // GGUF whose tokenizer.* metadata is copied; empty = built-in byte vocab
};

// Throws InvalidArgument naming the first impossible field (heads not dividing, sizes out
// of range, unknown arch or dtype); does not touch the file system.
void check_synth_spec(const SynthSpec& spec);

// Values first .. first + out.size() - 1 of a standard normal stream: pair k = elements
// 2k, 2k+1 is Box-Muller on rng::bits(seed, k) in float arithmetic with its own log/sin/cos
// polynomials (no libm: the same bits on every platform; vectorizes, ~30x rng::normal's speed).
void synth_normals(std::uint64_t seed, std::uint64_t first, std::span<float> out);

// head_dim with the default resolved (n_embd / n_head when 0).
std::int64_t synth_head_dim(const SynthSpec& spec);

// Writes the model to `out` through an AtomicFile (checked first, replaced only once
// complete), streaming one tensor chunk at a time and generating each chunk on all cores. Throws InvalidArgument (check_synth_spec), Io, or
// InvalidFile when `vocab_from` is unreadable or has no tokenizer.ggml.tokens.
void write_synthetic_model(const std::filesystem::path& out, const SynthSpec& spec);
// The same, generating on `pool` (the bytes do not depend on its size).
void write_synthetic_model(const std::filesystem::path& out, const SynthSpec& spec, ThreadPool& pool);

// Note [Built-in vocab]: an SPM ("llama" tokenizer model) vocabulary of <unk>, <s>, </s>,
// the 256 byte tokens <0x00>..<0xFF> and one token per printable ASCII character (space as
// U+2581), scores decreasing; llama.cpp and Fucina's tokenizer both load it, and any text
// encodes (bytes outside it fall back to the byte tokens).
inline constexpr std::int64_t builtin_vocab_size = 3 + 256 + 95;

}  // namespace fucina::model
