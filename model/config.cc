#include "model/config.h"

#include <unistd.h>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace pbert::model {

absl::Status ModelConfig::Validate() const {
  RETURN_IF_ERROR(bert.Validate());
  // Weights, gradients and LAMB's two moments: 16 bytes per parameter.
  const double bytes = 16.0 * bert.Parameters();
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (bytes > memory) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "this model has %.3g parameters and needs %.1f GB for its weights, gradients and "
        "optimizer state alone; this machine has %.1f GB: make it smaller",
        bert.Parameters(), bytes / 1e9, memory / 1e9));
  }
  return absl::OkStatus();
}

}  // namespace pbert::model
