// Evaluation on a fixed set of sequences: the model without dropout over
// every row once, sums added over ranks. `score` and the training loop's
// MLPerf evaluation both run it, so they read data the same way.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "data/loader.h"
#include "distributed/communicator.h"
#include "model/precision.h"
#include "train/metrics.h"

namespace pbert::model {
class BertForPreTraining;
}

namespace pbert::train {

class Evaluator {
 public:
  // `options`: rows_per_batch, shape, rank and world size; the rest is set
  // here (one pass, index order, one micro-batch per step). The model runs
  // on `device` in `precision`.
  Evaluator(std::shared_ptr<const data::SequenceSource> source,
            std::shared_ptr<const data::PackIndex> index, data::LoaderOptions options,
            model::Precision precision, c10::Device device);

  // `progress` (optional) gets the rows done by this rank after each batch.
  absl::StatusOr<PretrainingMetrics> Run(
      model::BertForPreTraining& model, distributed::Communicator& communicator,
      const std::function<void(uint64_t)>& progress = nullptr) const;

  uint64_t sequences() const { return index_->sequences(); }
  uint64_t rows() const { return index_->rows(); }

 private:
  std::shared_ptr<const data::SequenceSource> source_;
  std::shared_ptr<const data::PackIndex> index_;
  data::LoaderOptions options_;
  model::Precision precision_;
  c10::Device device_;
};

}  // namespace pbert::train
