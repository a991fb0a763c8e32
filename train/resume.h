// Where a training run resumes, read once: a checkpoint folder given with
// --resume DIR, or the newest checkpoint of run.output_dir for --resume auto
// (and for the workers a launcher restarted after a failure), checked
// against the config the run is given now.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "distributed/environment.h"
#include "train/checkpointer.h"
#include "train/experiment.h"

namespace pbert::train {

// `resume`: "" (a new run, unless a launcher restarted the workers), "auto"
// or a checkpoint folder. A checkpoint of another task than `task` is
// refused, even with `force` (its weights have another head); unless
// `force`, so is one made under a config that trains differently, naming
// the keys (docs/training.md lists those that may change); the trainer
// checks the rows of a step (train/trainer.h). None: a new run.
absl::StatusOr<std::optional<CheckpointInfo>> FindResumePoint(
    std::string resume, bool force, const ExperimentConfig& config, const std::string& task,
    const distributed::Environment& environment);

// The keys a resumed run may change: they alter how the run is watched,
// kept or stopped early, not what it computes.
bool ResumeMayChange(const std::string& key);

}  // namespace pbert::train
