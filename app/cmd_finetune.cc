#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "app/commands.h"
#include "app/config.h"
#include "app/training.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "tasks/tasks.h"
#include "train/device.h"
#include "train/evaluation.h"
#include "train/run_folder.h"

namespace pbert::app {
namespace {

// The flags that set the finetune section's keys.
const std::vector<FlagKey>& FinetuneShorthands() {
  static const std::vector<FlagKey> shorthands = {{"task", "finetune.task"},
                                                  {"train", "finetune.train_file"},
                                                  {"eval", "finetune.eval_file"},
                                                  {"init", "finetune.init_checkpoint"}};
  return shorthands;
}

void AddFinetuneMetrics(const tasks::Metrics& metrics, nlohmann::ordered_json* out) {
  for (const auto& [name, value] : metrics) (*out)[name] = value;
}

// The one JSON line a fine-tuning run prints.
std::string FinetuneReport(const train::TrainResult& r, const ExperimentConfig& config,
                   const std::string&) {
  nlohmann::ordered_json out;
  out["task"] = config.finetune.task;
  out["status"] = r.status;
  AddFinetuneMetrics(r.metrics, &out);
  out["steps"] = r.step;
  out["total_steps"] = r.total_steps;
  out["train_features"] = r.train_sequences;
  out["train_rows"] = r.train_rows;
  out["packing_factor"] = r.packing_factor;
  out["train_seconds"] = r.session_step_seconds;
  out["tokens_per_second"] =
      r.session_step_seconds > 0 ? r.session_tokens / r.session_step_seconds : 0.0;
  for (const std::string& file : r.files) {
    if (file.size() >= 16 && file.substr(file.size() - 16) == "predictions.json") {
      out["predictions"] = file;
    }
  }
  if (!r.model_dir.empty()) out["model"] = r.model_dir;
  if (!r.checkpoint.empty()) out["checkpoint"] = r.checkpoint;
  return out.dump() + "\n";
}

// --evaluate W: the weights of a fine-tuned model scored on the dev file,
// nothing trained.
absl::Status RunEvaluate(const Args& args) {
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args, FinetuneShorthands()));
  RETURN_IF_ERROR(CheckOutputDir(config));
  ASSIGN_OR_RETURN(distributed::Environment environment, config.dist.ReadEnvironment());
  ASSIGN_OR_RETURN(const c10::Device device,
                   train::ResolveDevice(config.run.device, environment.local_rank));
  RETURN_IF_ERROR(train::UseDevice(device));
  ASSIGN_OR_RETURN(auto communicator, JoinProcessGroup(config, environment, device, "finetune"));
  ASSIGN_OR_RETURN(const model::Precision precision,
                   train::EvaluationPrecision(config.model.precision, device));
  ASSIGN_OR_RETURN(
      std::unique_ptr<tasks::Task> task,
      tasks::MakeTask(config.finetune.task,
                      config.ForTask({communicator->rank(), communicator->world_size()}, false)));
  data::LoaderOptions options = config.data.loader;
  options.rows_per_batch = config.finetune.eval_batch_rows;
  options.rank = communicator->rank();
  options.world_size = communicator->world_size();
  WarnIfSlowKernels();
  ASSIGN_OR_RETURN(tasks::Scored scored,
                   train::EvaluateWeights(*task, args.Get("evaluate"), config.model.bert,
                                          precision, device, options, *communicator));
  if (communicator->rank() != 0) return absl::OkStatus();
  nlohmann::ordered_json out;
  out["task"] = config.finetune.task;
  out["status"] = "done";
  AddFinetuneMetrics(scored.metrics, &out);
  if (!scored.files.empty()) RETURN_IF_ERROR(CreateOutputDir(config));
  for (const auto& [name, text] : scored.files) {
    const std::string path = absl::StrCat(config.run.output_dir, "/", name);
    RETURN_IF_ERROR(WriteFileAtomically(path, text));
    if (name == "predictions.json") out["predictions"] = path;
  }
  std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

absl::Status RunFinetune(const Args& args) {
  if (args.Has("evaluate")) return RunEvaluate(args);
  TrainingCommand command;
  command.name = "finetune";
  command.regimen = train::Regimen::kFineTuning;
  command.shorthands = FinetuneShorthands();
  command.task = [](const ExperimentConfig& config) { return config.finetune.task; };
  command.resume_switch = true;
  command.exports = true;
  command.report = FinetuneReport;
  return RunTraining(args, command);
}

}  // namespace

Command FinetuneCommand() {
  Command command;
  command.name = "finetune";
  command.summary = "fine-tune a pretrained BERT on SQuAD 1.1 or a GLUE task, packed";
  command.usage =
      "finetune --config FILE [--task T --train F --eval F --init W] [--resume] [--force] "
      "[--evaluate W] [--set SECTION.KEY=VALUE ...]";
  command.details =
      "Reads the task's files as distributed (SQuAD's train-v1.1.json and dev-v1.1.json; a GLUE\n"
      "task's train.tsv and dev.tsv), packs the features with the packing section, trains from\n"
      "finetune.init_checkpoint for finetune.epochs with Adam (decoupled weight decay) or LAMB\n"
      "in the training loop of `train` (its levers, logs, checkpoints and resume), evaluates\n"
      "after each epoch as the official scripts score (SQuAD: exact match and F1,\n"
      "RUN_DIR/predictions.json; GLUE: the task's metrics) and exports RUN_DIR/model, a Hugging\n"
      "Face folder. Writes RUN_DIR/metrics.jsonl, TensorBoard events and checkpoints/step-N;\n"
      "SIGINT or SIGTERM saves and exits 0, --resume continues exactly. Prints one JSON line.\n"
      "Under `packed-bert launch`, torchrun, Slurm or mpirun the ranks share each step's rows\n"
      "and the evaluation; rank 0 writes the run's files and prints.";
  command.flags = {
      {"task", "T", "squad, cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli (finetune.task)"},
      {"train", "FILE", "the training file (finetune.train_file)"},
      {"eval", "FILE", "the dev file (finetune.eval_file)"},
      {"init", "W", "the pretrained weights (finetune.init_checkpoint)"},
      {"resume", "", "continue from the newest checkpoint in run.output_dir"},
      {"force", "", "resume even if training-relevant config keys changed"},
      {"evaluate", "W", "only score the fine-tuned weights W on the dev file"},
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunFinetune;
  return command;
}

}  // namespace pbert::app
