#pragma once
// How many drafted tokens a speculative step verifies (Note [Speculative decoding] in
// generator.hpp), and whether drafting pays at all.
//
// Note [Draft length]
// With a per-token acceptance rate a (the chance a drafted token is the one sampled, given
// the ones before it were), a step that verifies k drafted tokens yields 1 + a + ... + a^k
// tokens and costs one forward of k+1 rows, about 1 + c·k times a one-row forward's time
// (decoding is memory-bound: the rows share each weight read; kRowCost is c measured on
// Qwen3-0.6B Q4_K_M, docs/BENCHMARK.md). k is the value in [draft_min, draft_max] that
// maximises tokens per unit of time; when even that is below kPays (the cost gate), the
// step runs plain (k = 0), so text the drafts do not predict costs only the lookups. a is a
// running average over the comparisons (drafted token vs sampled token, up to the first
// miss); while the gate is shut the first drafted token is still compared with the token
// sampled (free: no row runs for it), so the gate opens again when the text turns
// predictable. The rule reads no clock: the same text gives the same steps on any machine.
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
  static constexpr double kRowCost = 0.1;  // c

  explicit DraftLength(const SpeculativeOptions& options);

  // Drafted tokens the next step should verify; 0: a plain step.
  std::int32_t next() const;
  // `compared` drafted tokens met sampled ones (up to and with the first miss), `hits` equal.
  void record(std::int32_t compared, std::int32_t hits);
  double acceptance() const { return accept_; }

 private:
  SpeculativeOptions options_;
  double accept_ = 0.5;
};

}  // namespace fucina::generate
