// The values a training run derives from its config and its task's data,
// computed once before the first step: the device and precision, what the
// trainee, the loader and the step are made with, sequences per step, the
// schedule, and each loop component's options. A run's regimen
// (train/regimen.h) says which sections shape it (not which task it
// trains).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/loader.h"
#include "model/precision.h"
#include "optim/config.h"
#include "tasks/task.h"
#include "train/checkpointer.h"
#include "train/evaluation.h"
#include "train/experiment.h"
#include "train/metrics_log.h"
#include "train/mllog.h"
#include "train/profiler.h"
#include "train/regimen.h"
#include "train/step.h"
#include "train/stop_policy.h"
#include "train/trainee.h"

namespace pbert::train {

// The trainee's options that the config's levers set, in one place for the
// trainer and the benchmarks: the model's options (model.*), master
// weights, fp8's scaling, the captured step, LAMB's fused kernels, the
// gradients' buckets and overlap, the seed; `precision` resolved for
// `device`. The task, LAMB's hyperparameters (the regimen's schedule) and
// the trust-ratio exclusion are the caller's.
TraineeOptions TraineeOptionsOf(const ExperimentConfig& config, model::Precision precision,
                                const c10::Device& device);

struct TrainingPlan {
  c10::Device device = c10::kCPU;  // run.device, resolved once (train/device.h)
  optim::OptimConfig optim;        // the schedule and LAMB as the run trains with them
  model::Precision precision;      // resolved for the device
  TraineeOptions trainee;          // the task's model, optimizer and reducer to build
  StepOptions step;
  data::LoaderOptions loader;       // this rank's share of the rows, in training order
  data::LoaderOptions eval_loader;  // an evaluation's: rows per pass, rank, threads
  int64_t rows_per_step = 0;        // over all ranks
  std::string batch_keys;           // the keys that set them, for messages
  std::string length_keys;          // the keys that set total_steps, for messages
  std::string memory_advice;        // how a micro-batch takes less memory, for messages
  double sequences_per_step = 0;    // rows_per_step x packing factor
  int64_t eval_every_samples = 0;   // sequences between evaluations
  // The weights to start from, the key that named them, and whether the
  // run needs them (fine-tuning starts from pretrained weights).
  std::string init_checkpoint, init_key;
  bool init_required = false;
  bool mllog = true;  // the run writes RUN_DIR/mllog.txt
  // The loop's components, each from its config section (train/trainer.h).
  StopOptions stop;
  CheckpointOptions checkpoint;  // config_yaml: set by the command
  EvaluationOptions evaluation;
  MetricsLogOptions metrics;       // dir and peak_flops: set when the logs open
  MlperfHeader mllog_header;       // the MLLOG's hyperparameters and data sizes
  ProfileSteps profile;            // train.profile_steps
  std::string description;         // the above in one line, for logs and config.yaml

  // `task` (its sets) outlives the plan.
  static absl::StatusOr<TrainingPlan> Make(const ExperimentConfig& config,
                                           std::shared_ptr<const tasks::Task> task,
                                           const Regimen& regimen, int rank, int world_size,
                                           const c10::Device& device);
};

// MLPerf's evaluation interval for a global batch of `gbs` sequences:
// floor(0.05 * (230.23 * gbs + 3e6) / 25000) * 25000.
int64_t MlperfEvalInterval(double gbs);

}  // namespace pbert::train
