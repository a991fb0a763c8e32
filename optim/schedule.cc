#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pbert::optim {

absl::Status ScheduleOptions::Validate() const {
  if (peak_lr < 0 || end_lr < 0) return absl::InvalidArgumentError("learning rates must be >= 0");
  if (total_steps < 1) return absl::InvalidArgumentError("total_steps must be >= 1");
  if (warmup_steps < 0) return absl::InvalidArgumentError("warmup_steps must be >= 0");
  if (warmup_steps > total_steps) {
    return absl::InvalidArgumentError("warmup_steps must not exceed total_steps");
  }
  if (power <= 0) return absl::InvalidArgumentError("power must be > 0");
  if (kind == ScheduleKind::kPoly && end_lr > peak_lr) {
    // A decay that rises: almost always lr and end_lr swapped or a typo.
    return absl::InvalidArgumentError(
        absl::StrCat("end_lr ", end_lr, " is above lr ", peak_lr,
                     ": the poly schedule decays from lr to end_lr; lower end_lr (MLPerf: 0)"));
  }
  return absl::OkStatus();
}

double LearningRate(const ScheduleOptions& o, int64_t step) {
  if (o.kind == ScheduleKind::kConstant) return o.peak_lr;
  if (step < o.warmup_steps) {
    double done = static_cast<double>(step - o.start_warmup_step) / o.warmup_steps;
    return std::max(0.0, o.peak_lr * done);
  }
  double left = 1.0 - static_cast<double>(std::min(step, o.total_steps)) / o.total_steps;
  return (o.peak_lr - o.end_lr) * std::pow(left, o.power) + o.end_lr;
}

}  // namespace pbert::optim
