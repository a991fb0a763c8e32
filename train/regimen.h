// How a run is shaped: a regimen owns all that differs between `train`
// (pretraining as MLPerf runs it: optim.total_steps of
// train.micro_batch_rows x optim.accumulation_steps rows per rank, LAMB
// after the packing adjustment on a polynomial schedule, an evaluation
// every train.eval_every_samples sequences until train.target_mlm_accuracy,
// the MLLOG) and `finetune` (as Google's and Hugging Face's scripts run it:
// finetune.epochs of finetune.batch_size sequences per step, AdamW or LAMB
// warmed up and decayed linearly, an evaluation and a checkpoint after each
// epoch, no MLLOG): the config completed from its data, the plan's length,
// batches, schedule, evaluations, checkpoints and starting weights, the
// plan in words, and the settings it does not read. Each regimen is one
// definition (train/regimen.cc); nothing else compares regimens, and a
// regimen names no task (the task is its own: tasks/task.h).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/config_field.h"

namespace pbert::tasks {
struct PackedSet;
class Task;
}  // namespace pbert::tasks

namespace pbert::train {

struct ExperimentConfig;
struct TrainingPlan;

class Regimen {
 public:
  virtual ~Regimen() = default;
  // `config` completed from its data where `given` leaves a key to it, and
  // checked across sections, before anything is opened.
  virtual absl::Status Complete(const std::set<std::string>& given,
                                ExperimentConfig* config) const = 0;
  // The plan's length, rows per step and loaders, schedule, evaluations,
  // checkpoints, log interval, starting weights, MLLOG, and the keys its
  // messages name, for `train` (the task's training set) on `world_size`
  // ranks.
  virtual absl::Status Plan(const ExperimentConfig& config, const tasks::PackedSet& train, int rank,
                            int world_size, TrainingPlan* plan) const = 0;
  // The plan's shape in words, the start of TrainingPlan::description.
  virtual std::string Describe(const ExperimentConfig& config, const tasks::Task& task,
                               const TrainingPlan& plan) const = 0;
  // The keys it does not read (`resumed`: a run continued from its
  // checkpoint, whose weights replace the starting weights').
  virtual void Unread(const ExperimentConfig& config, bool resumed,
                      config::InactiveKeys* keys) const = 0;
};

const Regimen& PretrainingRegimen();  // `train`
const Regimen& FineTuningRegimen();   // `finetune`

// data.max_seq_len and model.vocab_size taken from data.store's manifest
// where `given` leaves them (a longer data.max_seq_len or another
// vocabulary given is said in a line); nothing where data.store is no
// store (the command that opens it says so). Pretraining's completion, and
// `pack`'s.
absl::Status TakeStoreLimits(const std::set<std::string>& given, ExperimentConfig* config);

}  // namespace pbert::train
