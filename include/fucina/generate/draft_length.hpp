#pragma once
// How many drafted tokens a speculative step verifies (Note [Speculative decoding] in
// generator.hpp), and whether drafting pays at all.
//
// Note [Draft length]
// With a per-token acceptance rate a (the chance a drafted token is the one sampled, given
// the ones before it were), a step that verifies k drafted tokens yields 1 + a + ... + a^k
// tokens and costs one forward of k+1 rows, about 1 + c0 + c·k times a one-row forward's
// time. c, the cost of a row, depends on the model and the machine: a large model is
// memory-bound (the rows share each weight read: c = 0.1 on Qwen3-0.6B Q4_K_M, kRowCost, the
// start value), a model small enough to sit in the caches is compute-bound (each row costs
// ~0.3-0.5 of a plain step, the 8.4M default model). c0, the step's own cost, is what a
// verifying forward costs beyond its rows: on the default model at 2 threads a 2-row forward
// took 1.7 plain steps, 16 rows 8.1 (c0 = 0.28, c = 0.46; docs/BENCHMARK.md), so short drafts
// pay less than c alone says. When the caller times its forwards (timed()), both follow the
// measured ratios: the extra time of a verifying forward over a plain one against its extra
// rows, fitted by least squares over running averages (in a batch, the plain forward has a
// row per decoding sequence, and each sequence weighs its drafts by that shared cost); while
// the draft lengths seen differ by less than about two rows (too little to fit a slope
// through noisy times), c0 = 0 and c is the ratio per row. A forward counts as at most twice
// what the averages predict for it: on a shared machine a preempted thread makes a forward
// take 6-19 times its time now and then, and one such sample taken whole once fitted c = 0.9
// on the default model, which shut the gate for ~120 tokens of a copy (no verifying forward
// ran to correct it); a lasting slowdown still moves the averages, doubling the prediction
// every few samples. c is kept within [kMinRowCost, kMaxRowCost] (at the top the gate still
// opens for drafts that are nearly always right), c0 within [0, kMaxStepCost]. k is the
// value in [draft_min, draft_max] that maximises tokens per unit of time; when even that is below
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
  // false: c and c0 keep their start values whatever the forwards take, so which steps
  // verify depends on the text alone (tests that must see verifications on a loaded machine).
  bool timed = true;
};

// Throws InvalidArgument for draft lengths out of range.
void validate(const SpeculativeOptions& options);

class DraftLength {
 public:
  static constexpr double kPays = 1.05;    // tokens per one-row time a step must beat
  static constexpr double kRowCost = 0.1;  // c until timed() measures it
  static constexpr double kMinRowCost = 0.02, kMaxRowCost = 0.9, kMaxStepCost = 1.0;

  explicit DraftLength(const SpeculativeOptions& options);

  // Drafted tokens the next step should verify; 0: a plain step.
  std::int32_t next() const;
  // `compared` drafted tokens met sampled ones (up to and with the first miss), `hits` equal.
  void record(std::int32_t compared, std::int32_t hits);
  // A forward of `rows` rows took `seconds`; a plain step would have run `plain_rows` (1
  // alone; in a batch, one per decoding sequence).
  void timed(std::int64_t plain_rows, std::int64_t rows, double seconds);
  double acceptance() const { return accept_; }
  double row_cost() const { return row_cost_; }    // c
  double step_cost() const { return step_cost_; }  // c0

 private:
  SpeculativeOptions options_;
  double accept_ = 0.5;
  double row_cost_ = kRowCost, step_cost_ = 0;
  double plain_seconds_ = 0;  // running average of a plain forward's time (0: none yet)
  // Running averages over the timed verifying forwards of k (extra rows), k², y (extra time
  // in plain steps) and k·y, the least-squares fit's sums; they start as if drafts of 8 had
  // cost kRowCost a row.
  double mean_k_ = 8, mean_kk_ = 64, mean_y_ = 8 * kRowCost, mean_ky_ = 64 * kRowCost;
};

}  // namespace fucina::generate
