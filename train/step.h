// One optimizer step of data-parallel pretraining: the step's totals from
// the batch tensors (summed over micro-batches and ranks) before any forward
// pass; forward and backward of each micro-batch at once, its loss divided by
// those totals; gradients summed over ranks; global clipping; LAMB at the
// schedule's rate. A step whose loss or gradients are not finite is skipped.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch.h"
#include "distributed/communicator.h"
#include "model/losses.h"
#include "model/precision.h"
#include "nlohmann/json.hpp"
#include "train/metrics.h"

namespace pbert::model {
class BertForPreTraining;
}
namespace pbert::optim {
class Lamb;
}

namespace pbert::train {

struct StepOptions {
  model::MlmLossMode mlm_loss = model::MlmLossMode::kPerToken;
  model::Precision precision = model::Precision::kFp32;
  double max_grad_norm = 1.0;  // 0: no clipping
  int64_t bucket_bytes = 25 << 20;  // gradient all-reduce buckets (dist.bucket_mb)
};

struct StepResult {
  PretrainingMetrics metrics;  // summed over ranks
  double grad_norm = 0;        // before clipping
  bool applied = false;        // false: skipped, the loss or a gradient was not finite
};

// Runs one step over this rank's `batches` (any number, also none) at rate
// `lr`. Every rank must call it the same number of times.
absl::StatusOr<StepResult> TrainStep(model::BertForPreTraining& model, optim::Lamb& optimizer,
                                     distributed::Communicator& communicator,
                                     const std::vector<data::PackedBatch>& batches, double lr,
                                     const StepOptions& options,
                                     model::LossScaler* scaler = nullptr);

// The state of what draws the step's dropout masks (LibTorch's default CPU
// generator), as checkpoints save it.
struct RandomState {
  std::string cpu;  // the generator's state, as hex
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(RandomState, cpu)
};
RandomState SaveRandomState();
absl::Status RestoreRandomState(const RandomState& state);

}  // namespace pbert::train
