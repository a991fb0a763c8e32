#include "train/stop_policy.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace pbert::train {

bool StopPolicy::Requested(distributed::Communicator& communicator) const {
  // A signal reaches the ranks at different moments: they agree on it, so
  // that all stop after the same step.
  const bool here = requested_ && requested_();
  if (communicator.world_size() == 1) return here;
  return communicator.Sum({here ? 1.0 : 0.0})[0] > 0;
}

absl::Status StopPolicy::Count(const StepResult& result, int64_t step,
                               const std::string& last_checkpoint) {
  if (result.applied) {
    state_.bad_steps_in_row = 0;
    return absl::OkStatus();
  }
  state_.bad_steps_in_row += 1;
  state_.skipped_steps += 1;
  logging::Get("train")->warn(
      "step {} skipped: loss {} and gradient norm {} are not both finite ({} in a row)", step,
      result.metrics.loss, result.grad_norm, state_.bad_steps_in_row);
  if (state_.bad_steps_in_row < options_.max_bad_steps) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      options_.max_bad_steps,
      " steps in a row had a non-finite loss or gradient (train.max_bad_steps); ",
      last_checkpoint.empty() ? "no checkpoint was written"
                              : absl::StrCat("the last good checkpoint is ", last_checkpoint),
      "; lower optim.lr or check the data"));
}

}  // namespace pbert::train
