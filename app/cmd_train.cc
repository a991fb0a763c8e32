#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "app/commands.h"
#include "app/training.h"
#include "tasks/tasks.h"
#include "train/tensorboard.h"

namespace pbert::app {
namespace {

// What a finished (or stopped) pretraining run prints.
std::string TrainReport(const train::TrainResult& r, const ExperimentConfig& config,
                   const std::string& resume) {
  if (r.status == "interrupted") {
    return absl::StrCat("stopped at step ", r.step, " (", r.samples,
                        " sequences) on request; checkpoint ", r.checkpoint,
                        "\nresume with: ", resume, "\n");
  }
  const double target = config.train.target_mlm_accuracy;
  std::string out;
  if (r.already_finished) absl::StrAppend(&out, "this run had finished; ", r.checkpoint, "\n");
  absl::StrAppendFormat(&out, "status            %s\n", r.status);
  absl::StrAppendFormat(&out, "steps             %d (%d skipped)\n", r.step, r.skipped_steps);
  absl::StrAppendFormat(&out, "sequences         %d\n", r.samples);
  if (r.samples_to_target > 0) {
    absl::StrAppendFormat(&out, "to target         %d sequences (MLM accuracy >= %.4f)\n",
                          r.samples_to_target, target);
  } else {
    absl::StrAppendFormat(&out, "to target         not reached (MLM accuracy >= %.4f)\n", target);
  }
  absl::StrAppendFormat(&out, "MLM accuracy      %.4f (best %.4f, %d evaluations)\n",
                        r.last_score, r.best_score, r.evaluations);
  absl::StrAppendFormat(&out, "training time     %.1f s\n", r.train_seconds);
  if (r.run_seconds > 0) {
    absl::StrAppendFormat(&out, "time to train     %.1f s (MLLOG run_start to run_stop)\n",
                          r.run_seconds);
  }
  if (r.session_step_seconds > 0) {
    const double flops_per_s = r.session_flops / r.session_step_seconds;
    absl::StrAppendFormat(&out, "model FLOP/s      %.3g TFLOP/s over this session's steps%s\n",
                          flops_per_s / 1e12,
                          r.peak_flops > 0
                              ? absl::StrFormat(", MFU %.1f%% of %.3g TFLOP/s", 100 * flops_per_s / r.peak_flops,
                                                r.peak_flops / 1e12)
                              : "");
  }
  absl::StrAppendFormat(&out, "run folder        %s (mllog.txt, metrics.jsonl, %s%s)\n",
                        config.run.output_dir,
                        config.train.tensorboard ? absl::StrCat(train::kTensorBoardFile, ", ") : "",
                        "checkpoints/");
  return out;
}

absl::Status RunTrain(const Args& args) {
  TrainingCommand command;
  command.name = "train";
  command.regimen = &train::PretrainingRegimen();
  command.task = [](const ExperimentConfig&) { return std::string(tasks::kPretraining); };
  command.report = TrainReport;
  return RunTraining(args, command);
}

}  // namespace

Command TrainCommand() {
  Command command;
  command.name = "train";
  command.summary = "pretrain BERT on packed data with the MLPerf evaluation loop";
  command.usage = "train --config FILE [--set SECTION.KEY=VALUE ...] [--resume DIR|auto] [--force]";
  command.details =
      "Trains on data.store (rows from data.pack_index, or the store packed with the packing\n"
      "section), evaluates on data.eval every train.eval_every_samples sequences and stops when\n"
      "the MLM accuracy reaches train.target_mlm_accuracy, after optim.total_steps steps or\n"
      "train.max_samples sequences. Writes RUN_DIR/mllog.txt (:::MLLOG lines), metrics.jsonl,\n"
      "config.yaml and checkpoints/step-N folders (RUN_DIR = run.output_dir). SIGINT or SIGTERM\n"
      "finishes the step, saves a checkpoint and exits 0; --resume continues exactly.";
  command.flags = {
      {"resume", "DIR|auto", "continue from a checkpoint folder, or the newest one of the run"},
      {"force", "", "resume even if training-relevant config keys changed"},
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunTrain;
  return command;
}

}  // namespace pbert::app
