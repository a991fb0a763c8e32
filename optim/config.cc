#include "optim/config.h"

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace pbert::optim {

void OptimConfig::Inactive(bool device_is_cuda, config::InactiveKeys* keys) const {
  if (!device_is_cuda) keys->Keys({"optim.fused"}, "the CPU always runs LibTorch's _foreach LAMB");
}

absl::StatusOr<OptimConfig> OptimConfig::AdjustedFor(double packing_factor) const {
  const auto [beta1, beta2] = lamb.betas();
  ASSIGN_OR_RETURN(OptimizerHyperparameters adjusted,
                   AdjustForPacking(packing_adjustment, packing_factor,
                                    {beta1, beta2, accumulation_steps}));
  OptimConfig out = *this;
  out.lamb.betas({adjusted.beta1, adjusted.beta2});
  out.accumulation_steps = adjusted.accumulation_steps;
  return out;
}

std::string OptimConfig::DescribeAdjustment(const OptimConfig& adjusted,
                                            double packing_factor) const {
  const auto [beta1, beta2] = adjusted.lamb.betas();
  return absl::StrFormat(
      "optimizer after the packing adjustment (%s, packing factor %.6f): beta1 %.9g, beta2 %.9g, "
      "accumulation_steps %d",
      NameOf(packing_adjustment), packing_factor, beta1, beta2, adjusted.accumulation_steps);
}

}  // namespace pbert::optim
