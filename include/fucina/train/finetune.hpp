#pragma once
// Fine-tuning a loaded model: LoRA factors or every weight (model/trainable.hpp), trained on
// a Dataset through Model::forward_train (Note [One forward]) with an optimizer, a learning
// rate schedule and gradient clipping; checkpoints that resume bit for bit; the result
// written as a llama.cpp LoRA adapter or as a full GGUF of the base's types.
//
// Note [Finetune data order]: step s of a run reads examples perm_e[(s mod S)·B ..] where
// S = ceil(n / B) steps make an epoch e = s / S and perm_e is a shuffle of the examples
// seeded by (seed, e). The order is a pure function of (seed, step), so a resumed run reads
// exactly what the uninterrupted one would have: a checkpoint only needs the parameters,
// the optimizer state and the step.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fucina/model/model.hpp"
#include "fucina/model/trainable.hpp"
#include "fucina/optim/optimizer.hpp"
#include "fucina/train/dataset.hpp"

namespace fucina::train {

struct FinetuneOptions {
  bool lora = false;           // false: every weight (f32/f16/BF16 bases)
  model::LoraSpec lora_spec;   // rank, alpha, targets, init seed
  std::string optimizer = "adamw";  // adamw | muon | sgd | apollo
  double lr = 1e-4;
  double weight_decay = 0.0;
  std::int64_t epochs = 1;
  std::int64_t steps = 0;      // > 0: this many steps instead of epochs
  std::int64_t batch = 1;      // sequences per step
  std::int64_t warmup = 0;     // linear warmup steps
  std::string schedule = "cosine";  // cosine | constant
  double grad_clip = 1.0;      // global L2 norm; 0 = off
  std::uint64_t seed = 0;      // data order and LoRA init
  bool grad_checkpoint = false;  // recompute each block in backward (less memory)
};

struct StepReport {
  std::int64_t step = 0, total = 0;  // steps done (1-based) of total
  double loss = 0, lr = 0, grad_norm = 0;
  std::int64_t tokens = 0;          // input rows of this step
  double seconds = 0;               // this step's wall time
};

class Finetune {
 public:
  // The model's weights get adapters or trainable copies; the model must outlive this.
  Finetune(Context& ctx, model::Model& model, Dataset train, FinetuneOptions options);

  std::int64_t total_steps() const { return total_; }
  std::int64_t step() const { return step_; }
  const Dataset& train_data() const { return train_; }

  // One optimizer step on the next batch (Note [Finetune data order]).
  StepReport run_step();
  // Mean loss per target token over `data`, without recording gradients.
  double evaluate(const Dataset& data);

  // Parameters, optimizer state and the step, in one file (atomic replace).
  void save_checkpoint(const std::filesystem::path& file) const;
  // Restores a checkpoint written by the same setup (InvalidFile naming what differs).
  void load_checkpoint(const std::filesystem::path& file);

  // LoRA: an adapter GGUF llama.cpp loads; full: the base file with the trained tensors in
  // the base's types. Through an AtomicFile.
  void write_output(const std::filesystem::path& out) const;

 private:
  std::uint64_t setup_hash() const;
  Context& ctx_;
  model::Model& model_;
  Dataset train_;
  FinetuneOptions opt_;
  std::vector<model::Trainable> params_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::int64_t total_ = 0, steps_per_epoch_ = 0, step_ = 0;
  std::vector<std::int64_t> order_;  // the examples of epoch order_epoch_ in training order
  std::int64_t order_epoch_ = -1;
};

}  // namespace fucina::train
