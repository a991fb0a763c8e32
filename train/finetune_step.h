// A fine-tuning task's model and one optimizer step of it: what the
// fine-tuning loop (train/finetuner.h) and bench/finetune run. The model is
// the span head (question answering) or a classifier over a pretrained
// BERT; the step runs forward and backward on one packed micro-batch, each
// sequence's loss averaged over the step's sequences, clips, and steps Adam
// (decoupled weight decay) or LAMB.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/ordered_dict.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "distributed/communicator.h"
#include "model/precision.h"
#include "model/random_state.h"
#include "model/task_heads.h"
#include "optim/lamb.h"
#include "tasks/batches.h"
#include "tasks/config.h"
#include "train/inputs.h"

namespace pbert::train {

class TaskModel {
 public:
  // The span head (kSpan), or a classifier of `labels` classes (kClasses)
  // or of one score (kScore).
  TaskModel(const model::BertOptions& options, tasks::HeadKind head, int64_t labels);

  torch::nn::Module& module();
  model::BertModel& bert();
  tasks::HeadKind head() const { return head_; }
  // The parameters the head trains: all but the pooler for the span head,
  // which does not use it (Hugging Face's has none).
  torch::OrderedDict<std::string, at::Tensor> trained();

  struct Output {
    tasks::TaskSums sums;
    model::SpanLogitsTensor spans;  // the span head's
    at::Tensor classes;             // the classifier's: [B,D,C]
  };
  // The head's outputs and sums on `batch` (prepared for `plan`), whose
  // targets `targets` holds.
  Output Run(const MicroBatch& batch, const tasks::TaskBatch& targets,
             const model::InputPlan& plan);

 private:
  model::BertForQuestionAnswering qa_{nullptr};
  model::BertForSequenceClassification classifier_{nullptr};
  tasks::HeadKind head_;
};

// BERT's two groups (no weight decay on biases and LayerNorm) of the
// trained parameters; Adam with decoupled weight decay is LAMB without its
// trust ratio. `fused`: LAMB's CUDA kernels.
std::unique_ptr<optim::Lamb> MakeFinetuneOptimizer(TaskModel& task,
                                                   const optim::LambOptions& options,
                                                   tasks::FinetuneOptimizer kind, bool fused);

struct FinetuneStepResult {
  double loss = 0;     // averaged over the step's sequences (not finite: nothing was applied)
  double correct = 0;  // sequences predicted right (spans: start and end both), all ranks
  double tokens = 0;   // real tokens, all ranks
};

// What one rank computes of a step: its micro-batches (each its targets and
// its inputs, prepared for the plan, and its number among the step's
// micro-batches over all ranks, which its dropout is drawn from; none when
// the rank has no rows this step), and the sequences of the whole step over
// all ranks, which each sequence's loss is divided by.
struct StepShare {
  struct Part {
    const tasks::TaskBatch* targets = nullptr;
    const MicroBatch* batch = nullptr;
    uint64_t index = 0;
  };
  std::vector<Part> parts;
  double step_sequences = 0;
};

// One step at rate `lr`: forward and backward of this rank's micro-batches
// (their gradients accumulated), the gradients summed
// over the ranks (one flat sum), clipping and the update, the same on every
// rank. Every rank must call it the same number of times. Errors of
// LibTorch, the device or a collective come back as a status.
absl::StatusOr<FinetuneStepResult> FinetuneStep(TaskModel& task, optim::Lamb& optimizer,
                                                const StepShare& share,
                                                const model::InputPlan& plan,
                                                model::Precision precision, double lr,
                                                double max_grad_norm,
                                                const model::Randomness& randomness,
                                                distributed::Communicator& communicator);

}  // namespace pbert::train
