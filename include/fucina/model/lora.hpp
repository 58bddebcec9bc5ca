#pragma once
// LoRA adapters in llama.cpp's GGUF adapter format: read, check against a base, write.
//
// Note [LoRA adapter GGUF]
// What llama.cpp's llama_adapter_lora_init_impl (src/llama-adapter.cpp) accepts, and what
// convert_lora_to_gguf.py writes:
//  - metadata: general.type = "adapter", adapter.type = "lora", general.architecture equal
//    to the base model's, adapter.lora.alpha (f32; absent or 0 = no alpha scaling);
//  - tensors in pairs "<base tensor name>.lora_a" / ".lora_b": for a base matrix W with
//    ggml ne = [n_in, n_out] (n_out rows of n_in), lora_a has ne = [n_in, rank] (rank rows
//    of n_in) and lora_b ne = [rank, n_out]; W'x = Wx + scale * B(Ax) with
//    scale = alpha ? user_scale * alpha / rank : user_scale (rank = lora_b's ne[0]);
//  - "*_norm.weight" tensors are skipped (llama.cpp ignores them too); any other name is an
//    error. Token-embedding adapters use a flipped layout (mergekit); Fucina refuses them.
// A, B may be f32, f16 or bf16 on disk; they are f32 in memory and written as f32.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fucina/gguf/reader.hpp"

namespace fucina::model {

// One adapted base matrix W [n_out, n_in]:  W'x = Wx + scale * B(Ax).
struct LoraMatrix {
  std::string target;  // the base tensor's name, e.g. "blk.3.attn_q.weight"
  std::int64_t rank = 0, n_in = 0, n_out = 0;
  std::vector<float> a;  // [rank][n_in] row-major  (GGUF "<target>.lora_a", ggml ne = [n_in, rank])
  std::vector<float> b;  // [n_out][rank] row-major (GGUF "<target>.lora_b", ggml ne = [rank, n_out])
};

struct LoraAdapter {
  std::string arch;   // general.architecture, must equal the base's
  std::string name;   // general.name (optional)
  float alpha = 0;    // adapter.lora.alpha; 0 = none
  std::vector<LoraMatrix> matrices;

  // llama.cpp's llama_adapter_lora_weight::get_scale: alpha ? user_scale * alpha / rank : user_scale
  float scale(const LoraMatrix& m, float user_scale) const;
  const LoraMatrix* find(std::string_view target) const;  // nullptr when not adapted
};

inline constexpr std::string_view lora_a_suffix = ".lora_a";
inline constexpr std::string_view lora_b_suffix = ".lora_b";

// Throws fucina::Error naming the file and the problem: InvalidFile for a file that is not
// a LoRA adapter (general.type, adapter.type), an unpaired lora_a/lora_b, a rank mismatch,
// shapes that are not 2-D, an unexpected tensor name; Unsupported for quantized A/B and
// token-embedding adapters. Matrices come in file order (of a pair's first tensor).
LoraAdapter read_lora(const std::filesystem::path& path);
LoraAdapter read_lora(const gguf::Reader& file, std::string_view what = "adapter");

// Checks the architecture and that every target exists in `base` as a 2-D tensor with
// matching n_in/n_out (InvalidFile naming the tensor).
void check_lora_matches(const LoraAdapter& adapter, const gguf::Reader& base);

// general.architecture, general.type = adapter, general.name (when set), adapter.type =
// lora, adapter.lora.alpha; tensors as f32, lora_a then lora_b per matrix. Through an
// AtomicFile (core/atomic_file.hpp): `out` is replaced only once complete.
void write_lora(const std::filesystem::path& out, const LoraAdapter& adapter);

// The matrices a LoRA may adapt: llama.cpp's short target names and the GGUF tensor each
// names in a block (blk.N.<tensor>.weight).
struct LoraTarget {
  std::string_view name, tensor;
};
inline constexpr LoraTarget lora_targets[] = {{"q", "attn_q"},       {"k", "attn_k"},       {"v", "attn_v"},
                                              {"o", "attn_output"},  {"gate", "ffn_gate"},  {"up", "ffn_up"},
                                              {"down", "ffn_down"}};
// "q,k,v,o" (any subset, comma-separated, duplicates dropped) or "all" -> the short names;
// InvalidArgument naming an unknown one.
std::vector<std::string> parse_lora_targets(std::string_view list);

// "q,k,v,o,gate,up,down" (any subset, comma-separated) -> the base's 2-D tensors
// blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight, in the base's
// order. InvalidArgument for an unknown short name or one that matches no tensor.
std::vector<std::string> lora_target_tensors(const gguf::Reader& base, std::string_view targets);

// A random adapter for tests and parity goldens: A ~ N(0, 1/n_in), B ~ N(0, b_std^2) (a
// trained adapter's B is nonzero; a fresh one's would be 0, which merges to nothing). The
// values are a pure function of the arguments (model::synth_normals).
struct RandomLoraSpec {
  std::string targets = "q,k,v,o";
  std::int64_t rank = 8;
  float alpha = 16;
  float b_std = 0.05f;
  std::uint64_t seed = 0;
};
LoraAdapter random_lora(const gguf::Reader& base, const RandomLoraSpec& spec);

}  // namespace fucina::model
