#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "app/commands.h"
#include "app/config.h"
#include "app/training.h"
#include "common/atomic_file.h"
#include "common/folders.h"
#include "common/logging.h"
#include "common/outputs.h"
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
                                                  {"predict", "finetune.predict_file"},
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
  // The run's training time over all its sessions; the speed of this
  // session's steps (none where a finished run was only resumed).
  out["train_seconds"] = r.train_seconds;
  if (r.session_step_seconds > 0) {
    out["tokens_per_second"] = r.session_tokens / r.session_step_seconds;
  }
  for (const std::string& file : r.files) {
    if (file.size() >= 16 && file.substr(file.size() - 16) == "predictions.json") {
      out["predictions"] = file;
    }
  }
  if (!r.model_dir.empty()) out["model"] = r.model_dir;
  if (!r.predict_dir.empty()) out["predict"] = r.predict_dir;
  if (!r.checkpoint.empty()) out["checkpoint"] = r.checkpoint;
  return out.dump() + "\n";
}

// --evaluate W: the fine-tuned weights W scored on the dev file and
// predicting the file without labels, nothing trained; the files go into
// --output (RUN_DIR/evaluation), a folder written whole, never over a run.
absl::Status RunEvaluate(const Args& args) {
  const std::string weights = args.Get("evaluate");
  if (weights.empty()) {
    return absl::InvalidArgumentError(
        "--evaluate needs the fine-tuned weights: a checkpoint of a finetune run, or its "
        "model/model.safetensors");
  }
  for (const char* flag : {"train", "init", "resume", "force"}) {
    if (args.Has(flag)) {
      logging::Get("finetune")->warn("--{} does nothing here: --evaluate trains nothing", flag);
    }
  }
  std::set<std::string> given;
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args, FinetuneShorthands(), "", &given));
  for (const std::string& idle : ExperimentConfig::EvaluationIdleSettings(given)) {
    logging::Get("finetune")->warn("{}", idle);
  }
  const std::string output =
      args.Has("output") ? args.Get("output") : config.run.output_dir + "/evaluation";
  RETURN_IF_ERROR(
      CheckOutputTarget(output, OutputKind::kEvaluation, args.Has("overwrite"), "--output"));
  ASSIGN_OR_RETURN(distributed::Environment environment, config.dist.ReadEnvironment());
  ASSIGN_OR_RETURN(const c10::Device device,
                   train::ResolveDevice(config.run.device, environment.local_rank));
  RETURN_IF_ERROR(train::UseDevice(device));
  ASSIGN_OR_RETURN(auto communicator, JoinProcessGroup(config, environment, device, "finetune"));
  ASSIGN_OR_RETURN(const model::Precision precision,
                   train::EvaluationPrecision(config.model, device));
  ASSIGN_OR_RETURN(
      std::unique_ptr<tasks::Task> task,
      tasks::MakeTask(config.finetune.task,
                      config.ForTask({communicator->rank(), communicator->world_size()}, false)));
  data::LoaderOptions options = config.data.loader;
  options.rows_per_batch = config.finetune.eval_batch_rows;
  options.rank = communicator->rank();
  options.world_size = communicator->world_size();
  WarnIfSlowKernels();
  ASSIGN_OR_RETURN(train::WeightsEvaluation result,
                   train::EvaluateWeights(*task, weights, config.model.bert, precision, device,
                                          options, *communicator));
  if (communicator->rank() != 0) return absl::OkStatus();
  nlohmann::ordered_json out;
  out["task"] = config.finetune.task;
  out["status"] = "done";
  out["weights"] = weights;
  AddFinetuneMetrics(result.scored.metrics, &out);
  AddFinetuneMetrics(result.predicted.counts, &out);
  std::vector<std::pair<std::string, std::string>> files = std::move(result.scored.files);
  for (auto& [name, text] : result.predicted.files) {
    files.emplace_back("predict/" + name, std::move(text));
  }
  out["output"] = output;
  for (const auto& [name, text] : files) out["files"].push_back(name);
  files.emplace_back("evaluation.json", out.dump(2) + "\n");
  const std::string parent = std::filesystem::path(output).parent_path().string();
  if (!parent.empty()) RETURN_IF_ERROR(CreateFolder(parent, "--output"));
  RETURN_IF_ERROR(WriteFolderAtomically(output, files, ExistingOutput(args)));
  std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

absl::Status RunFinetune(const Args& args) {
  if (args.Has("evaluate")) return RunEvaluate(args);
  for (const char* flag : {"output", "overwrite"}) {
    if (args.Has(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " is --evaluate's; a training run writes into run.output_dir"));
    }
  }
  TrainingCommand command;
  command.name = "finetune";
  command.regimen = &train::FineTuningRegimen();
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
  command.summary =
      "fine-tune a pretrained BERT on SQuAD, GLUE, CoNLL NER or multi-label data, packed";
  command.usage =
      "finetune --config FILE [--task T --train F --eval F --predict F --init W] [--resume] "
      "[--force] [--set SECTION.KEY=VALUE ...]\n"
      "       packed-bert finetune --config FILE --evaluate W [--eval F] [--predict F] [--output "
      "DIR] "
      "[--overwrite]";
  command.details =
      "Reads the task's files as distributed (SQuAD's train-v1.1.json and dev-v1.1.json, or 2.0's\n"
      "with finetune.version_2_with_negative; a GLUE task's train.tsv and dev.tsv, MNLI's\n"
      "mismatched dev file beside; ner: CoNLL-2003's train.txt and valid.txt; multilabel:\n"
      "GoEmotions' train.tsv and dev.tsv), packs the features with the packing section, trains\n"
      "from finetune.init_checkpoint for finetune.epochs with Adam (decoupled weight decay) or\n"
      "LAMB in the training loop of `train` (its levers, logs, checkpoints and resume), evaluates\n"
      "after each epoch as the official scripts score (SQuAD: exact match and F1,\n"
      "RUN_DIR/predictions.json; GLUE: the task's metrics; ner: conlleval's entity F1;\n"
      "multilabel: micro and macro F1), exports RUN_DIR/model, a Hugging Face folder, and\n"
      "predicts the file without labels (--predict: SQuAD questions, a GLUE test.tsv, a CoNLL\n"
      "or GoEmotions file) into RUN_DIR/predict (predictions.json and nbest_predictions.json,\n"
      "the GLUE benchmark's submission file, predictions.txt in CoNLL's layout, or\n"
      "predictions.tsv). Writes RUN_DIR/metrics.jsonl, TensorBoard events and\n"
      "checkpoints/step-N; SIGINT or SIGTERM saves and exits 0, --resume continues exactly.\n"
      "Prints one JSON line. --evaluate W trains nothing: it scores and predicts with W into\n"
      "--output. Under `packed-bert launch`, torchrun, Slurm or mpirun the ranks share each\n"
      "step's rows and the evaluation; rank 0 writes the run's files and prints.";
  command.flags = {
      {"task", "T", absl::StrCat(absl::StrJoin(tasks::TaskNames(), ", "), " (finetune.task)")},
      {"train", "FILE", "the training file (finetune.train_file)"},
      {"eval", "FILE", "the dev file (finetune.eval_file)"},
      {"init", "W", "the pretrained weights (finetune.init_checkpoint)"},
      {"resume", "", "continue from the newest checkpoint in run.output_dir"},
      {"force", "", "resume even if training-relevant config keys changed"},
      {"predict", "FILE", "a file without labels to predict (finetune.predict_file)"},
      {"evaluate", "W",
       "train nothing: score the fine-tuned weights W on the dev file and predict the file to "
       "predict, into --output"},
      {"output", "DIR",
       "--evaluate's folder, written whole (default RUN_DIR/evaluation): evaluation.json, the dev "
       "file's predictions, predict/"},
      OverwriteFlag(OutputKindName(OutputKind::kEvaluation)),
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunFinetune;
  return command;
}

}  // namespace pbert::app
