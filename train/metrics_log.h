// RUN_DIR/metrics.jsonl, written by rank 0: a "train" line every
// train.log_every_steps steps (finetune.log_every_steps), over the steps
// since the line before, with the task's metrics, and an "eval" line after
// each evaluation (docs/training.md lists the keys); the
// same values as TensorBoard scalars (train/KEY, eval/KEY) in the run's
// event file, unless train.tensorboard is off. Like the MLLOG, their
// lengths are saved with each checkpoint and a resume cuts them back to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/append_log.h"
#include "nlohmann/json.hpp"
#include "tasks/task.h"
#include "train/metrics.h"
#include "train/step.h"
#include "train/tensorboard.h"

namespace pbert::train {

// Where the loop stands, as every line records it.
struct LoopPosition {
  int64_t step = 0;
  uint64_t samples = 0;  // sequences trained on, all ranks
  double seconds = 0;    // training time over all sessions
  int64_t skipped_steps = 0;
};

struct MetricsLogState {
  uint64_t bytes = 0;              // metrics.jsonl's length
  uint64_t tensorboard_bytes = 0;  // the event file's (0 in checkpoints of earlier releases)
};
void to_json(nlohmann::json& json, const MetricsLogState& state);
void from_json(const nlohmann::json& json, MetricsLogState& state);

struct MetricsLogOptions {
  std::string dir;  // the run folder (rank 0); "": write nothing (other ranks)
  int64_t every_steps = 10;  // train.log_every_steps
  int max_len = 512;         // the row length, for the padding share
  bool tensorboard = true;   // train.tensorboard
  double peak_flops = 0;     // of all ranks' devices together, for MFU; 0: unknown
  const tasks::Task* task = nullptr;  // what names the step's sums (null: none are logged)
};

class MetricsLog {
 public:
  // Opens the run's metrics.jsonl and event file, cut back to `state`.
  static absl::StatusOr<std::unique_ptr<MetricsLog>> Open(const MetricsLogOptions& options,
                                                          const MetricsLogState& state);

  // Adds a step that took `seconds` at rate `lr`; writes the interval's line
  // when the step number is a multiple of every_steps.
  absl::Status AddStep(const StepResult& step, double lr, double seconds, const LoopPosition& at);
  // Writes the steps added since the last line, if any (before an
  // evaluation, a checkpoint or the end).
  absl::Status Flush(const LoopPosition& at);
  // An evaluation's metrics; `score`: the one a run is judged by (the
  // target's, or the task's own), which the line names ("metric") for plot.
  absl::Status AddEvaluation(const tasks::Metrics& eval, const std::string& score, double seconds,
                             const LoopPosition& at);
  absl::Status Sync();
  MetricsLogState State() const;

 private:
  MetricsLog(const MetricsLogOptions& options, const MetricsLogState& state)
      : options_(options), state_(state) {}
  // Appends `line` to metrics.jsonl, and its numbers but the position
  // (step, samples, time) to the event file as scalars KIND/KEY.
  absl::Status Append(const nlohmann::json& line);

  const MetricsLogOptions options_;
  const MetricsLogState state_;  // as opened: what a log not written keeps
  std::unique_ptr<AppendLog> file_;  // null on ranks other than 0
  std::unique_ptr<TensorBoardLog> tensorboard_;  // null there, or when off
  // The interval since the last line.
  StepMetrics interval_;
  int64_t steps_ = 0;
  double seconds_ = 0;
  double lr_ = 0, grad_norm_ = 0;  // of its last step
};

}  // namespace pbert::train
