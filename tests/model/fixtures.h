// Random pretraining instances and tiny models for the model tests.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/instance.h"
#include "model/bert.h"
#include "model/precision.h"
#include "tests/data/random_instances.h"
#include "train/inputs.h"

namespace pbert::model::testing {

inline BertOptions TinyOptions() {
  return BertOptions()
      .vocab_size(97)
      .hidden_size(32)
      .num_layers(2)
      .num_heads(4)
      .intermediate_size(64)
      .max_position_embeddings(64)
      .hidden_dropout(0.0)
      .attention_dropout(0.0)
      .vocab_padding(64);  // 97 rows padded to 128: every test crosses the padding
}

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
  auto prepared = train::Prepare(
      batch, InputPlan::For(model->options, weights.device(), precision, weights.scalar_type()));
  if (!prepared.ok()) throw std::runtime_error(std::string(prepared.status().message()));
  return prepared->inputs;
}

// `model` on `batch`, as the training step runs it.
inline PretrainingLogits Forward(BertForPreTraining& model, const data::PackedBatch& batch,
                                 Precision precision = Precision::kFp32) {
  return model(InputsFor(model, batch, precision));
}

// The losses' sums of `logits` against `batch`'s targets.
inline PretrainingSums SumsOf(const PretrainingLogits& logits, const data::PackedBatch& batch) {
  return ComputeSums(logits, train::MakeInputs(batch, InputPlan()));
}

using train::TotalsOf;

}  // namespace pbert::model::testing
