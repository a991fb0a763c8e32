// RUN_DIR/metrics.jsonl, written by rank 0: a "train" line every
// train.log_every_steps steps, over the steps since the line before, and an
// "eval" line after each evaluation (docs/training.md lists the keys). Like
// the MLLOG, its length is saved with each checkpoint and a resume cuts it
// back to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/append_log.h"
#include "nlohmann/json.hpp"
#include "train/metrics.h"
#include "train/step.h"

namespace pbert::train {

// Where the loop stands, as every line records it.
struct LoopPosition {
  int64_t step = 0;
  uint64_t samples = 0;  // sequences trained on, all ranks
  double seconds = 0;    // training time over all sessions
  int64_t skipped_steps = 0;
};

struct MetricsLogState {
  uint64_t bytes = 0;  // the file's length
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(MetricsLogState, bytes)
};

class MetricsLog {
 public:
  // Rank 0 opens `path`, cut back to state.bytes; others pass "".
  // `max_len`: the row length, for the padding share.
  static absl::StatusOr<std::unique_ptr<MetricsLog>> Open(const std::string& path,
                                                          const MetricsLogState& state,
                                                          int64_t every_steps, int max_len);

  // Adds a step that took `seconds` at rate `lr`; writes the interval's line
  // when the step number is a multiple of every_steps.
  absl::Status AddStep(const StepResult& step, double lr, double seconds, const LoopPosition& at);
  // Writes the steps added since the last line, if any (before an
  // evaluation, a checkpoint or the end).
  absl::Status Flush(const LoopPosition& at);
  absl::Status AddEvaluation(const PretrainingMetrics& eval, double seconds,
                             const LoopPosition& at);
  absl::Status Sync();
  MetricsLogState State() const { return {file_ ? file_->bytes() : 0}; }

 private:
  MetricsLog(int64_t every_steps, int max_len) : every_steps_(every_steps), max_len_(max_len) {}
  absl::Status Append(const nlohmann::json& line);

  std::unique_ptr<AppendLog> file_;  // null on ranks other than 0
  const int64_t every_steps_;
  const int max_len_;
  // The interval since the last line.
  PretrainingMetrics interval_;
  int64_t steps_ = 0;
  double seconds_ = 0;
  double lr_ = 0, grad_norm_ = 0;  // of its last step
};

}  // namespace pbert::train
