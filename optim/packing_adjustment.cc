#include "optim/packing_adjustment.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pbert::optim {

std::vector<std::string> PackingAdjustmentNames() { return {"none", "betas", "batch"}; }

absl::StatusOr<OptimizerHyperparameters> AdjustForPacking(const std::string& mode,
                                                          double packing_factor,
                                                          const OptimizerHyperparameters& base) {
  if (!(packing_factor >= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing factor must be >= 1 (sequences per pack), got ", packing_factor));
  }
  OptimizerHyperparameters adjusted = base;
  if (mode == "none") return adjusted;
  if (mode == "betas") {
    adjusted.beta1 = std::pow(base.beta1, packing_factor);
    adjusted.beta2 = std::pow(base.beta2, packing_factor);
    return adjusted;
  }
  if (mode == "batch") {
    adjusted.accumulation_steps = std::max<int64_t>(
        1, std::llround(static_cast<double>(base.accumulation_steps) / packing_factor));
    return adjusted;
  }
  return absl::InvalidArgumentError(absl::StrCat("packing adjustment '", mode, "' is not one of: ",
                                                 absl::StrJoin(PackingAdjustmentNames(), ", ")));
}

}  // namespace pbert::optim
