// Learning-rate schedules: pure functions of the step, so resuming at step t
// gives the same rate as never having stopped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pbert::optim {

struct ScheduleOptions {
  std::string kind = "poly";  // "poly" (warmup + polynomial decay) or "constant"
  double peak_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t start_warmup_step = 0;  // MLPerf's offset of the warmup ramp
  int64_t total_steps = 1;        // decay reaches end_lr here
  double power = 1.0;
  double end_lr = 0.0;

  absl::Status Validate() const;
};

// The schedule kinds: "poly" and "constant".
std::vector<std::string> ScheduleNames();

// The rate for optimizer step `step` (0 for the first update), as MLPerf's
// BERT reference computes it:
//   decay = (peak - end) (1 - min(step, total) / total)^power + end
//   if step < warmup_steps: peak (step - start_warmup_step) / warmup_steps
//   (never below 0), else decay.
// "constant" is peak_lr throughout.
double LearningRate(const ScheduleOptions& options, int64_t step);

}  // namespace pbert::optim
