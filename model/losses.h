// Per-sequence pretraining losses and metrics for packed batches, computed
// for all sequences at once (no loop over sequences).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "common/choices.h"
#include "model/inputs.h"

namespace pbert::model {

enum class MlmLossMode {
  kPerToken,     // canonical BERT: mean over every masked token of the batch
  kPerSequence,  // the paper's 3.2.3: mean over sequences of each one's token mean
};
inline constexpr Choice<MlmLossMode> kMlmLossModes[] = {
    {"per_token", MlmLossMode::kPerToken}, {"per_sequence", MlmLossMode::kPerSequence}};
constexpr ChoiceList<MlmLossMode> ChoicesOf(MlmLossMode) { return kMlmLossModes; }

// What the model's heads give for a packed batch.
struct PretrainingLogits {
  at::Tensor mlm;  // [K,V] at the batch's masked tokens (Inputs::mlm_token), in order
  at::Tensor nsp;  // [B,D,2] for each sequence slot
};

// Sums and counts of one micro-batch (0-dim float64 tensors, except the loss
// sums, which carry gradients). A trainer adds them over micro-batches and
// ranks, and divides only once, by the totals of the whole step.
struct PretrainingSums {
  at::Tensor mlm_loss;           // sum of the cross-entropy of every masked token
  at::Tensor mlm_sequence_loss;  // sum over sequences of their mean token cross-entropy
  at::Tensor mlm_tokens;         // masked tokens
  at::Tensor mlm_sequences;      // sequences with at least one masked token
  at::Tensor mlm_correct;        // masked tokens predicted right
  at::Tensor nsp_loss;           // sum over sequences of the NSP cross-entropy
  at::Tensor nsp_sequences;      // sequences
  at::Tensor nsp_correct;        // NSP labels predicted right
};

// What pretraining's losses compare with, laid out with a micro-batch by
// the pretraining task (tasks/pretraining.h).
struct PretrainingTargets {
  at::Tensor mlm_labels;  // [K] int64: the masked tokens' true ids; kNoLabel for a padding slot
  at::Tensor mlm_owner;   // [K] int64: the sequence slot (row * D + slot) of each masked token
  at::Tensor nsp_labels;  // [B,D] int64
  at::Tensor nsp_valid;   // [B,D] int64: 1 where the slot holds a sequence (Inputs::slot_valid)
};

PretrainingSums ComputeSums(const PretrainingLogits& logits, const PretrainingTargets& targets);

// The counts a loss is divided by: those of the whole optimizer step, over
// all its micro-batches and ranks.
struct StepTotals {
  double mlm_tokens = 0;
  double mlm_sequences = 0;
  double nsp_sequences = 0;

  StepTotals& operator+=(const StepTotals& other) {
    mlm_tokens += other.mlm_tokens;
    mlm_sequences += other.mlm_sequences;
    nsp_sequences += other.nsp_sequences;
    return *this;
  }
};

// `totals` as a [3] double tensor on `device` (mlm_tokens, mlm_sequences,
// nsp_sequences): copied there, never read back.
at::Tensor TotalsTensor(const StepTotals& totals, const c10::Device& device);

// MLM loss (in `mode`) plus NSP loss, each normalised by `totals` (a
// TotalsTensor on the sums' device, summed over the ranks there). Summed
// over the micro-batches of a step it is the loss of the whole step.
at::Tensor PretrainingLoss(const PretrainingSums& sums, MlmLossMode mode, const at::Tensor& totals);
// The same with totals known on the host.
at::Tensor PretrainingLoss(const PretrainingSums& sums, MlmLossMode mode, const StepTotals& totals);

}  // namespace pbert::model
