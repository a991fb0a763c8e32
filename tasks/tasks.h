// The tasks by name, and what one is made from: the config's sections a
// task reads. The one place that knows every task; everything else holds
// a tasks::Task.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/config.h"
#include "data/packing/pack.h"
#include "data/prepare.h"
#include "data/store.h"
#include "model/config.h"
#include "tasks/config.h"
#include "tasks/task.h"

namespace pbert::tasks {

// The task `train` runs.
inline constexpr char kPretraining[] = "pretraining";

struct TaskSetup {
  const data::DataConfig& data;
  const data::PrepareOptions& prepare;  // the vocabulary of fine-tuning's files
  const data::PackingConfig& packing;
  const model::ModelConfig& model;
  const FinetuneConfig& finetune;
  uint64_t seed = 0;         // run.seed: the packing's
  bool eval_packed = true;   // train.eval_packed
  data::ShardShare share;    // the store's shards this rank checks
  // What is read: the training set and the evaluation sets (false: only
  // what an evaluation of given weights reads).
  bool training = true;
};

// The task named `name` ("pretraining", "squad" or a GLUE task's name),
// its files read and checked (an error names the file, key and record);
// writes nothing.
absl::StatusOr<std::unique_ptr<Task>> MakeTask(const std::string& name, const TaskSetup& setup);

// The task whose Hugging Face export alone is a model of `architecture`
// (a config.json's one "architectures" entry, where no "finetuning_task"
// names the task): pretraining's BertForPreTraining; "" for a head that
// several tasks export (BertForSequenceClassification) or none.
std::string TaskOfArchitecture(const std::string& architecture);

// The finetune keys that only some tasks read ("finetune.labels", SQuAD's
// windows and answers, ...), and whether task `name` reads `key` of them:
// another task's setting of one does nothing (the run names it at its
// start).
std::vector<std::string> TaskOwnKeys();
bool TaskReadsKey(const std::string& name, const std::string& key);

}  // namespace pbert::tasks
