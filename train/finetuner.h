// Fine-tuning (`packed-bert finetune`): a pretrained BERT trained on SQuAD
// 1.1 or a GLUE task with the features packed as pretraining packs its
// instances, each sequence's loss on its own (tasks/batches.h), Adam with
// decoupled weight decay (or LAMB) at a rate warmed up and decayed
// linearly, an evaluation scored as the official scripts score after each
// epoch, checkpoints that resume exactly, and the model exported for
// Hugging Face. docs/finetuning.md describes it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/communicator.h"
#include "train/experiment.h"

namespace torch::nn {
class Module;
}

namespace pbert::train {

// What the exported model is: Hugging Face's class, and its labels (none
// for question answering; one, unnamed, for a score).
struct FinetunedModel {
  std::string architecture;  // BertForQuestionAnswering or BertForSequenceClassification
  std::vector<std::string> labels;
  bool regression = false;
};

struct FinetuneSetup {
  const ExperimentConfig& config;
  // The run's process group (null: this process alone) and this process's
  // local rank (its GPU). Rank 0 writes the run's files.
  distributed::Communicator* communicator = nullptr;
  int local_rank = 0;
  bool resume = false;                   // from the newest checkpoint in run.output_dir
  std::function<bool()> stop_requested;  // polled before each step (SIGINT, SIGTERM)
  // Writes the fine-tuned weights as a Hugging Face folder at `dir`.
  std::function<absl::Status(const torch::nn::Module&, const FinetunedModel&,
                             const std::string& dir)>
      export_model;
  // Called once everything is read and checked, before the first file of
  // the run is written (the effective config).
  std::function<absl::Status()> on_start;
  // Only evaluate `weights` (a fine-tuned model of this task: a checkpoint
  // or its model.safetensors); nothing is trained.
  std::string evaluate_only;
};

struct FinetuneResult {
  std::string status;  // "done", or "interrupted" (resumable)
  int64_t steps = 0, total_steps = 0;
  uint64_t train_features = 0, train_rows = 0;
  double packing_factor = 1;
  double train_seconds = 0;       // this session's steps
  double tokens_per_second = 0;   // real tokens, this session
  std::vector<std::pair<std::string, double>> metrics;  // of the last evaluation
  std::string model_dir;    // the Hugging Face export ("" if none)
  std::string predictions;  // SQuAD's predictions.json ("" for GLUE)
};

absl::StatusOr<FinetuneResult> Finetune(const FinetuneSetup& setup);

}  // namespace pbert::train
