// The paper's hyperparameter adjustment for packed training (its 3.3): a
// packed batch holds p times the sequences of an unpacked one, where p is
// the packing factor from the pack report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pbert::optim {

struct OptimizerHyperparameters {
  double beta1 = 0.9;
  double beta2 = 0.999;
  int64_t accumulation_steps = 1;  // micro-batches per optimizer step
};

// mode "none": unchanged. "betas": beta1 := beta1^p, beta2 := beta2^p and
// the batch kept (for p = 2 exactly the moments of two updates with the same
// gradient). "batch": accumulation_steps divided by p (rounded, at least 1)
// so that sequences per optimizer step stay as unpacked.
std::vector<std::string> PackingAdjustmentNames();

absl::StatusOr<OptimizerHyperparameters> AdjustForPacking(const std::string& mode,
                                                          double packing_factor,
                                                          const OptimizerHyperparameters& base);

}  // namespace pbert::optim
