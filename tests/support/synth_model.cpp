#include "support/synth_model.hpp"

#include <unistd.h>

namespace fucina::test {

model::SynthSpec small_spec(const char* arch, std::int64_t embd, std::int64_t heads, std::int64_t kv_heads, DType dtype,
                            bool tied) {
  model::SynthSpec s;
  s.arch = arch, s.n_embd = embd, s.n_layer = 2, s.n_head = heads, s.n_head_kv = kv_heads, s.n_ff = 128;
  s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 32;
  s.dtype = dtype, s.tied = tied, s.seed = static_cast<std::uint64_t>(embd + heads);
  return s;
}

std::vector<SynthCase> every_format_cases() {
  return {
      {"llama_f32", small_spec("llama", 64, 4, 2, DType::f32, false)},
      {"llama_f16", small_spec("llama", 64, 4, 2, DType::f16, false)},
      {"llama_bf16", small_spec("llama", 64, 4, 2, DType::bf16, false)},
      {"qwen3_f16_tied", small_spec("qwen3", 256, 4, 1, DType::f16, true)},
      {"qwen3_q8_0", small_spec("qwen3", 256, 4, 1, DType::f32, false), quant::FileType::MostlyQ8_0},
      {"qwen3_q4_k", small_spec("qwen3", 256, 4, 1, DType::f32, false), quant::FileType::MostlyQ4_K_M},
      {"qwen3moe_f16", small_spec("qwen3moe", 64, 4, 2, DType::f16, false)},
      {"qwen3moe_f32", small_spec("qwen3moe", 64, 4, 2, DType::f32, false)},
  };
}

std::vector<std::int32_t> pattern_tokens(std::int64_t n, std::int64_t vocab, std::int32_t salt) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    t[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 37 + salt * 11 + 5) % vocab);
  return t;
}

std::filesystem::path make_synth_model(const SynthCase& c, const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string stem = "fucina_" + tag + "_" + c.name + "_" + std::to_string(::getpid());
  const auto base = dir / (stem + ".gguf");
  model::write_synthetic_model(base, c.spec);
  if (c.quant == quant::FileType::AllF32) return base;
  const auto q = dir / (stem + "_q.gguf");
  quant::quantize_model(base, q, {.ftype = c.quant, .n_threads = 2});
  std::filesystem::remove(base);
  return q;
}

}  // namespace fucina::test
