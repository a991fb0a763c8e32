// Learning-rate schedules: pure functions of the step, so resuming at step t
// gives the same rate as never having stopped.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "common/choices.h"
#include "common/config_field.h"

namespace pbert::optim {

enum class ScheduleKind {
  kPoly,      // warmup, then polynomial decay
  kConstant,  // the peak rate throughout
};
inline constexpr Choice<ScheduleKind> kScheduleKinds[] = {{"poly", ScheduleKind::kPoly},
                                                          {"constant", ScheduleKind::kConstant}};
constexpr ChoiceList<ScheduleKind> ChoicesOf(ScheduleKind) { return kScheduleKinds; }

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::kPoly;
  double peak_lr = 4e-4;
  int64_t warmup_steps = 0;
  int64_t start_warmup_step = 0;  // MLPerf's offset of the warmup ramp
  int64_t total_steps = 1000;     // decay reaches end_lr here; the run stops here
  double power = 1.0;
  double end_lr = 0.0;

  // The config's optim keys (the section's other keys are LAMB's).
  template <class V>
  void Visit(V& v) {
    v.Field("lr", &peak_lr, "peak learning rate", config::InRange(1e-30, 10.0));
    v.Field("schedule", &kind, "poly: warmup + polynomial decay; constant: lr throughout");
    v.Field("warmup_steps", &warmup_steps, "linear warmup length in optimizer steps",
            config::InRange<int64_t>(0, int64_t{1} << 30));
    v.Field("start_warmup_step", &start_warmup_step, "offset of the warmup ramp (MLPerf)",
            config::InRange<int64_t>(-(int64_t{1} << 30), int64_t{1} << 30));
    v.Field("total_steps", &total_steps, "optimizer steps; the decay ends here",
            config::InRange<int64_t>(1, int64_t{1} << 30));
    v.Field("power", &power, "polynomial decay power", config::InRange(1e-9, 100.0));
    v.Field("end_lr", &end_lr, "learning rate at total_steps", config::InRange(0.0, 10.0));
  }
  absl::Status Validate() const;
};

// The rate for optimizer step `step` (0 for the first update), as MLPerf's
// BERT reference computes it:
//   decay = (peak - end) (1 - min(step, total) / total)^power + end
//   if step < warmup_steps: peak (step - start_warmup_step) / warmup_steps
//   (never below 0), else decay.
// "constant" is peak_lr throughout.
double LearningRate(const ScheduleOptions& options, int64_t step);

}  // namespace pbert::optim
