#include "fucina/generate/draft_length.hpp"

#include <algorithm>

#include "fucina/core/error.hpp"

namespace fucina::generate {

namespace {
// Weight of the newest comparison (or timing) in the running averages: about the last 10 count.
constexpr double kAcceptWeight = 0.1;
// A timed forward counts as at most this many times what the running averages predict: a
// thread the OS preempted takes several times its forward's time (6-19x seen on a shared
// machine), and one such sample must not shut the gate (Note [Draft length]).
constexpr double kOutlier = 2;
}  // namespace

void validate(const SpeculativeOptions& o) {
  FUCINA_CHECK(o.draft_min >= 1, InvalidArgument, "[speculative] draft-min {} must be at least 1", o.draft_min);
  FUCINA_CHECK(o.draft_max >= o.draft_min, InvalidArgument, "[speculative] draft-max {} must be at least draft-min {}",
               o.draft_max, o.draft_min);
}

DraftLength::DraftLength(const SpeculativeOptions& options) : options_(options) { validate(options_); }

std::int32_t DraftLength::next() const {
  std::int32_t best = 0;
  double best_rate = kPays, tokens = 1, power = 1;
  for (std::int32_t k = 1; k <= options_.draft_max; ++k) {
    tokens += power *= accept_;
    const double rate = tokens / (1 + step_cost_ + row_cost_ * k);
    if (k >= options_.draft_min && rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

void DraftLength::record(std::int32_t compared, std::int32_t hits) {
  for (std::int32_t i = 0; i < compared; ++i) accept_ += kAcceptWeight * ((i < hits ? 1.0 : 0.0) - accept_);
}

void DraftLength::timed(std::int64_t plain_rows, std::int64_t rows, double seconds) {
  if (!options_.timed) return;
  if (rows <= plain_rows) {
    plain_seconds_ = plain_seconds_ == 0
                         ? seconds
                         : plain_seconds_ + kAcceptWeight * (std::min(seconds, kOutlier * plain_seconds_) - plain_seconds_);
    return;
  }
  if (plain_seconds_ == 0) return;
  const auto k = static_cast<double>(rows - plain_rows);
  const double y = std::min(seconds / plain_seconds_, kOutlier * (1 + step_cost_ + row_cost_ * k)) - 1;
  const auto update = [](double& mean, double x) { mean += kAcceptWeight * (x - mean); };
  update(mean_k_, k), update(mean_kk_, k * k), update(mean_y_, y), update(mean_ky_, k * y);
  // Draft lengths that vary by less than about two rows (the variance, in rows²) leave the
  // slope to the noise: two forwards a few rows apart, one of them slowed, fitted c = 0.87.
  constexpr double kMinSpread = 4.0;
  const double var = mean_kk_ - mean_k_ * mean_k_;
  const double slope = var >= kMinSpread ? (mean_ky_ - mean_k_ * mean_y_) / var : mean_y_ / mean_k_;
  row_cost_ = std::clamp(slope, kMinRowCost, kMaxRowCost);
  step_cost_ = var >= kMinSpread ? std::clamp(mean_y_ - row_cost_ * mean_k_, 0.0, kMaxStepCost) : 0.0;
}

}  // namespace fucina::generate
