// The config's train section: batches, evaluation, targets, checkpoints and
// the weights to start from.
#pragma once

#include <cstdint>
#include <string>

#include "common/config_field.h"
#include "train/profiler.h"

namespace pbert::train {

struct TrainConfig {
  int64_t micro_batch_rows = 32;
  int64_t eval_every_samples = 0;
  bool eval_packed = true;
  double target_mlm_accuracy = 0.720;
  int64_t max_samples = 0;
  int64_t checkpoint_every_steps = 1000;
  int64_t keep_checkpoints = 3;
  int64_t log_every_steps = 10;
  bool tensorboard = true;
  std::string profile_steps;  // "A:B": train/profiler.h
  int64_t max_bad_steps = 10;
  std::string init_checkpoint;

  // Rows per optimizer step over all ranks (the global batch, in rows):
  // micro_batch_rows x `accumulation_steps` (optim's, before or after the
  // packing adjustment) x `world_size`.
  int64_t RowsPerStep(int64_t accumulation_steps, int world_size) const {
    return micro_batch_rows * accumulation_steps * world_size;
  }

  template <class V>
  void Visit(V& v) {
    using config::InRange;
    v.Field("micro_batch_rows", &micro_batch_rows,
            "rows of data.max_seq_len tokens per micro-batch and rank",
            InRange<int64_t>(1, 1 << 20));
    v.Field("eval_every_samples", &eval_every_samples,
            "sequences between evaluations; 0: MLPerf's floor(0.05*(230.23*GBS+3e6)/25000)*25000",
            InRange<int64_t>(0, int64_t{1} << 50));
    v.Field("eval_packed", &eval_packed,
            "pack the eval set with packing.algorithm (same numbers, fewer rows)");
    v.Field("target_mlm_accuracy", &target_mlm_accuracy,
            "stop with success when an evaluation's MLM accuracy reaches this", InRange(0.0, 1.0));
    v.Field("max_samples", &max_samples, "stop (aborted) after this many sequences; 0: no cap",
            InRange<int64_t>(0, int64_t{1} << 50));
    v.Field("checkpoint_every_steps", &checkpoint_every_steps,
            "steps between checkpoints; 0: only at the end and on SIGINT/SIGTERM",
            InRange<int64_t>(0, int64_t{1} << 30));
    v.Field("keep_checkpoints", &keep_checkpoints, "newest checkpoints kept; 0: all",
            InRange<int64_t>(0, 1 << 20));
    v.Field("log_every_steps", &log_every_steps, "steps per metrics.jsonl line",
            InRange<int64_t>(1, int64_t{1} << 30));
    v.Field("tensorboard", &tensorboard,
            "also write the metrics as TensorBoard scalars to RUN_DIR/events.out.tfevents.packed-bert");
    v.Field("profile_steps", &profile_steps,
            "\"A:B\": profile optimizer steps A to B into RUN_DIR/profile.md and "
            "RUN_DIR/profile/trace.json (docs/performance.md); empty: none",
            config::Check<std::string>([](const std::string& text) -> std::string {
              auto steps = ParseProfileSteps(text);
              return steps.ok() ? "" : std::string(steps.status().message());
            }));
    v.Field("max_bad_steps", &max_bad_steps,
            "steps in a row with a non-finite loss or gradient before the run stops",
            InRange<int64_t>(1, 1 << 20));
    v.Field("init_checkpoint", &init_checkpoint,
            "weights to start from (any format model convert reads, e.g. phase 1 for phase 2); "
            "empty: random");
  }
};

}  // namespace pbert::train
