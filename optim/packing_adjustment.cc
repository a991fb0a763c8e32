#include "optim/packing_adjustment.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pbert::optim {

absl::StatusOr<OptimizerHyperparameters> AdjustForPacking(PackingAdjustment adjustment,
                                                          double packing_factor,
                                                          const OptimizerHyperparameters& base) {
  if (!(packing_factor >= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing factor must be >= 1 (sequences per row), got ", packing_factor));
  }
  OptimizerHyperparameters adjusted = base;
  switch (adjustment) {
    case PackingAdjustment::kBetas:
      adjusted.beta1 = std::pow(base.beta1, packing_factor);
      adjusted.beta2 = std::pow(base.beta2, packing_factor);
      break;
    case PackingAdjustment::kBatch:
      adjusted.accumulation_steps = std::max<int64_t>(
          1, std::llround(static_cast<double>(base.accumulation_steps) / packing_factor));
      break;
    case PackingAdjustment::kNone:
      break;
  }
  return adjusted;
}

}  // namespace pbert::optim
