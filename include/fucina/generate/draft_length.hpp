#pragma once
// How many drafted tokens a speculative step verifies (Note [Speculative decoding] in
// generator.hpp), and whether drafting pays at all.
//
// Note [Draft length]
// With a per-token acceptance rate a (the chance a drafted token is the one sampled, given
// the ones before it were), a step that verifies k drafted tokens yields 1 + a + ... + a^k
// tokens and costs one forward of k+1 rows, about 1 + c·k times a one-row forward's time.
// c depends on the model and the machine: a large model is memory-bound (the rows share
// each weight read: c = 0.1 on Qwen3-0.6B Q4_K_M, kRowCost, the start value), a model
// small enough to sit in the caches is compute-bound (each row costs ~0.3-0.5 of a plain
// step, the 8.4M default model). So when the caller times its forwards (timed()), c follows
// the measured ratio: the extra time of a verifying forward over a plain one, per extra
// row (in a batch, the plain forward has a row per decoding sequence, and each sequence
// weighs its drafts by that shared cost), a running average kept within [kMinRowCost,
// kMaxRowCost] (at the top the gate still opens for drafts that are nearly always right). k is the value
// in [draft_min, draft_max] that maximises tokens per unit of time; when even that is below
// kPays (the cost gate), the step runs plain (k = 0), so text the drafts do not predict
// costs only the lookups. a is a running average over the comparisons (drafted token vs
// sampled token, up to the first miss); while the gate is shut the first drafted token is
// still compared with the token sampled (free: no row runs for it), so the gate opens
// again when the text turns predictable. Timing moves only which steps verify, never a
// token: the output is plain decoding's either way.
#include <cstdint>

namespace fucina::generate {

struct SpeculativeOptions {
  bool enabled = true;     // draft from the context and verify (Note [Speculative decoding])
  std::int32_t draft_max = 16;  // drafted tokens per verification at most (>= draft_min)
  std::int32_t draft_min = 1;   // fewer drafted tokens than this: a plain step (>= 1)
};

// Throws InvalidArgument for draft lengths out of range.
void validate(const SpeculativeOptions& options);

class DraftLength {
 public:
  static constexpr double kPays = 1.05;    // tokens per one-row time a step must beat
  static constexpr double kRowCost = 0.1;  // c until timed() measures it
  static constexpr double kMinRowCost = 0.02, kMaxRowCost = 0.9;

  explicit DraftLength(const SpeculativeOptions& options);

  // Drafted tokens the next step should verify; 0: a plain step.
  std::int32_t next() const;
  // `compared` drafted tokens met sampled ones (up to and with the first miss), `hits` equal.
  void record(std::int32_t compared, std::int32_t hits);
  // A forward of `rows` rows took `seconds`; a plain step would have run `plain_rows` (1
  // alone; in a batch, one per decoding sequence).
  void timed(std::int64_t plain_rows, std::int64_t rows, double seconds);
  double acceptance() const { return accept_; }
  double row_cost() const { return row_cost_; }

 private:
  SpeculativeOptions options_;
  double accept_ = 0.5;
  double row_cost_ = kRowCost;
  double plain_seconds_ = 0;  // running average of a plain forward's time (0: none yet)
};

}  // namespace fucina::generate
