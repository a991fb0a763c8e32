// Pretraining as its tests read a trainee: the model it trains as
// LibTorch's holder of BERT for pretraining, and a step's sums as
// pretraining's metrics.
#pragma once

#include <torch/nn/module.h>

#include <memory>

#include "model/bert.h"
#include "tasks/pretraining.h"
#include "train/metrics.h"

namespace pbert::testing {

// `module` (a pretraining trainee's model() or weights()) as a holder.
inline model::BertForPreTraining PretrainingModel(torch::nn::Module& module) {
  return model::BertForPreTraining(
      std::dynamic_pointer_cast<model::BertForPreTrainingImpl>(module.shared_from_this()));
}

// A pretraining step's sums.
inline tasks::PretrainingMetrics Pretraining(const train::StepMetrics& metrics) {
  return tasks::PretrainingMetrics::From(metrics.sums);
}

}  // namespace pbert::testing
