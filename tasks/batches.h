// Fine-tuning micro-batches: features packed into rows as pretraining
// instances are (data::MakeBatch), with each sequence's targets, and the
// per-sequence losses of the two heads (the packing paper's 3.2.3 for
// fine-tuning: every sequence's loss on its own, averaged over the
// sequences of the step, so packed and unpacked steps take the same
// gradient).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch.h"
#include "model/task_heads.h"
#include "tasks/feature.h"
#include "tasks/squad.h"

namespace pbert::tasks {

enum class HeadKind { kSpan, kClasses, kScore };

// A micro-batch of features: `rows` lists each row's features (indices
// into `features`), at most `max_depth` per row and `max_len` tokens.
struct TaskBatch {
  data::PackedBatch batch;
  std::vector<int64_t> features;  // each sequence's feature, in batch order (row after row)
  // The targets, on the host.
  at::Tensor start, end;  // [N] int64: the answer's first and last position in its sequence
  at::Tensor labels;      // [B,D] int64 (classes) or float (score); 0 in unused slots
};

absl::StatusOr<TaskBatch> MakeTaskBatch(const std::vector<Feature>& features,
                                        const std::vector<std::vector<int64_t>>& rows,
                                        int max_len, int max_depth, HeadKind head);

// Where each sequence's tokens lie among the hidden states the model
// returns: the flattened padded rows ([B*S], `varlen` false) or the real
// tokens ([T]).
model::SequenceTokens TokensOf(const data::PackedBatch& batch, bool varlen);

// Each sequence's start and end logits over its own tokens, on the host,
// in batch order (as TaskBatch::features).
std::vector<SpanLogits> SequenceSpanLogits(const model::SpanLogitsTensor& logits,
                                           const data::PackedBatch& batch);

// A micro-batch's sums (0-dim float64 tensors; the loss carries
// gradients): the loss summed over its sequences, the sequences, and for
// classes those predicted right.
struct TaskSums {
  at::Tensor loss;
  at::Tensor sequences;
  at::Tensor correct;
};

// Span head: each sequence's (cross-entropy of its start + of its end) / 2
// over its own tokens (run_squad.py's loss), summed.
TaskSums SpanSums(const model::SpanLogitsTensor& logits, const at::Tensor& start,
                  const at::Tensor& end);
// Classifier: cross-entropy of each sequence slot that holds a sequence
// (`valid` [B,D]), summed; kScore: the squared error of a score.
TaskSums ClassSums(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& valid,
                   HeadKind head);

}  // namespace pbert::tasks
