#include "train/evaluator.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "train/host_read.h"
#include "train/inputs.h"

namespace pbert::train {

Evaluator::Evaluator(const tasks::Task& task, const tasks::PackedSet& set,
                     data::LoaderOptions options, const model::BertOptions& bert,
                     model::Precision precision, c10::Device device)
    : task_(task),
      set_(set),
      options_(options),
      bert_(bert),
      precision_(precision),
      device_(device) {
  options_.shape = set.shape;
  options_.single_pass = true;
  options_.shuffle = false;
  options_.batches_per_step = 1;
}

absl::StatusOr<tasks::Scored> Evaluator::Run(torch::nn::Module& model,
                                             distributed::Communicator& communicator,
                                             const std::function<void(uint64_t)>& progress) const {
  // The inputs are made on the loader's threads, in the layout this model
  // runs (train/inputs.h), with the task's tensors.
  const at::ScalarType dtype = model.parameters().front().scalar_type();
  data::LoaderOptions options = options_;
  options.prepare =
      Preparer(model::InputPlan::For(bert_, device_, precision_, dtype), {&task_, &set_});
  ASSIGN_OR_RETURN(auto loader, data::Loader::Create(set_.sequences, set_.rows, options));
  const bool was_training = model.is_training();
  model.eval();
  std::unique_ptr<tasks::SetEvaluation> evaluation = task_.Evaluate(set_, device_);
  {
    at::NoGradGuard no_grad;
    for (uint64_t step = 0, steps = loader->StepsPerPass(); step < steps; ++step) {
      ASSIGN_OR_RETURN(data::StepBatches batches, loader->Next());
      for (const MicroBatch& batch : Prepared(batches)) {
        tasks::Outputs outputs;
        {
          model::AutocastGuard autocast(precision_, device_.type());
          outputs = task_.Forward(model, batch.inputs);
        }
        evaluation->Add(outputs, batch.inputs);
        if (progress) progress(static_cast<uint64_t>(batch.rows));
      }
    }
  }
  if (was_training) model.train();
  // Every rank sums and reads, also one that had no batch.
  at::Tensor shared = evaluation->Shared();
  communicator.SumInPlace(shared);
  return evaluation->Score(ReadTensorToHost(shared));
}

}  // namespace pbert::train
