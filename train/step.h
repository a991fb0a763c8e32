// One optimizer step of data-parallel training, for any task: the step's
// totals from the batch tensors (summed over micro-batches and ranks) before
// any forward pass; forward and backward of each micro-batch on the
// trainee's device, its loss (the task's, tasks::Task::Sums) divided by
// those totals; gradients summed over ranks while the last backward runs;
// global clipping; LAMB (or AdamW) at the schedule's rate. A step whose loss
// or gradients are not finite is skipped.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "data/batch.h"
#include "distributed/communicator.h"
#include "train/inputs.h"
#include "train/metrics.h"
#include "train/trainee.h"

namespace pbert::train {

struct StepOptions {
  double max_grad_norm = 1.0;  // 0: no clipping
};

struct StepResult {
  StepMetrics metrics;  // summed over ranks
  double grad_norm = 0;        // before clipping
  bool applied = false;        // false: skipped, the loss or a gradient was not finite
};

// Runs one step over this rank's `batches` (prepared for the trainee's
// input plan: train/inputs.h; any number, also none) at rate `lr`. Every
// rank must call it the same number of times. The step's one read of the
// device is at its end (train/host_read.h).
absl::StatusOr<StepResult> TrainStep(Trainee& trainee, distributed::Communicator& communicator,
                                     const std::vector<MicroBatch>& batches, double lr,
                                     const StepOptions& options);
// The same for host batches of `set` (none: pretraining's), prepared first
// on this thread (tests, benchmarks).
absl::StatusOr<StepResult> TrainStep(Trainee& trainee, distributed::Communicator& communicator,
                                     const std::vector<data::PackedBatch>& batches, double lr,
                                     const StepOptions& options,
                                     const tasks::PackedSet* set = nullptr);

}  // namespace pbert::train
