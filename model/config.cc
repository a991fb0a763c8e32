#include "model/config.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace pbert::model {

namespace {

double PhysicalMemory() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
}

}  // namespace

void ModelConfig::Inactive(Precision precision, bool device_is_cuda,
                           config::InactiveKeys* keys) const {
  fp8.Inactive(precision, keys);
  if (precision == Precision::kFp32 || precision == Precision::kFp16) {
    keys->Keys({"model.master_weights"},
               absl::StrCat("master weights are for bf16 and fp8, and model.precision is ",
                            NameOf(precision)));
  }
  if (!device_is_cuda) {
    keys->Keys({"model.varlen_kernel"}, "on the CPU the varlen layout attends in buckets");
  }
}

void ModelConfig::InactiveInEvaluation(config::InactiveKeys* keys) {
  keys->Keys({"model.master_weights"}, "evaluating keeps no master weights");
}

absl::Status ModelConfig::CheckMicroBatchFits(int64_t rows, int64_t seq_len) const {
  // Per token and layer, at least: the layer's input, Q, K, V, the
  // attention output and its LayerNorm (6 x hidden), and the feed-forward's
  // two intermediate tensors (2 x intermediate), 4 bytes each.
  const double per_token =
      4.0 * static_cast<double>(bert.num_layers()) *
      (6.0 * static_cast<double>(bert.hidden_size()) + 2.0 * static_cast<double>(bert.intermediate_size()));
  const double bytes = per_token * static_cast<double>(rows) * static_cast<double>(seq_len);
  const double memory = PhysicalMemory();
  if (bytes > memory) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "train.micro_batch_rows %d (of %d tokens) needs at least %.1f GB for one micro-batch's "
        "activations; this machine has %.1f GB: lower train.micro_batch_rows and raise "
        "optim.accumulation_steps to keep the batch",
        rows, seq_len, bytes / 1e9, memory / 1e9));
  }
  return absl::OkStatus();
}

absl::Status ModelConfig::Validate() const {
  RETURN_IF_ERROR(bert.Validate());
  // Weights, gradients and LAMB's two moments: 16 bytes per parameter.
  const double bytes = 16.0 * bert.Parameters();
  const double memory = PhysicalMemory();
  if (bytes > memory) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "this model has %.3g parameters and needs %.1f GB for its weights, gradients and "
        "optimizer state alone; this machine has %.1f GB: make it smaller",
        bert.Parameters(), bytes / 1e9, memory / 1e9));
  }
  return absl::OkStatus();
}

}  // namespace pbert::model
