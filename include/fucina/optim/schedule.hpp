#pragma once
// Learning-rate schedules: lr(step) for step = completed optimizer steps (0 before the
// first step). Use: opt.set_lr(schedule.lr(opt.step_count())); opt.step(...).
// All in f64, so a resumed run sees the same lr as an uninterrupted one.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "fucina/core/error.hpp"

namespace fucina::optim {

class LrSchedule {
 public:
  enum class Kind : std::uint8_t { constant, linear_warmup, cosine };

  static LrSchedule constant(double lr) { return LrSchedule(Kind::constant, lr, 0, 0, 0.0); }
  // lr * min(1, (step+1)/warmup_steps).
  static LrSchedule linear_warmup(double lr, std::int64_t warmup_steps) {
    FUCINA_CHECK(warmup_steps >= 0, InvalidArgument, "[LrSchedule] warmup_steps {} < 0", warmup_steps);
    return LrSchedule(Kind::linear_warmup, lr, warmup_steps, 0, 0.0);
  }
  // Linear warmup, then lr * (m + (1-m) * (1 + cos(pi * p)) / 2) with p the fraction of the
  // post-warmup steps done (clamped to 1) and m = min_lr_ratio.
  static LrSchedule cosine(double lr, std::int64_t warmup_steps, std::int64_t total_steps, double min_lr_ratio = 0.0) {
    FUCINA_CHECK(warmup_steps >= 0 && total_steps >= warmup_steps, InvalidArgument,
                 "[LrSchedule] need 0 <= warmup_steps ({}) <= total_steps ({})", warmup_steps, total_steps);
    FUCINA_CHECK(min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0, InvalidArgument,
                 "[LrSchedule] min_lr_ratio {} outside [0, 1]", min_lr_ratio);
    return LrSchedule(Kind::cosine, lr, warmup_steps, total_steps, min_lr_ratio);
  }

  double factor(std::int64_t step) const {
    if (kind_ == Kind::constant) return 1.0;
    if (step < warmup_) return static_cast<double>(step + 1) / static_cast<double>(warmup_);
    if (kind_ == Kind::linear_warmup) return 1.0;
    const std::int64_t span = std::max<std::int64_t>(1, total_ - warmup_);
    const double p = std::min(1.0, static_cast<double>(step - warmup_) / static_cast<double>(span));
    return min_ratio_ + (1.0 - min_ratio_) * 0.5 * (1.0 + std::cos(3.141592653589793 * p));
  }
  double lr(std::int64_t step) const { return base_ * factor(step); }
  Kind kind() const noexcept { return kind_; }

 private:
  LrSchedule(Kind k, double lr, std::int64_t warmup, std::int64_t total, double min_ratio)
      : kind_(k), base_(lr), warmup_(warmup), total_(total), min_ratio_(min_ratio) {}
  Kind kind_;
  double base_;
  std::int64_t warmup_, total_;
  double min_ratio_;
};

}  // namespace fucina::optim
