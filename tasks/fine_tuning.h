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

// What a family of fine-tuning tasks gives the task they share, beside
// its name and sets (tasks::Task).
struct FineTuning {
  HeadKind head = HeadKind::kClasses;
  int64_t labels = 2;  // the classifier's classes (1: a score)
  ExportHead export_head;
  // The evaluation of one of the task's sets on a device.
  std::function<std::unique_ptr<SetEvaluation>(const PackedSet&, const c10::Device&)> evaluate;
};
std::unique_ptr<Task> MakeFineTuningTask(std::string name, std::unique_ptr<PackedSet> train,
                                         std::vector<PackedSet> evaluation, FineTuning parts);

// What every fine-tuning task checks first: that the finetune section names
// the files it reads, finetune.max_seq_length against the model's positions;
// then the tokenizer of prepare.vocab and prepare.lower_case, checked
// against the model's vocabulary.
absl::StatusOr<std::shared_ptr<const data::Tokenizer>> FineTuningTokenizer(
    const TaskSetup& setup);

// `features` of the file `path` (named by `key`) as a set named `name`,
// packed with the packing section (packing.algorithm none: one per row).
absl::StatusOr<PackedSet> PackFeatures(std::string name, std::string key, std::string path,
                                       std::vector<Feature> features, const TaskSetup& setup);

}  // namespace pbert::tasks
