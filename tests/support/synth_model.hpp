#pragma once
// Small synthetic models written for a test (model/synth.hpp), optionally quantized.
#include <filesystem>
#include <string>
#include <vector>

#include "fucina/model/synth.hpp"
#include "fucina/quant/quantize_model.hpp"

namespace fucina::test {

struct SynthCase {
  const char* name;
  model::SynthSpec spec;
  quant::FileType quant = quant::FileType::AllF32;  // AllF32: no quantization
};

// A 2-layer spec with n_ff 128 and 8 experts of 32 (2 used); the seed from the shape.
model::SynthSpec small_spec(const char* arch, std::int64_t embd, std::int64_t heads, std::int64_t kv_heads, DType dtype,
                            bool tied = false);

// llama, qwen3 and qwen3moe in f32, f16, bf16, Q8_0 and Q4_K_M (tied output, GQA 2 and 4).
std::vector<SynthCase> every_format_cases();

// n token ids below vocab, a fixed pattern varied by salt (inputs for forward tests).
std::vector<std::int32_t> pattern_tokens(std::int64_t n, std::int64_t vocab, std::int32_t salt);

// Writes the case's model to a temporary file unique to this process and `tag`; the caller
// removes it.
std::filesystem::path make_synth_model(const SynthCase& c, const std::string& tag);

}  // namespace fucina::test
