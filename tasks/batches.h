// Fine-tuning micro-batches: the task tensors of a batch of packed features
// (data::MakeBatch lays features out as pretraining instances) and the
// per-sequence losses of the two heads (the packing paper's 3.2.3 for
// fine-tuning: every sequence's loss on its own, summed, so that a step
// divides by its sequences and packed and unpacked steps take the same
// gradient).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "data/batch.h"
#include "model/inputs.h"
#include "model/task_heads.h"
#include "tasks/feature.h"

namespace pbert::tasks {

// The span head's tensors of Inputs::task, in order: each of the N
// sequences' answer start and end (positions in the sequence), its weight
// (1; 0 for the padding sequences of static shapes) and its feature.
enum SpanTensor { kSpanStart, kSpanEnd, kSpanWeight, kSpanFeature };
// The classifier's, over the [B,D] sequence slots: each slot's label
// (int64 class, or float score; 0 in unused slots) and feature.
enum ClassTensor { kClassLabel, kClassFeature };

// The features (data::PackedBatch::records) of `batch`'s sequences, checked
// against `features`.
absl::StatusOr<std::vector<int64_t>> RecordsOf(const std::vector<Feature>& features,
                                               const data::PackedBatch& batch);

// Inputs::sequence_token and sequence_valid of `batch` in `plan`'s layout:
// [N,L], N the batch's sequences and L the longest (with static shapes
// N = B*D sequences of L = S slots, a padding sequence reading token 0);
// returns N.
int64_t AddSequenceTokens(const data::PackedBatch& batch, const model::InputPlan& plan,
                          model::Inputs* inputs);

// Each of `batch`'s sequences' row and slot in it: where its [CLS] is in
// Inputs::cls_token's [B,D].
std::vector<std::pair<int64_t, int64_t>> SlotsOf(const data::PackedBatch& batch);

// For `batch`, whose sequences are records of `features` (data::PackedBatch::
// records), on the host: Inputs::sequence_token and sequence_valid (in the
// varlen layout's [T] tokens or the padded rows' [B*S]; with static shapes
// N = B*D sequences of L = S slots) and the span head's task tensors. A
// padding sequence (or an unused slot) points at feature features.size().
absl::Status AddSpanInputs(const std::vector<Feature>& features, const data::PackedBatch& batch,
                           const model::InputPlan& plan, model::Inputs* inputs);
// `score`: each label is a float score (STS-B), not a class.
absl::Status AddClassInputs(const std::vector<Feature>& features, bool score,
                            const data::PackedBatch& batch, model::Inputs* inputs);

// A micro-batch's sums (0-dim float64 tensors; the loss carries
// gradients): the loss summed over its sequences, the sequences, and those
// predicted right (spans: start and end both; a score: none).
struct TaskSums {
  at::Tensor loss;
  at::Tensor sequences;
  at::Tensor correct;
};

// Span head: each sequence's (cross-entropy of its start + of its end) / 2
// over its own tokens (run_squad.py's loss), summed with its weight.
TaskSums SpanSums(const model::SpanLogitsTensor& logits, const model::Inputs& inputs);
// Classifier: the cross-entropy of each slot that holds a sequence
// (Inputs::slot_valid), summed; `score`: the squared error of a score.
TaskSums ClassSums(const at::Tensor& logits, const model::Inputs& inputs, bool score);

}  // namespace pbert::tasks
