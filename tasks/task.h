// A task: what differs between pretraining (masked LM and next sentence),
// SQuAD's answer spans and GLUE's classes or scores. The one training loop
// (train/trainer.h) runs any task; a task owns only what differs: the
// sequences it packs, the targets of a micro-batch (made on the loader's
// threads), its model with its head, its per-sequence sums over the step's
// totals, its named metrics, its evaluation and the Hugging Face head it
// exports. After composer's ComposerModel (forward, loss, eval_forward,
// update_metric) and torchtitan's loss and validator components
// (docs/architecture.md, One loop, many tasks).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch.h"
#include "data/packing/pack_index.h"
#include "data/source.h"
#include "model/bert.h"
#include "model/flops.h"
#include "model/inputs.h"
#include "tasks/feature.h"

namespace pbert::tasks {

// `module` as the head `T` that a task's MakeModel made; a model of another
// head is a logic error, thrown (the loop turns LibTorch's and the step's
// exceptions into a status), never a null dereference.
template <class T>
T& ModuleAs(torch::nn::Module& module) {
  T* head = module.as<T>();
  if (head == nullptr) {
    throw std::logic_error("a task was given a model of another head: " + module.name());
  }
  return *head;
}

// Sequences a task reads (pretraining instances, or fine-tuning features),
// and the rows they are packed into.
struct PackedSet {
  std::string name;  // "train", "dev", "dev_matched", ...: in messages and metric names
  std::string key;   // the config key or flag that named it: data.store, finetune.train_file, ...
  std::string path;  // what it named
  std::shared_ptr<const data::SequenceSource> sequences;
  std::shared_ptr<const data::PackIndex> rows;
  data::BatchShape shape;   // S and D of its micro-batches
  // The algorithm that packed the rows now, where they are kept with the
  // run (RUN_DIR/pack.pbpack, so that it can be repeated); "" otherwise.
  std::string packed_with;
  // Its sequences and targets, whatever their path: a resume compares it
  // with the checkpoint's. 0: unknown.
  uint64_t checksum = 0;
  // A fine-tuning set's features, record for record; null in pretraining,
  // whose instances hold their targets.
  std::shared_ptr<const std::vector<Feature>> features;
  // The set has targets to score against (false: a file to predict).
  bool labeled = true;

  double packing_factor() const {
    return static_cast<double>(rows->sequences()) / static_cast<double>(rows->rows());
  }
};

// A task's model: BERT with the task's head, named as Hugging Face's, and
// its encoder, where the encoder-level levers act (fp8 scales, the one QKV
// buffer, master copies).
struct TaskModel {
  std::shared_ptr<torch::nn::Module> module;
  model::BertModel bert{nullptr};
};

// The head's outputs for a micro-batch, in the task's order.
using Outputs = std::vector<at::Tensor>;

// One micro-batch's share of a step: its loss, each sequence's loss divided
// by the step's totals (so that the micro-batches' losses add up to the
// step's; with gradients), and the task's sums ([SumNames().size()]
// float64 on the device, detached), which are added over micro-batches and
// ranks before anything is divided.
struct MicroBatchSums {
  at::Tensor loss;
  at::Tensor sums;
};

// Named values, in the order a line shows them.
using Metrics = std::vector<std::pair<std::string, double>>;

// The value of `name` in `metrics`; 0 where it is not.
inline double MetricOf(const Metrics& metrics, const std::string& name) {
  for (const auto& [key, value] : metrics) {
    if (key == name) return value;
  }
  return 0;
}

// What an evaluation of one set found: its metrics (the task's own first,
// logged), what it covered (sequences, tokens: for a command's report), and
// files for the run folder (a name in it, and its contents).
struct Scored {
  Metrics metrics;
  Metrics counts;
  std::vector<std::pair<std::string, std::string>> files;
};

// One evaluation of one set: each micro-batch's outputs are added, on the
// device, into one tensor (sums, or each sequence's outputs in its record's
// row), which the loop sums over the ranks and reads back once; the task
// then scores it on the host.
class SetEvaluation {
 public:
  virtual ~SetEvaluation() = default;
  // A micro-batch's outputs; `inputs` holds the task's tensors.
  virtual void Add(const Outputs& outputs, const model::Inputs& inputs) = 0;
  // What the ranks add up: of one shape on every rank, on the device.
  virtual const at::Tensor& Shared() const = 0;
  // The scores, from the sum of every rank's Shared() on the host.
  virtual absl::StatusOr<Scored> Score(const at::Tensor& summed) = 0;
};

// How the model is exported for Hugging Face: its class and labels.
struct ExportHead {
  std::string architecture;         // BertForPreTraining, BertForQuestionAnswering, ...
  std::vector<std::string> labels;  // a classifier's, in class order
  // config.json's problem_type: "regression" (one score, STS-B),
  // "single_label_classification", "multi_label_classification"; "" for
  // a head without labels.
  std::string problem_type;
  // Whether the class has a pooler (Hugging Face's question answering and
  // token classification models have none: the export leaves it out).
  bool pooler = true;
};

// What weights are to a task, from the task they say they were trained
// for (a checkpoint's trainer state, an export's config.json; "" when they
// do not say).
enum class WeightsOrigin {
  kThisTask,     // a model of the task itself: taken whole
  kPretraining,  // pretrained weights: their encoder is taken
  kOtherTask,    // another task's fine-tuned model: its encoder (and pooler)
  kUnknown,      // they do not say: taken whole where they fit, else as pretrained
};

// A micro-batch's counts that its losses are divided by, in the task's
// TotalNames() order: known on the host before any forward pass (so that
// every micro-batch of a step runs forward and backward at once), then
// summed over the step's micro-batches and ranks.
using Totals = std::vector<double>;

class Task {
 public:
  // `name`: "pretraining", "squad", "mnli", ...; the sequences it trains on
  // (null for a task made only to evaluate) and those it evaluates, each
  // packed.
  Task(std::string name, std::unique_ptr<PackedSet> train, std::vector<PackedSet> evaluation)
      : name_(std::move(name)), train_(std::move(train)), evaluation_(std::move(evaluation)) {}
  virtual ~Task() = default;

  const std::string& name() const { return name_; }
  // What weights trained for `trained_for` are to this task (tasks.cc).
  WeightsOrigin OriginOf(const std::string& trained_for) const;
  const PackedSet* train() const { return train_.get(); }
  const std::vector<PackedSet>& evaluation() const { return evaluation_; }

  // A new model, its weights drawn from the generators as they stand.
  virtual TaskModel MakeModel(const model::BertOptions& options) const = 0;
  // The evaluation metric a run's target (a value that ends it when
  // reached) is of; "" for a task that trains for a set length.
  virtual std::string TargetMetric() const { return ""; }
  // Whether the optimizer trains parameter `name` (the span head leaves
  // out the pooler, which it does not use).
  virtual bool Trains(const std::string& name) const {
    (void)name;
    return true;
  }

  // Adds the task's tensors (its targets: Inputs::task, or pretraining's
  // fields of Inputs; Inputs::sequence_token and valid) for `batch` of
  // `set` to `inputs`, on the host, in `plan`'s layout, on the loader's
  // threads; returns the batch's totals.
  virtual absl::StatusOr<Totals> AddInputs(const PackedSet& set, const data::PackedBatch& batch,
                                           const model::InputPlan& plan,
                                           model::Inputs* inputs) const = 0;
  // The names of the totals, in order ("sequences", "labeled_tokens", ...).
  virtual const std::vector<std::string>& TotalNames() const = 0;
  // The head's outputs for `inputs` (the loop runs it under autocast).
  virtual Outputs Forward(torch::nn::Module& model, const model::Inputs& inputs) const = 0;
  // A micro-batch's loss and sums; `totals`: the step's ([TotalNames().size()]
  // float64 on the device, summed over micro-batches and ranks).
  virtual MicroBatchSums Sums(const Outputs& outputs, const model::Inputs& inputs,
                              const at::Tensor& totals) const = 0;
  // The names of the sums, in order.
  virtual const std::vector<std::string>& SumNames() const = 0;
  // From sums added over steps: the training metrics metrics.jsonl shows
  // (the progress line, its accuracies).
  virtual Metrics TrainMetrics(const std::vector<double>& sums) const = 0;
  // The model's FLOPs of training on a micro-batch of `work` (model/flops.h)
  // and `totals` (its AddInputs').
  virtual double TrainingFlops(const model::BertOptions& options, const model::BatchWork& work,
                               const Totals& totals) const = 0;

  // An evaluation of `set` on `device`.
  virtual std::unique_ptr<SetEvaluation> Evaluate(const PackedSet& set,
                                                  const c10::Device& device) const = 0;

  // The Hugging Face head of the exported model.
  virtual ExportHead Export() const = 0;

 private:
  const std::string name_;
  const std::unique_ptr<PackedSet> train_;
  const std::vector<PackedSet> evaluation_;
};

}  // namespace pbert::tasks
