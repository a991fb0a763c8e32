// The sums a step or an evaluation produces, added over micro-batches and
// ranks before anything is divided, so that a metric is the same whether the
// sequences came packed or not, on one rank or many.
#pragma once

#include <vector>

#include "model/losses.h"

namespace pbert::train {

struct PretrainingMetrics {
  double loss = 0;               // the optimised loss, over the step (train only)
  double mlm_loss = 0;           // summed MLM cross-entropy of every masked token
  double mlm_sequence_loss = 0;  // summed per-sequence mean MLM cross-entropy
  double mlm_tokens = 0;
  double mlm_sequences = 0;
  double mlm_correct = 0;
  double nsp_loss = 0;
  double nsp_sequences = 0;
  double nsp_correct = 0;
  double tokens = 0;  // real tokens
  double rows = 0;    // rows of max_len tokens (real + padding)
  double flops = 0;   // the model's training FLOPs (model/flops.h; train only)

  // Adds one micro-batch's sums (detached, as doubles).
  void Add(const model::PretrainingSums& sums) { AddSums(SumsTensor(sums)); }
  // The eight sums of a micro-batch as one [8] double tensor on its device,
  // without a host sync; tensors of several micro-batches can be added up
  // there and read once with AddSums.
  static at::Tensor SumsTensor(const model::PretrainingSums& sums);
  void AddSums(const at::Tensor& sums);
  // Adds a whole other set (e.g. another rank's, or the next micro-batch's).
  void Add(const PretrainingMetrics& other);

  double MlmAccuracy() const { return mlm_tokens > 0 ? mlm_correct / mlm_tokens : 0.0; }
  double NspAccuracy() const { return nsp_sequences > 0 ? nsp_correct / nsp_sequences : 0.0; }
  double MlmLossPerToken() const { return mlm_tokens > 0 ? mlm_loss / mlm_tokens : 0.0; }
  double MlmLossPerSequence() const {
    return mlm_sequences > 0 ? mlm_sequence_loss / mlm_sequences : 0.0;
  }
  double NspLoss() const { return nsp_sequences > 0 ? nsp_loss / nsp_sequences : 0.0; }
  // Share of the rows' token slots that are padding.
  double PaddingShare(int max_len) const {
    return rows > 0 ? 1.0 - tokens / (rows * max_len) : 0.0;
  }

  // For one all-reduce: the fields in a fixed order, and back.
  std::vector<double> ToVector() const;
  static PretrainingMetrics FromVector(const std::vector<double>& values);
};

}  // namespace pbert::train
