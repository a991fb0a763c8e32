// Evaluation of one of a task's sets: the model without dropout over every
// row once (each rank its share, through the loader), each micro-batch's
// outputs added by the task (tasks::SetEvaluation), the result summed over
// the ranks and read back once, then scored by the task. `score`, an
// evaluation of given weights and the training loop all run it, so they
// read data the same way.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "data/loader.h"
#include "distributed/communicator.h"
#include "model/bert_options.h"
#include "model/precision.h"
#include "tasks/task.h"

namespace torch::nn {
class Module;
}

namespace pbert::train {

class Evaluator {
 public:
  // `options`: rows_per_batch, rank, world size, threads; the rest is set
  // here (the set's shape, one pass, index order, one micro-batch per
  // step). A model of `bert` runs on `device` in `precision`. `task` and
  // `set` outlive the evaluator.
  Evaluator(const tasks::Task& task, const tasks::PackedSet& set, data::LoaderOptions options,
            const model::BertOptions& bert, model::Precision precision, c10::Device device);

  // `progress` (optional) gets the rows done by this rank after each batch.
  absl::StatusOr<tasks::Scored> Run(torch::nn::Module& model,
                                    distributed::Communicator& communicator,
                                    const std::function<void(uint64_t)>& progress = nullptr) const;

  const tasks::PackedSet& set() const { return set_; }
  uint64_t sequences() const { return set_.rows->sequences(); }
  uint64_t rows() const { return set_.rows->rows(); }

 private:
  const tasks::Task& task_;
  const tasks::PackedSet& set_;
  data::LoaderOptions options_;
  model::BertOptions bert_;
  model::Precision precision_;
  c10::Device device_;
};

}  // namespace pbert::train
