#pragma once
// Merging LoRA adapters into a base model: what `fucina export-lora` does.
//
// Note [LoRA merge]
// llama.cpp's llama-export-lora (tools/export-lora/export-lora.cpp) computes, per adapted
// tensor, in ggml: W' = W + s_1 (B_1 A_1) + s_2 (B_2 A_2) + ... in f32 (W dequantized with
// its type's to_float; B A = ggml_mul_mat(cont(transpose(A)), B), so each element is one
// ggml dot over the rank in the order Note [ggml summation order] describes; then
// ggml_scale, then ggml_add(delta, W), one rounding each) and casts W' to f16 (f32 stays
// f32). merge_lora_tensor reproduces that arithmetic bit for bit. The file differs on
// purpose: a merged tensor goes back to its base tensor's type (a Q4_K base stays Q4_K,
// re-encoded with ggml's reference encoder; llama-export-lora writes f16 for every non-f32
// type), general.file_type is kept (llama.cpp sets it to MOSTLY_F16 even for f32 models),
// and tensors keep the base's order (llama.cpp sorts them by name). With `type` set, the
// merged model is then converted like `fucina quantize TYPE --allow-requantize` (mix
// rules, general.file_type). Adapters may adapt different subsets of the tensors
// (llama-export-lora refuses that).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include "fucina/core/thread_pool.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/model/lora.hpp"
#include "fucina/quant/quantize_model.hpp"

namespace fucina::model {

struct ScaledLora {
  LoraAdapter adapter;
  float user_scale = 1.0f;  // --lora: 1, --lora-scaled: the given scale
};

// The f32 values of base tensor `t` ([n_out][n_in] row-major) with every adapter that
// adapts it added, in adapter order (Note [LoRA merge]).
std::vector<float> merge_lora_tensor(ThreadPool& pool, const gguf::Reader& base, const gguf::TensorInfo& t,
                                     std::span<const ScaledLora> adapters);

struct LoraMergeOptions {
  std::optional<quant::QuantizeTarget> type;  // convert the merged model; nullopt: keep every tensor's type
  int n_threads = 0;                          // 0: all hardware threads
};

struct LoraMergeStats {
  std::size_t n_tensors = 0, n_merged = 0;
  std::uint64_t bytes_out = 0;
};

// Reads `base`, checks every adapter against it (check_lora_matches), writes the merged
// model to `out` through an AtomicFile (`out` is checked first and must be neither `base`
// nor one of `adapter_paths`, the files `adapters` were read from; replaced only once
// complete).
LoraMergeStats export_lora(const std::filesystem::path& base, std::span<const std::filesystem::path> adapter_paths,
                           std::span<const ScaledLora> adapters, const std::filesystem::path& out,
                           const LoraMergeOptions& options);

}  // namespace fucina::model
