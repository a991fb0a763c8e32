// The model on packed batches made as a run makes them (data::MakeBatch,
// then the loader's seam, train/inputs.h): the tests of the model's
// equivalence and levers through real batches, which only this layer may
// build.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/instance.h"
#include "model/bert.h"
#include "model/precision.h"
#include "tasks/pretraining.h"
#include "tests/data/random_instances.h"
#include "tests/model/fixtures.h"
#include "train/inputs.h"

namespace pbert::model::testing {

using pbert::testing::RandomInstances;

// Rows of at most `depth` sequences and `max_len` tokens, in order.
inline std::vector<std::vector<const data::Instance*>> PackInOrder(
    const std::vector<data::Instance>& instances, int depth, int max_len) {
  std::vector<std::vector<const data::Instance*>> rows(1);
  int used = 0;
  for (const auto& in : instances) {
    if (static_cast<int>(rows.back().size()) == depth || used + in.length() > max_len) {
      rows.emplace_back();
      used = 0;
    }
    rows.back().push_back(&in);
    used += in.length();
  }
  return rows;
}

// `batch`'s inputs for `model`, made as a run makes them (train/inputs.h):
// on the model's device, in the layout its options ask for, FlashAttention
// where `precision` allows it.
inline Inputs InputsFor(const BertForPreTraining& model, const data::PackedBatch& batch,
                        Precision precision = Precision::kFp32) {
  const at::Tensor& weights = model->bert->embeddings->word_embeddings->weight;
  const InputPlan plan =
      InputPlan::For(model->options, weights.device(), precision, weights.scalar_type());
  Inputs inputs = train::MakeInputs(batch, plan);
  tasks::AddPretrainingInputs(batch, plan, &inputs);
  return inputs.To(plan.device);
}

// `model` on `batch`, as the training step runs it.
inline PretrainingLogits Forward(BertForPreTraining& model, const data::PackedBatch& batch,
                                 Precision precision = Precision::kFp32) {
  return model(InputsFor(model, batch, precision));
}

// The losses' sums of `logits` against `batch`'s targets.
inline PretrainingSums SumsOf(const PretrainingLogits& logits, const data::PackedBatch& batch) {
  Inputs inputs = train::MakeInputs(batch, InputPlan());
  tasks::AddPretrainingInputs(batch, InputPlan(), &inputs);
  return ComputeSums(logits, tasks::PretrainingTargetsOf(inputs));
}

// The counts a pretraining step divides by, of `batch` alone.
inline StepTotals TotalsOf(const data::PackedBatch& batch) {
  return tasks::PretrainingTotals(batch);
}

}  // namespace pbert::model::testing
