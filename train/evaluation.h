// A run's evaluation: when it is due (every `every_samples` sequences: the
// MLPerf interval in pretraining, an epoch in fine-tuning), what it found
// (the metrics of the last evaluation, the last and best score), and when
// the target was reached (pretraining's MLM accuracy). Its state is saved
// with each checkpoint. The evaluation of each set is an Evaluator's, which
// `score` runs too. The task's sets without labels (a file to predict) are
// not scored: `Predict` writes what the task makes of them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tasks/task.h"
#include "train/evaluator.h"

namespace pbert::model {
struct ModelConfig;
}  // namespace pbert::model

namespace pbert::train {

struct EvaluationState {
  uint64_t next_samples = 0;  // the next evaluation is due at this many sequences
  int64_t evaluations = 0;
  // The score (the target's metric, or else the task's own) of the last
  // evaluation, and the best so far.
  double last_score = 0;
  double best_score = 0;
  uint64_t samples_to_target = 0;  // sequences seen when the target was reached; 0: not yet
  tasks::Metrics metrics;          // the last evaluation's
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(EvaluationState, next_samples, evaluations, last_score, best_score,
                                 samples_to_target, metrics)
};

struct EvaluationOptions {
  uint64_t every_samples = 0;  // sequences between evaluations
  // The metric whose value `target` ends the run when reached ("": none,
  // the run's length decides).
  std::string target_metric;
  double target = 0;
};

class Evaluation {
 public:
  // One evaluator per set, scored or (a set without labels) predicted;
  // no set to score: the run does not evaluate.
  Evaluation(std::vector<std::unique_ptr<Evaluator>> evaluators, const EvaluationOptions& options);

  bool enabled() const { return !scored_.empty(); }
  // An evaluation is due after `samples` sequences.
  bool Due(uint64_t samples) const { return enabled() && samples >= state_.next_samples; }
  // Evaluates `model` on every set to score after `samples` sequences and
  // records the result: the first set's metrics and files as the task
  // names them, each other set's prefixed with its name and "_" (MNLI's
  // mismatched_accuracy).
  absl::StatusOr<tasks::Scored> Run(torch::nn::Module& model,
                                    distributed::Communicator& communicator, uint64_t samples);

  // The sets without labels, predicted by `model`: each one's files (a
  // GLUE submission file, SQuAD's predictions.json) as the task names
  // them, and its counts. Nothing when there is no such set.
  bool predicts() const { return !predicted_.empty(); }
  absl::StatusOr<tasks::Scored> Predict(torch::nn::Module& model,
                                        distributed::Communicator& communicator) const;

  bool reached() const { return state_.samples_to_target > 0; }
  const EvaluationOptions& options() const { return options_; }
  // The sequences of the sets to score.
  uint64_t sequences() const;
  const EvaluationState& state() const { return state_; }
  void Restore(const EvaluationState& state) { state_ = state; }

 private:
  std::vector<std::unique_ptr<Evaluator>> scored_, predicted_;
  const EvaluationOptions options_;
  EvaluationState state_;
};

// The precision an evaluation of given weights runs in: the model
// section's resolved for `device`, fp8 as bf16 (fp8's scales belong to a
// run's checkpoints, not to its weights), which a line says; after the
// model's own checks for `device` that a run makes (model.varlen_kernel).
absl::StatusOr<model::Precision> EvaluationPrecision(const model::ModelConfig& model,
                                                     const c10::Device& device);

// The weights at `path` (a model of the task: a checkpoint of its run, or
// its model.safetensors) on every set of `task`, as a run's evaluation
// does (of `bert` in `precision` on `device`, `options`' rows per pass over
// this rank's share): the sets to score scored, the others predicted.
struct WeightsEvaluation {
  tasks::Scored scored, predicted;
};
absl::StatusOr<WeightsEvaluation> EvaluateWeights(const tasks::Task& task, const std::string& path,
                                                  const model::BertOptions& bert,
                                                  model::Precision precision,
                                                  const c10::Device& device,
                                                  const data::LoaderOptions& options,
                                                  distributed::Communicator& communicator);

}  // namespace pbert::train
