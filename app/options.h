// Config sections -> library options, in one place.
#pragma once

#include "absl/status/statusor.h"
#include "app/config.h"
#include "model/bert.h"
#include "optim/lamb.h"
#include "optim/packing_adjustment.h"
#include "optim/schedule.h"
#include "train/step.h"

namespace pbert::app {

model::BertOptions ToBertOptions(const ModelConfig& config);

// The optimizer values after the packing adjustment for packing factor
// `packing_factor` (1 for unpacked data).
absl::StatusOr<optim::OptimizerHyperparameters> AdjustedOptimizer(const OptimConfig& config,
                                                                   double packing_factor);

// LAMB with `adjusted`'s betas.
optim::LambOptions ToLambOptions(const OptimConfig& config,
                                 const optim::OptimizerHyperparameters& adjusted);

optim::ScheduleOptions ToScheduleOptions(const OptimConfig& config);

absl::StatusOr<train::StepOptions> ToStepOptions(const ExperimentConfig& config);

}  // namespace pbert::app
