// The values a training run derives from its config and its data, computed
// once before the first step: the packing factor, the optimizer after the
// packing adjustment, the device and precision, what the loader, the step
// and the trainee are made with, sequences per step and the evaluation
// interval.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "data/loader.h"
#include "model/precision.h"
#include "optim/config.h"
#include "train/checkpointer.h"
#include "train/evaluation.h"
#include "train/experiment.h"
#include "train/metrics_log.h"
#include "train/mllog.h"
#include "train/profiler.h"
#include "train/step.h"
#include "train/stop_policy.h"
#include "train/trainee.h"
#include "train/training_data.h"

namespace pbert::train {

// The values a run derives from its config and data, computed once.
struct TrainingPlan {
  c10::Device device = c10::kCPU;  // run.device, resolved once (train/device.h)
  optim::OptimConfig optim;        // after the packing adjustment
  model::Precision precision;      // resolved for the device
  TraineeOptions trainee;          // the model, optimizer and reducer to build
  StepOptions step;
  data::LoaderOptions loader;      // this rank's share of the rows, in training order
  int64_t rows_per_step = 0;       // over all ranks
  double sequences_per_step = 0;   // rows_per_step x packing factor
  int64_t eval_every_samples = 0;  // train.eval_every_samples, or MLPerf's interval
  // The loop's components, each from its config section (train/trainer.h).
  StopOptions stop;
  CheckpointOptions checkpoint;  // config_yaml: set by train (app/cmd_train.cc)
  EvaluationOptions evaluation;
  MetricsLogOptions metrics;       // dir and peak_flops: set when the logs open
  MlperfHeader mllog_header;       // the MLLOG's hyperparameters and data sizes
  ProfileSteps profile;            // train.profile_steps
  std::string description;         // the above in one line, for logs and config.yaml

  static absl::StatusOr<TrainingPlan> Make(const ExperimentConfig& config, const TrainingData& data,
                                           int rank, int world_size, const c10::Device& device);
};

// MLPerf's evaluation interval for a global batch of `gbs` sequences:
// floor(0.05 * (230.23 * gbs + 3e6) / 25000) * 25000.
int64_t MlperfEvalInterval(double gbs);

}  // namespace pbert::train
