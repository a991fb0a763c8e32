// What a training run reads, opened and checked once: the training store
// and its rows (data.pack_index, or the store packed now), the eval set and
// its rows; and the plan that follows from them and the config: the packing
// factor, the optimizer after the packing adjustment, sequences per step and
// the evaluation interval.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/loader.h"
#include "data/packing/pack_index.h"
#include "data/source.h"
#include "model/precision.h"
#include "optim/config.h"
#include "train/experiment.h"
#include "train/step.h"
#include "train/trainee.h"

namespace pbert::train {

struct TrainingData {
  std::shared_ptr<const data::SequenceSource> train;  // the instance store
  std::shared_ptr<const data::PackIndex> rows;
  std::shared_ptr<const data::SequenceSource> eval;  // null: no evaluation
  std::shared_ptr<const data::PackIndex> eval_rows;

  // Sequences per row of the training rows.
  double packing_factor() const {
    return static_cast<double>(rows->sequences()) / static_cast<double>(rows->rows());
  }

  // The packing algorithm when the rows were packed by `Open`, "" when they
  // were read from data.pack_index.
  std::string packed_with;

  // Opens and checks data.store and data.eval against the model and
  // data.max_seq_len; the training rows are data.pack_index or the store
  // packed with the packing section. Writes nothing.
  static absl::StatusOr<TrainingData> Open(const ExperimentConfig& config);

  // Rows packed by `Open`: written to RUN_DIR/pack.pbpack, so that the run
  // can be repeated from them. Does nothing for rows read from a file.
  absl::Status WritePackedRows(const std::string& run_dir) const;
};

// The values a run derives from its config and data, computed once.
struct TrainingPlan {
  c10::Device device = c10::kCPU;  // run.device, resolved once (train/device.h)
  optim::OptimConfig optim;        // after the packing adjustment
  model::Precision precision;      // resolved for the device
  TraineeOptions trainee;          // the model, optimizer and reducer to build
  StepOptions step;
  data::LoaderOptions loader;      // this rank's share of the rows, in training order
  int64_t rows_per_step = 0;       // over all ranks
  double sequences_per_step = 0;   // rows_per_step x packing factor
  int64_t eval_every_samples = 0;  // train.eval_every_samples, or MLPerf's interval
  std::string description;         // the above in one line, for logs and config.yaml

  static absl::StatusOr<TrainingPlan> Make(const ExperimentConfig& config,
                                           const TrainingData& data, int rank, int world_size,
                                           const c10::Device& device);
};

}  // namespace pbert::train
