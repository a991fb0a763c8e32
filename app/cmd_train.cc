#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "app/commands.h"
#include "app/config.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/status.h"
#include "distributed/communicator.h"
#include "train/device.h"
#include "train/fault.h"
#include "train/resume.h"
#include "train/run_folder.h"
#include "train/tensorboard.h"
#include "train/trainer.h"

namespace pbert::app {
namespace {

std::atomic<bool> stop_requested{false};

void OnStopSignal(int) { stop_requested.store(true); }

// The first SIGINT or SIGTERM asks the loop to finish its step and save; a
// second one (the handler resets itself) ends the process at once.
void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// Until training starts, SIGINT or SIGTERM leaves the run folder as it was
// (what Release removes, removed here with the calls a handler may make),
// then ends the process as the signal would have.
const std::vector<std::string>* release_on_signal = nullptr;

void OnSignalBeforeTraining(int signal) {
  if (release_on_signal != nullptr) {
    for (const std::string& path : *release_on_signal) {
      if (::unlink(path.c_str()) != 0) ::rmdir(path.c_str());  // a folder goes only if empty
    }
  }
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void InstallHandlersBeforeTraining(const std::vector<std::string>* release) {
  release_on_signal = release;
  struct sigaction action {};
  action.sa_handler = OnSignalBeforeTraining;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

std::string ResumeCommand(const Args& args) {
  std::string command = "packed-bert train";
  if (args.Has("config")) absl::StrAppend(&command, " --config ", args.Get("config"));
  for (const std::string& s : args.GetAll("set")) absl::StrAppend(&command, " --set ", s);
  return absl::StrCat(command, " --resume auto");
}

// What a finished (or stopped) run prints.
std::string Report(const train::TrainResult& r, const ExperimentConfig& config, const Args& args) {
  if (r.status == "interrupted") {
    return absl::StrCat("stopped at step ", r.step, " (", r.samples,
                        " sequences) on request; checkpoint ", r.checkpoint,
                        "\nresume with: ", ResumeCommand(args), "\n");
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
                        r.mlm_accuracy, r.best_mlm_accuracy, r.evaluations);
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

// What a run is built from; each part outlives the trainer that refers to it.
struct Parts {
  ExperimentConfig config;
  std::set<std::string> given;  // the keys the file or --set gave
  std::optional<train::CheckpointInfo> resume;
  train::TrainingData data;
  train::TrainingPlan plan;
};

struct Setup {
  const distributed::Environment& environment;
  const c10::Device& device;
  distributed::Communicator& communicator;
  train::RunFolder* folder;  // rank 0's; null on the other ranks
};

// Checks everything the run needs and builds its trainer; writes nothing
// but a new run's packed rows and the effective config, once all is checked.
absl::StatusOr<std::unique_ptr<train::Trainer>> Prepare(const Args& args, const Setup& s,
                                                        Parts& parts) {
  const ExperimentConfig& config = parts.config;
  ASSIGN_OR_RETURN(parts.resume, train::FindResumePoint(args.Get("resume"), args.Has("force"),
                                                        config, s.environment));
  if (s.folder && !parts.resume) RETURN_IF_ERROR(s.folder->AcceptNewRun());
  // Each rank checks the checksums of its share of the store's shards.
  ASSIGN_OR_RETURN(parts.data, train::TrainingData::Open(
                                   config, {s.communicator.rank(), s.communicator.world_size()}));
  train::FaultPoint("checks", 0, s.communicator.rank());
  ASSIGN_OR_RETURN(parts.plan, train::TrainingPlan::Make(config, parts.data, s.communicator.rank(),
                                                         s.communicator.world_size(), s.device));
  logging::Get("train")->info("{}", parts.plan.description);
  for (const std::string& idle : config.InactiveSettings(
           parts.given, parts.plan.precision, s.device.is_cuda(), s.communicator.world_size(),
           parts.resume.has_value())) {
    logging::Get("train")->warn("{}", idle);
  }
  // The effective config, saved with every checkpoint.
  parts.plan.checkpoint.config_yaml =
      absl::StrCat(config::Dump(config), "\n# effective: ", parts.plan.description, "\n");
  ASSIGN_OR_RETURN(auto trainer,
                   train::Trainer::Create({config, parts.data, parts.plan, s.communicator,
                                           parts.resume ? &*parts.resume : nullptr,
                                           [] { return stop_requested.load(); }}));
  if (s.folder && !trainer->finished()) {
    if (!parts.resume) RETURN_IF_ERROR(parts.data.WritePackedRows(config.run.output_dir));
    RETURN_IF_ERROR(WriteEffectiveConfig(config, parts.plan.description));
  }
  return trainer;
}

absl::Status RunTrain(const Args& args) {
  Parts parts;
  ASSIGN_OR_RETURN(parts.config, LoadConfig(args, {}, "", &parts.given));
  RETURN_IF_ERROR(TakeStoreLimits(parts.given, &parts.config));
  const ExperimentConfig& config = parts.config;
  RETURN_IF_ERROR(config.CheckTrainable());
  ASSIGN_OR_RETURN(distributed::Environment environment, config.dist.ReadEnvironment());
  // The one place the device is decided; the plan carries it from here.
  ASSIGN_OR_RETURN(const c10::Device device,
                   train::ResolveDevice(config.run.device, environment.local_rank));
  RETURN_IF_ERROR(train::UseDevice(device));
  ASSIGN_OR_RETURN(auto communicator, JoinProcessGroup(config, environment, device, "train"));
  // Rank 0 writes the run folder, and holds it until the process ends.
  std::optional<train::RunFolder> folder;
  std::vector<std::string> release_paths;
  if (communicator->rank() == 0) {
    ASSIGN_OR_RETURN(train::RunFolder claimed, train::RunFolder::Claim(config.run.output_dir));
    folder.emplace(std::move(claimed));
    release_paths = folder->ReleasePaths();
    InstallHandlersBeforeTraining(&release_paths);
  }
  // However the command ends (a status, or an exception on its way to
  // CommandLine), a refused run leaves the folder as it was, and a run that
  // wrote nothing (refused as it began to train, or resumed from a run that
  // had finished) as it found it.
  train::RunFolderRelease leave(folder);
  ASSIGN_OR_RETURN(auto trainer, Prepare(args, {environment, device, *communicator,
                                                folder ? &*folder : nullptr},
                                         parts));
  leave.Started();
  InstallStopHandlers();
  WarnIfSlowKernels();
  absl::StatusOr<train::TrainResult> result = trainer->Train();
  if (!result.ok()) return result.status();
  if (folder) std::cout << Report(*result, config, args);
  return absl::OkStatus();
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
