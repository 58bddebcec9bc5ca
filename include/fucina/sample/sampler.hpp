#pragma once
// Next-token sampling from a logits row.
//
// Note [Sampler chain] (llama.cpp's default order): repetition/presence/frequency
// penalties over the last `penalty_last_n` accepted tokens -> top-k -> top-p -> min-p ->
// temperature -> one draw. temperature 0 is greedy (argmax after the penalties; lowest
// id on ties). Draw t uses rng::uniform(seed, t): the same seed and the same logits give
// the same tokens on any machine and thread count.
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace fucina::sample {

struct SamplerConfig {
  float temperature = 0.8f;       // >= 0; 0: greedy
  std::int32_t top_k = 40;        // >= 0; 0: off
  float top_p = 0.95f;            // in (0, 1]; 1: off
  float min_p = 0.05f;            // in [0, 1]; 0: off
  float repeat_penalty = 1.0f;    // 1: off; > 1 discourages repeats
  float presence_penalty = 0.0f;  // subtracted once from every seen token
  float frequency_penalty = 0.0f; // subtracted per occurrence
  std::int32_t penalty_last_n = 64;
  std::uint64_t seed = 0;
};

// Throws InvalidArgument for an option outside its range (above): nothing is clamped.
void validate(const SamplerConfig& config);

class Sampler {
 public:
  explicit Sampler(SamplerConfig config);

  // Picks the next token; does not record it (call accept()).
  std::int32_t sample(std::span<const float> logits);
  // Records a token (prompt or generated) for the penalties.
  void accept(std::int32_t id);
  void reset();
  const SamplerConfig& config() const { return config_; }

 private:
  struct Candidate {
    std::int32_t id;
    float logit;
  };
  bool penalties_active() const;
  void apply_penalties(std::vector<Candidate>& c) const;

  SamplerConfig config_;
  std::deque<std::int32_t> recent_;
  std::uint64_t draws_ = 0;
  std::vector<Candidate> work_;
};

// Index of the largest value (lowest index on ties).
std::int32_t argmax(std::span<const float> logits);

}  // namespace fucina::sample
