#include "app/training.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "app/hf_export.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/status.h"
#include "distributed/communicator.h"
#include "tasks/tasks.h"
#include "train/device.h"
#include "common/fault.h"
#include "train/resume.h"
#include "train/run_folder.h"

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

// The flag that continues the command's run.
std::string ResumeFlag(const TrainingCommand& command) {
  return command.resume_switch ? "--resume" : "--resume auto";
}

// The command line that continues the run.
std::string ResumeCommand(const Args& args, const TrainingCommand& command) {
  std::string line = absl::StrCat("packed-bert ", command.name);
  if (args.Has("config")) absl::StrAppend(&line, " --config ", args.Get("config"));
  for (const FlagKey& f : command.shorthands) {
    if (args.Has(f.flag)) absl::StrAppend(&line, " --", f.flag, " ", args.Get(f.flag));
  }
  for (const std::string& s : args.GetAll("set")) absl::StrAppend(&line, " --set ", s);
  return absl::StrCat(line, " ", ResumeFlag(command));
}

// What a run is built from; each part outlives the trainer that refers to it.
struct Parts {
  ExperimentConfig config;
  std::set<std::string> given;  // the keys the file or a flag gave
  std::optional<train::CheckpointInfo> resume;
  std::shared_ptr<const tasks::Task> task;
  train::TrainingPlan plan;
};

struct Setup {
  const distributed::Environment& environment;
  const c10::Device& device;
  distributed::Communicator& communicator;
  train::RunFolder* folder;  // rank 0's; null on the other ranks
};

// The task of the command, its files read and checked.
absl::StatusOr<std::shared_ptr<const tasks::Task>> OpenTask(const TrainingCommand& command,
                                                            const ExperimentConfig& config,
                                                            distributed::Communicator& comm) {
  ASSIGN_OR_RETURN(std::unique_ptr<tasks::Task> task,
                   tasks::MakeTask(command.task(config),
                                   config.ForTask({comm.rank(), comm.world_size()}, true)));
  return std::shared_ptr<const tasks::Task>(std::move(task));
}

// No input of the run is one of the outputs it writes over.
absl::Status CheckInputs(const train::RunFolder& folder, const ExperimentConfig& config,
                         const tasks::Task& task) {
  RETURN_IF_ERROR(folder.CheckInput("prepare.vocab", config.prepare.vocab));
  if (const tasks::PackedSet* train = task.train()) {
    RETURN_IF_ERROR(folder.CheckInput(train->key, train->path));
  }
  for (const tasks::PackedSet& set : task.evaluation()) {
    RETURN_IF_ERROR(folder.CheckInput(set.key, set.path));
  }
  return absl::OkStatus();
}

// The finished run's export: a Hugging Face folder of the task's head.
train::ModelExport ExportOf(const ExperimentConfig& config, std::string task) {
  return [&config, task](const torch::nn::Module& model, const tasks::ExportHead& head,
                         const std::string& dir) {
    HfExportOptions options;
    options.vocab = config.prepare.vocab;
    options.lower_case = config.prepare.lower_case;
    options.existing = Existing::kReplace;
    options.head = head;
    options.task = task;
    return ExportHuggingFace(model, config.model.bert, options, dir);
  };
}

// Checks everything the run needs and builds its trainer; writes nothing
// but a new run's packed rows and the effective config, once all is checked.
absl::StatusOr<std::unique_ptr<train::Trainer>> Prepare(const Args& args,
                                                        const TrainingCommand& command,
                                                        const Setup& s, Parts& parts) {
  const ExperimentConfig& config = parts.config;
  const std::string resume =
      command.resume_switch && args.Has("resume") ? "auto" : args.Get("resume");
  ASSIGN_OR_RETURN(parts.resume, train::FindResumePoint(resume, args.Has("force"), config,
                                                        command.task(config), s.environment));
  if (s.folder && !parts.resume) {
    RETURN_IF_ERROR(s.folder->AcceptNewRun(ResumeFlag(command)));
  }
  // Each rank checks the checksums of its share of the store's shards.
  ASSIGN_OR_RETURN(parts.task, OpenTask(command, config, s.communicator));
  if (s.folder) RETURN_IF_ERROR(CheckInputs(*s.folder, config, *parts.task));
  FaultPoint("checks", 0, s.communicator.rank());
  ASSIGN_OR_RETURN(parts.plan, train::TrainingPlan::Make(config, parts.task, *command.regimen,
                                                         s.communicator.rank(),
                                                         s.communicator.world_size(), s.device));
  logging::Get(command.name)->info("{}", parts.plan.description);
  for (const std::string& idle : config.InactiveSettings(
           parts.given, *command.regimen, parts.plan.precision, s.device.is_cuda(),
           s.communicator.world_size(), parts.resume.has_value())) {
    logging::Get(command.name)->warn("{}", idle);
  }
  parts.plan.checkpoint.resume_command = ResumeCommand(args, command);
  // The effective config, saved with every checkpoint.
  parts.plan.checkpoint.config_yaml =
      absl::StrCat(config::Dump(config), "\n# effective: ", parts.plan.description, "\n");
  train::TrainerSetup setup{config,
                            parts.task,
                            parts.plan,
                            s.communicator,
                            parts.resume ? &*parts.resume : nullptr,
                            [] { return stop_requested.load(); },
                            args.Has("force"),
                            nullptr,
                            ResumeFlag(command)};
  if (command.exports) setup.export_model = ExportOf(config, command.task(config));
  ASSIGN_OR_RETURN(auto trainer, train::Trainer::Create(setup));
  if (s.folder && !trainer->finished()) {
    if (!parts.resume) {
      const tasks::PackedSet& train = *parts.task->train();
      if (!train.packed_with.empty()) {
        RETURN_IF_ERROR(
            train.rows->Write(config.run.output_dir + "/pack.pbpack", train.packed_with));
      }
    }
    RETURN_IF_ERROR(WriteEffectiveConfig(config, parts.plan.description));
  }
  return trainer;
}

// A run that failed while it trained (a full disk under its logs, a lost
// device, a rank gone) names what survived and the command that continues
// it, unless its message does; a refusal of what the user gave does not.
absl::Status WithResume(const absl::Status& status, const ExperimentConfig& config,
                        const std::string& resume_command) {
  const absl::StatusCode code = status.code();
  if (code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kFailedPrecondition ||
      code == absl::StatusCode::kOutOfRange || absl::StrContains(status.message(), "--resume")) {
    return status;
  }
  const std::string newest = train::LatestCheckpoint(config.run.output_dir);
  return absl::Status(
      code, absl::StrCat(status.message(), "; ",
                         newest.empty() ? "the run has no checkpoint to continue from"
                                        : absl::StrCat("the newest checkpoint is ", newest,
                                                       ": once the cause is fixed, continue with ",
                                                       resume_command)));
}

}  // namespace

absl::Status RunTraining(const Args& args, const TrainingCommand& command) {
  SetResumeFlag(ResumeFlag(command));
  Parts parts;
  ASSIGN_OR_RETURN(parts.config, LoadConfig(args, command.shorthands, "", &parts.given));
  RETURN_IF_ERROR(command.regimen->Complete(parts.given, &parts.config));
  const ExperimentConfig& config = parts.config;
  ASSIGN_OR_RETURN(distributed::Environment environment, config.dist.ReadEnvironment());
  // The one place the device is decided; the plan carries it from here.
  ASSIGN_OR_RETURN(const c10::Device device,
                   train::ResolveDevice(config.run.device, environment.local_rank));
  RETURN_IF_ERROR(train::UseDevice(device));
  ASSIGN_OR_RETURN(auto communicator, JoinProcessGroup(config, environment, device, command.name));
  // Rank 0 writes the run folder, and holds it until the process ends.
  std::optional<train::RunFolder> folder;
  std::vector<std::string> release_paths;
  if (communicator->rank() == 0) {
    ASSIGN_OR_RETURN(train::RunFolder claimed,
                     train::RunFolder::Claim(config.run.output_dir, command.task(config)));
    folder.emplace(std::move(claimed));
    release_paths = folder->ReleasePaths();
    InstallHandlersBeforeTraining(&release_paths);
  }
  // However the command ends (a status, or an exception on its way to
  // CommandLine), a refused run leaves the folder as it was, and a run that
  // wrote nothing (refused as it began to train, or resumed from a run that
  // had finished) as it found it.
  train::RunFolderRelease leave(folder);
  absl::StatusOr<std::unique_ptr<train::Trainer>> prepared = Prepare(
      args, command, {environment, device, *communicator, folder ? &*folder : nullptr}, parts);
  if (!prepared.ok()) {
    // A resumed run that cannot write (its config on a full disk) still
    // has its checkpoints to continue from, and says so.
    return parts.resume ? WithResume(prepared.status(), config, ResumeCommand(args, command))
                        : prepared.status();
  }
  std::unique_ptr<train::Trainer> trainer = std::move(*prepared);
  leave.Started();
  InstallStopHandlers();
  WarnIfSlowKernels();
  absl::StatusOr<train::TrainResult> result = trainer->Train();
  if (!result.ok()) return WithResume(result.status(), config, ResumeCommand(args, command));
  if (folder) std::cout << command.report(*result, config, ResumeCommand(args, command));
  return absl::OkStatus();
}

}  // namespace pbert::app
