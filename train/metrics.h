// The sums a step or an evaluation produces, added over micro-batches and
// ranks before anything is divided, so that a metric is the same whether the
// sequences came packed or not, on one rank or many.
#pragma once

#include <c10/core/Device.h>

#include <array>
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

  // The first kMetricFields (below) the device computes (loss ..
  // nsp_correct); the host knows the rest.
  static constexpr size_t kDeviceFields = 9;

  // The device's fields of one micro-batch, [kDeviceFields] double on its
  // device (`loss`: the micro-batch's loss; undefined in evaluation, 0).
  // Several micro-batches' are added up there.
  static at::Tensor DeviceSums(const model::PretrainingSums& sums, const at::Tensor& loss);
  // All fields on `device` in kMetricFields order, for one sum over the ranks
  // and one read: `device_sums` (DeviceSums added up; undefined: none),
  // then this object's host fields.
  at::Tensor WithDeviceSums(const at::Tensor& device_sums, const c10::Device& device) const;
  // Adds a whole other set (the next interval's step).
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

  // The fields in kMetricFields order, and back (`values` holds them all).
  std::vector<double> ToVector() const;
  static PretrainingMetrics FromVector(const std::vector<double>& values);
};

// The fields of PretrainingMetrics in their one order: ToVector,
// FromVector, Add, and the device vector of a step or an evaluation follow
// it (the device's kDeviceFields first).
inline constexpr std::array<double PretrainingMetrics::*, 12> kMetricFields = {
    &PretrainingMetrics::loss,
    &PretrainingMetrics::mlm_loss,
    &PretrainingMetrics::mlm_sequence_loss,
    &PretrainingMetrics::mlm_tokens,
    &PretrainingMetrics::mlm_sequences,
    &PretrainingMetrics::mlm_correct,
    &PretrainingMetrics::nsp_loss,
    &PretrainingMetrics::nsp_sequences,
    &PretrainingMetrics::nsp_correct,
    &PretrainingMetrics::tokens,
    &PretrainingMetrics::rows,
    &PretrainingMetrics::flops};

// Each field listed once, and every field of the struct listed: a field
// added to PretrainingMetrics and not here fails to compile.
constexpr bool ListsEachFieldOnce(const std::array<double PretrainingMetrics::*, 12>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i] == nullptr) return false;
    for (size_t j = 0; j < i; ++j) {
      if (fields[i] == fields[j]) return false;
    }
  }
  return true;
}
static_assert(ListsEachFieldOnce(kMetricFields), "a field of kMetricFields is missing or twice");
static_assert(sizeof(PretrainingMetrics) == kMetricFields.size() * sizeof(double),
              "every field of PretrainingMetrics must be in kMetricFields");
static_assert(PretrainingMetrics::kDeviceFields < kMetricFields.size());

}  // namespace pbert::train
