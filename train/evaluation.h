// The MLPerf evaluation of a training run: when it is due (every
// train.eval_every_samples sequences), what it found (the last and best MLM
// accuracy), and when the target was reached. Its state is saved with each
// checkpoint. The evaluation itself is the Evaluator's, which `score` runs
// too.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "train/evaluator.h"

namespace pbert::train {

struct EvaluationState {
  uint64_t next_samples = 0;  // the next evaluation is due at this many sequences
  int64_t evaluations = 0;
  double last_mlm_accuracy = 0;
  double best_mlm_accuracy = 0;
  uint64_t samples_to_target = 0;  // sequences seen when the target was reached; 0: not yet
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(EvaluationState, next_samples, evaluations, last_mlm_accuracy,
                                 best_mlm_accuracy, samples_to_target)
};

// From train.eval_every_samples (or MLPerf's interval) and
// train.target_mlm_accuracy.
struct EvaluationOptions {
  uint64_t every_samples = 0;  // sequences between evaluations
  double target_mlm_accuracy = 0.72;
};

class Evaluation {
 public:
  // `evaluator` null: the run does not evaluate.
  Evaluation(std::unique_ptr<Evaluator> evaluator, const EvaluationOptions& options)
      : evaluator_(std::move(evaluator)), options_(options) {
    state_.next_samples = options.every_samples;
  }

  bool enabled() const { return evaluator_ != nullptr; }
  // An evaluation is due after `samples` sequences.
  bool Due(uint64_t samples) const { return enabled() && samples >= state_.next_samples; }
  // Evaluates the model after `samples` sequences and records the result.
  absl::StatusOr<PretrainingMetrics> Run(model::BertForPreTraining& model,
                                         distributed::Communicator& communicator,
                                         uint64_t samples);

  bool reached() const { return state_.samples_to_target > 0; }
  double target() const { return options_.target_mlm_accuracy; }
  uint64_t sequences() const { return evaluator_ ? evaluator_->sequences() : 0; }
  const EvaluationState& state() const { return state_; }
  void Restore(const EvaluationState& state) { state_ = state; }

 private:
  std::unique_ptr<Evaluator> evaluator_;
  const EvaluationOptions options_;
  EvaluationState state_;
};

}  // namespace pbert::train
