// The fine-tuning tasks (tasks/task.h) of SQuAD and GLUE: a head over a
// pretrained BERT (model/task_heads.h), features packed as pretraining packs
// its instances, each sequence's loss on its own averaged over the step's
// sequences, and evaluations scored as the official scripts score them.
// docs/finetuning.md.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"
#include "tasks/batches.h"
#include "tasks/glue.h"
#include "tasks/tasks.h"

namespace pbert::tasks {

absl::StatusOr<std::unique_ptr<Task>> MakeSquad(const TaskSetup& setup);
absl::StatusOr<std::unique_ptr<Task>> MakeGlue(const GlueTask& glue, const TaskSetup& setup);

// What a fine-tuning task has beside its name, its sets and its head: the
// Hugging Face class it exports and the evaluation of one of its sets on a
// device.
struct FineTuning {
  ExportHead export_head;
  std::function<std::unique_ptr<SetEvaluation>(const PackedSet&, const c10::Device&)> evaluate;
};

// What every fine-tuning task shares: its sets' features, packed; its
// export and evaluations; each sequence's loss divided by the step's
// sequences (the one total, "sequences"). A head is a task type of its own
// (SpanTask, ClassTask below; the token classifier and the multi-label
// classifier in their files), each its model, targets, loss and metrics.
class FineTuningTask : public Task {
 public:
  FineTuningTask(std::string name, std::unique_ptr<PackedSet> train,
                 std::vector<PackedSet> evaluation, FineTuning parts)
      : Task(std::move(name), std::move(train), std::move(evaluation)), parts_(std::move(parts)) {}

  // Hugging Face's models without a pooler (question answering, token
  // classification) leave it untrained and unexported.
  bool Trains(const std::string& name) const override;
  const std::vector<std::string>& TotalNames() const override;
  std::unique_ptr<SetEvaluation> Evaluate(const PackedSet& set,
                                          const c10::Device& device) const override {
    return parts_.evaluate(set, device);
  }
  ExportHead Export() const override { return parts_.export_head; }

 protected:
  // `set`'s features (an internal error where it has none).
  static absl::StatusOr<const std::vector<Feature>*> FeaturesOf(const PackedSet& set);
  // Each sequence's summed loss over the step's sequences (`totals`' first).
  static at::Tensor PerStepSequences(const at::Tensor& loss, const at::Tensor& totals);

 private:
  FineTuning parts_;
};

// The span head (SQuAD): start and end logits over each sequence's tokens.
std::unique_ptr<Task> MakeSpanTask(std::string name, std::unique_ptr<PackedSet> train,
                                   std::vector<PackedSet> evaluation, FineTuning parts);
// A classifier of `labels` classes on each sequence's [CLS] through the
// pooler (GLUE), or of one score where the export's problem_type is
// "regression" (STS-B).
std::unique_ptr<Task> MakeClassTask(std::string name, std::unique_ptr<PackedSet> train,
                                    std::vector<PackedSet> evaluation, FineTuning parts,
                                    int64_t labels);

// The training FLOPs of the encoder, the pooler and a classifier of
// `labels` outputs over every sequence of `work`.
double ClassifierFlops(const model::BertOptions& options, const model::BatchWork& work,
                       int64_t labels);

// What every fine-tuning task checks first: that the finetune section names
// the files it reads, finetune.max_seq_length against the model's positions;
// then the tokenizer of prepare.vocab and prepare.lower_case, checked
// against the model's vocabulary.
absl::StatusOr<std::shared_ptr<const data::Tokenizer>> FineTuningTokenizer(
    const TaskSetup& setup);

// That the finetune section names no second file of a kind (MNLI's
// eval_mismatched_file and predict_mismatched_file): a task of one file of
// each.
absl::Status CheckOneFileOfEach(const TaskSetup& setup);

// The labels of finetune.labels ("a,b,c": in class order), each trimmed;
// none where it is empty.
std::vector<std::string> ListOfLabels(const std::string& labels);

// `features` of the file `path` (named by `key`) as a set named `name`,
// packed with the packing section (packing.algorithm none: one per row).
absl::StatusOr<PackedSet> PackFeatures(std::string name, std::string key, std::string path,
                                       std::vector<Feature> features, const TaskSetup& setup);

}  // namespace pbert::tasks
