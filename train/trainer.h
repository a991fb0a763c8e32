// The training loop of `packed-bert train`, as MLPerf BERT runs it: steps
// until the MLM accuracy on a fixed eval set reaches the target, evaluating
// every `eval_every_samples` sequences, with `:::MLLOG` lines, metrics,
// checkpoints and exact resume. docs/training.md describes it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/loader.h"
#include "distributed/communicator.h"
#include "model/bert.h"
#include "optim/lamb.h"
#include "optim/schedule.h"
#include "train/step.h"

namespace pbert::train {

// What the MLLOG header says about the submission.
struct MlperfOptions {
  std::string org = "packed-bert";
  std::string platform = "cpu";
  std::string division = "closed";
  std::string status = "research";
};

struct TrainerOptions {
  std::string run_dir;      // mllog.txt, metrics.jsonl, checkpoints/
  std::string config_yaml;  // the effective config, saved with every checkpoint
  uint64_t seed = 0;        // initial weights and dropout

  model::BertOptions model;
  std::string init_checkpoint;  // weights to start from (safetensors), "" for random ones
  optim::LambOptions lamb;      // betas already adjusted for packing
  bool exclude_from_trust_ratio = true;
  optim::ScheduleOptions schedule;
  StepOptions step;

  std::shared_ptr<const data::SequenceSource> train_source;
  std::shared_ptr<const data::PackIndex> train_index;
  // rows_per_batch, batches_per_step (accumulation), shape, threads,
  // prefetch, rank, world size; the seed and position are set here.
  data::LoaderOptions loader;
  // The fixed eval set and its rows; null: the run does not evaluate.
  std::shared_ptr<const data::SequenceSource> eval_source;
  std::shared_ptr<const data::PackIndex> eval_index;

  int64_t total_steps = 1000;          // the schedule's end; the run stops there
  int64_t eval_every_samples = 0;      // sequences between evaluations
  double target_mlm_accuracy = 0.720;  // success when an evaluation reaches it
  int64_t max_samples = 0;             // stop (aborted) after this many sequences; 0: no cap
  int64_t checkpoint_every_steps = 0;  // 0: only at the end and when asked to stop
  int keep_checkpoints = 3;            // 0: keep all
  int64_t log_every_steps = 10;        // a metrics.jsonl line per this many steps
  int64_t max_bad_steps = 10;          // non-finite steps in a row before giving up
  MlperfOptions mlperf;

  std::string resume;                   // checkpoint folder to continue, "" for a new run
  std::function<bool()> stop_requested;  // polled between steps (SIGINT, SIGTERM)
  distributed::Communicator* communicator = nullptr;
};

struct TrainResult {
  // "success" (target reached), "aborted" (steps or samples ran out, or too
  // many bad steps) or "interrupted" (asked to stop; resumable).
  std::string status;
  int64_t step = 0;
  uint64_t samples = 0;              // sequences trained on
  uint64_t samples_to_target = 0;    // sequences seen when the target was reached, 0 if not
  double mlm_accuracy = 0;           // of the last evaluation
  double best_mlm_accuracy = 0;
  int64_t evaluations = 0;
  int64_t skipped_steps = 0;
  double train_seconds = 0;          // time spent in the loop, over all sessions
  double run_seconds = 0;            // MLLOG run_start to run_stop (0 if not stopped)
  std::string checkpoint;            // the last one written
  bool already_finished = false;     // the resumed checkpoint was of a finished run
};

// Runs (or resumes) training. Library errors come back as a status; a
// finished run resumed again returns its result without training.
absl::StatusOr<TrainResult> Train(const TrainerOptions& options);

}  // namespace pbert::train
