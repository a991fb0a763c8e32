// The paper's hyperparameter adjustment for packed training (its 3.3): a
// packed batch holds p times the sequences of an unpacked one, where p is
// the packing factor from the pack report.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/choices.h"

namespace pbert::optim {

// kBetas: beta1 := beta1^p, beta2 := beta2^p and the batch kept (for p = 2
// exactly the moments of two updates with the same gradient). kBatch:
// accumulation_steps divided by p (rounded, at least 1), so that sequences
// per optimizer step stay as unpacked. kNone: unchanged.
enum class PackingAdjustment { kNone, kBetas, kBatch };
inline constexpr Choice<PackingAdjustment> kPackingAdjustments[] = {
    {"none", PackingAdjustment::kNone},
    {"betas", PackingAdjustment::kBetas},
    {"batch", PackingAdjustment::kBatch}};
constexpr ChoiceList<PackingAdjustment> ChoicesOf(PackingAdjustment) {
  return kPackingAdjustments;
}

struct OptimizerHyperparameters {
  double beta1 = 0.9;
  double beta2 = 0.999;
  int64_t accumulation_steps = 1;  // micro-batches per optimizer step
};

absl::StatusOr<OptimizerHyperparameters> AdjustForPacking(PackingAdjustment adjustment,
                                                          double packing_factor,
                                                          const OptimizerHyperparameters& base);

}  // namespace pbert::optim
