#pragma once
// What a training run updates (Note [One forward] in model.hpp), named as the GGUF names
// them: LoRA factors attached to chosen matrices ("<matrix>.lora_a" / ".lora_b", the names
// of llama.cpp's adapter files), or every weight of the model as an f32 variable (full
// training; the values are copies, the mapped file is never written).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fucina/autograd/node.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/model/lora.hpp"
#include "fucina/model/model.hpp"
#include "fucina/model/weights.hpp"
#include "fucina/optim/param.hpp"

namespace fucina::model {

struct Trainable {
  std::string name;
  RawTensor value;         // f32, contiguous, updated in place by the optimizer
  autograd::NodeRef leaf;  // the variable's leaf node: its accumulated gradient
};

// The optimizer's view: value, gradient (empty before the first backward), shape.
optim::ParamRef param_ref(const Trainable& t);
// Drops every accumulated gradient (before the next step's backward).
void zero_grads(std::span<const Trainable> params);

struct LoraSpec {
  std::int64_t rank = 8;
  float alpha = 16.f;                                  // scale = alpha / rank
  std::vector<std::string> targets{"q", "k", "v", "o"};  // names of lora_targets (lora.hpp)
  std::uint64_t seed = 0;
};

// Attaches trainable LoRA factors to every targeted matrix of every layer: A uniform in
// ±1/sqrt(n_in) (PEFT's default), B zero, so training starts from the base model.
// Unsupported: FFN targets on a mixture-of-experts model.
std::vector<Trainable> attach_lora(Context& ctx, ModelWeights& w, const ModelConfig& c, const LoraSpec& spec);

// Every matrix and norm as an f32 variable (f16 and BF16 widened). Unsupported for a
// block-quantized matrix, with the advice to train a LoRA instead.
std::vector<Trainable> make_trainable(Context& ctx, ModelWeights& w, const ModelConfig& c);

// Attaches a loaded adapter's factors (constants) to the matching matrices, scaled by
// user_scale as llama.cpp's --lora-scaled (Note [LoRA adapter GGUF]). InvalidFile when a
// target is not a matrix this model adapts.
void apply_lora(Context& ctx, ModelWeights& w, const LoraAdapter& adapter, float user_scale = 1.f);
// read_lora + check_lora_matches + apply_lora: what `--lora FILE` / `--lora-scaled FILE S` do
// (ctx must outlive the model, which holds the factors).
void apply_lora_file(Context& ctx, Model& model, const std::filesystem::path& adapter, float user_scale = 1.f);

// The trained factors of attach_lora() as an adapter (rank and alpha from the spec).
LoraAdapter lora_adapter_of(std::span<const Trainable> params, const std::string& arch, float alpha);

// The base file with each trained tensor replaced by its values in the base tensor's type
// (f32, f16 or BF16), everything else copied; through an AtomicFile.
void write_trained_model(const std::filesystem::path& out, const gguf::Reader& base, std::span<const Trainable> params);

}  // namespace fucina::model
