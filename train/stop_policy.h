// When a training run stops: on request (SIGINT or SIGTERM, agreed by all
// ranks before each step, so that all stop after the same one); with an
// error after train.max_bad_steps skipped steps in a row; or at its end,
// when an evaluation reached the target, after optim.total_steps steps or
// after train.max_samples sequences. Its counts are saved with each
// checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "distributed/communicator.h"
#include "nlohmann/json.hpp"
#include "train/step.h"

namespace pbert::train {

struct StopState {
  int64_t bad_steps_in_row = 0;
  int64_t skipped_steps = 0;  // over the whole run
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(StopState, bad_steps_in_row, skipped_steps)
};

// From optim.total_steps and train.max_samples, train.max_bad_steps.
struct StopOptions {
  int64_t total_steps = 1000;
  int64_t max_samples = 0;     // sequences; 0: no cap
  int64_t max_bad_steps = 10;  // skipped steps in a row that end the run
};

class StopPolicy {
 public:
  // `requested` is polled before each step (null: never).
  StopPolicy(const StopOptions& options, std::function<bool()> requested)
      : options_(options), requested_(std::move(requested)) {}

  // Whether any rank was asked to stop; every rank calls it before a step.
  bool Requested(distributed::Communicator& communicator) const;

  // Counts step `step`'s outcome: a skipped step (non-finite loss or
  // gradient) is logged, and the max_bad_steps-th in a row is an error that
  // names `last_checkpoint` ("" if none).
  absl::Status Count(const StepResult& result, int64_t step, const std::string& last_checkpoint);

  // The run ends after `step` steps and `samples` sequences.
  bool AtEnd(int64_t step, uint64_t samples, bool target_reached) const {
    return target_reached || step >= options_.total_steps ||
           (options_.max_samples > 0 && samples >= static_cast<uint64_t>(options_.max_samples));
  }

  int64_t total_steps() const { return options_.total_steps; }
  const StopState& state() const { return state_; }
  void Restore(const StopState& state) { state_ = state; }

 private:
  const StopOptions options_;
  const std::function<bool()> requested_;
  StopState state_;
};

}  // namespace pbert::train
