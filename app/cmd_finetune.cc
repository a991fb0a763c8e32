#include <signal.h>

#include <atomic>
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "app/commands.h"
#include "app/config.h"
#include "app/hf_export.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "train/device.h"
#include "train/finetuner.h"
#include "train/run_folder.h"

namespace pbert::app {
namespace {

std::atomic<bool> finetune_stop{false};

void OnFinetuneStop(int) { finetune_stop.store(true); }

absl::Status RunFinetune(const Args& args) {
  ASSIGN_OR_RETURN(ExperimentConfig config,
                   LoadConfig(args, {{"task", "finetune.task"},
                                     {"train", "finetune.train_file"},
                                     {"eval", "finetune.eval_file"},
                                     {"init", "finetune.init_checkpoint"}}));
  RETURN_IF_ERROR(CheckOutputDir(config));
  ASSIGN_OR_RETURN(distributed::Environment environment, config.dist.ReadEnvironment());
  ASSIGN_OR_RETURN(const c10::Device device,
                   train::ResolveDevice(config.run.device, environment.local_rank));
  RETURN_IF_ERROR(train::UseDevice(device));
  ASSIGN_OR_RETURN(auto communicator,
                   JoinProcessGroup(config, environment, device, "finetune"));
  // Rank 0 holds the run folder (run.lock) while it runs, so that two runs
  // never write into one; a run refused before it writes leaves the folder
  // as it found it.
  std::optional<train::RunFolder> folder;
  if (communicator->rank() == 0) {
    ASSIGN_OR_RETURN(train::RunFolder claimed, train::RunFolder::Claim(config.run.output_dir));
    folder.emplace(std::move(claimed));
  }
  train::RunFolderRelease leave(folder);
  WarnIfSlowKernels();
  // The first SIGINT or SIGTERM finishes the step and saves; a second ends
  // the process.
  struct sigaction action {};
  action.sa_handler = OnFinetuneStop;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  train::FinetuneSetup setup{config, communicator.get(), environment.local_rank,
                             false, {}, {}, {}, ""};
  setup.resume = args.Has("resume");
  setup.evaluate_only = args.Get("evaluate");
  setup.stop_requested = [] { return finetune_stop.load(); };
  setup.export_model = [&](const torch::nn::Module& module, const train::FinetunedModel& m,
                           const std::string& dir) {
    HfExportOptions options;
    options.vocab = config.prepare.vocab;
    options.lower_case = config.prepare.lower_case;
    options.existing = Existing::kReplace;
    options.architecture = m.architecture;
    options.labels = m.labels;
    options.regression = m.regression;
    return ExportHuggingFace(module, config.model.bert, options, dir);
  };
  setup.on_start = [&] {
    leave.Started();
    return setup.evaluate_only.empty() ? WriteEffectiveConfig(config) : absl::OkStatus();
  };
  ASSIGN_OR_RETURN(train::FinetuneResult result, train::Finetune(setup));
  nlohmann::ordered_json out;
  out["task"] = config.finetune.task;
  out["status"] = result.status;
  for (const auto& [name, value] : result.metrics) out[name] = value;
  if (setup.evaluate_only.empty()) {
    out["steps"] = result.steps;
    out["total_steps"] = result.total_steps;
    out["train_features"] = result.train_features;
    out["train_rows"] = result.train_rows;
    out["packing_factor"] = result.packing_factor;
    out["train_seconds"] = result.train_seconds;
    out["tokens_per_second"] = result.tokens_per_second;
  }
  if (!result.predictions.empty()) out["predictions"] = result.predictions;
  if (!result.model_dir.empty()) out["model"] = result.model_dir;
  if (communicator->rank() == 0) std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

}  // namespace

Command FinetuneCommand() {
  Command command;
  command.name = "finetune";
  command.summary = "fine-tune a pretrained BERT on SQuAD 1.1 or a GLUE task, packed";
  command.usage =
      "finetune --config FILE [--task T --train F --eval F --init W] [--resume] "
      "[--evaluate W] [--set SECTION.KEY=VALUE ...]";
  command.details =
      "Reads the task's files as distributed (SQuAD's train-v1.1.json and dev-v1.1.json; a GLUE\n"
      "task's train.tsv and dev.tsv), packs the features with the packing section, trains from\n"
      "finetune.init_checkpoint for finetune.epochs with Adam (decoupled weight decay) or LAMB,\n"
      "evaluates after each epoch as the official scripts score (SQuAD: exact match and F1,\n"
      "RUN_DIR/predictions.json; GLUE: the task's metrics) and exports RUN_DIR/model, a Hugging\n"
      "Face folder. Writes RUN_DIR/eval.jsonl, TensorBoard events and checkpoints/step-N;\n"
      "SIGINT or SIGTERM saves and exits 0, --resume continues exactly. Prints one JSON line.\n"
      "Under `packed-bert launch`, torchrun, Slurm or mpirun the ranks share each step's rows\n"
      "and the evaluation; rank 0 writes the run's files and prints.";
  command.flags = {
      {"task", "T", "squad, cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli (finetune.task)"},
      {"train", "FILE", "the training file (finetune.train_file)"},
      {"eval", "FILE", "the dev file (finetune.eval_file)"},
      {"init", "W", "the pretrained weights (finetune.init_checkpoint)"},
      {"resume", "", "continue from the newest checkpoint in run.output_dir"},
      {"evaluate", "W", "only score the fine-tuned weights W on the dev file"},
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunFinetune;
  return command;
}

}  // namespace pbert::app
