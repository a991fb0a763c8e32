// What a training run reads, opened and checked once: the training store
// and its rows (data.pack_index, or the store packed now), the eval set and
// its rows. The plan that follows from them is train/training_plan.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/loader.h"
#include "data/packing/pack_index.h"
#include "data/source.h"
#include "data/store.h"
#include "train/experiment.h"

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
  // packed with the packing section. Of the store's shard checksums this
  // process checks those of `share` (a rank's part: each shard is read once
  // between the ranks). Writes nothing.
  static absl::StatusOr<TrainingData> Open(const ExperimentConfig& config,
                                           data::ShardShare share = {});

  // Rows packed by `Open`: written to RUN_DIR/pack.pbpack, so that the run
  // can be repeated from them. Does nothing for rows read from a file.
  absl::Status WritePackedRows(const std::string& run_dir) const;
};

}  // namespace pbert::train
