#include "train/evaluation.h"

#include <algorithm>

#include "common/status.h"

namespace pbert::train {

absl::StatusOr<PretrainingMetrics> Evaluation::Run(model::BertForPreTraining& model,
                                                   distributed::Communicator& communicator,
                                                   uint64_t samples) {
  ASSIGN_OR_RETURN(PretrainingMetrics metrics, evaluator_->Run(model, communicator));
  const double accuracy = metrics.MlmAccuracy();
  state_.evaluations += 1;
  state_.last_mlm_accuracy = accuracy;
  state_.best_mlm_accuracy = std::max(state_.best_mlm_accuracy, accuracy);
  if (accuracy >= options_.target_mlm_accuracy && state_.samples_to_target == 0)
    state_.samples_to_target = samples;
  while (state_.next_samples <= samples) state_.next_samples += options_.every_samples;
  return metrics;
}

}  // namespace pbert::train
