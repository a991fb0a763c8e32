// What `train` and `finetune` share: the one way to run the one loop
// (train/trainer.h). Claim the run folder, find where to resume, open the
// task's data, plan, build the trainer, train and report; each command
// gives only what differs: its task, its regimen, the flags that set keys,
// and what it prints.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "app/cli.h"
#include "app/config.h"
#include "train/trainer.h"

namespace pbert::app {

struct TrainingCommand {
  std::string name;  // "train" or "finetune"
  const train::Regimen* regimen = nullptr;  // how the run is shaped (train/regimen.h)
  std::vector<FlagKey> shorthands;  // flags that set config keys
  // The task the run trains, from its config.
  std::function<std::string(const ExperimentConfig&)> task;
  // --resume is a switch (the newest checkpoint of run.output_dir), not
  // DIR|auto.
  bool resume_switch = false;
  // The finished run's model exported for Hugging Face (RUN_DIR/model).
  bool exports = false;
  // What rank 0 prints at the end; `resume`: the command that continues
  // the run.
  std::function<std::string(const train::TrainResult& result, const ExperimentConfig& config,
                            const std::string& resume)>
      report;
};

absl::Status RunTraining(const Args& args, const TrainingCommand& command);

}  // namespace pbert::app
