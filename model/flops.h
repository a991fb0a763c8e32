// The model FLOPs of a training step, counted once from the shapes: what a
// GPU's (or CPU's) peak is compared with for MFU. Only the model's own work
// counts: the matrix products over the real tokens, attention over each
// sequence's own length, the MLM head over the masked tokens and the pooler
// and NSP head over the sequences; padding is none of the model's work
// (docs/model.md, FLOPs and MFU).
#pragma once

#include "model/bert_options.h"

namespace pbert::model {

// What a batch's encoder FLOPs depend on, summed over its sequences (a
// head's own work is counted by its task from the micro-batch's totals).
struct BatchWork {
  double tokens = 0;           // real tokens
  double squared_lengths = 0;  // the sum of each sequence's length squared (attention)
  double sequences = 0;
};

// Multiply-adds of the encoder's forward pass (no head).
double EncoderMacs(const BertOptions& options, const BatchWork& work);

// Forward and backward of `macs` multiply-adds of a forward pass: 3 times
// them, 2 FLOPs each (the backward computes the gradients of both inputs
// of every product).
inline double TrainingFlopsOf(double macs) { return 3 * 2 * macs; }

// Pretraining's: the encoder, the pooler and NSP head over the sequences,
// the MLM head over the `masked_tokens`.
double PretrainingFlops(const BertOptions& options, const BatchWork& work, double masked_tokens);

}  // namespace pbert::model
