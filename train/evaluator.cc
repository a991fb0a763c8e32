#include "train/evaluator.h"

#include <ATen/ATen.h>

#include "common/status.h"
#include "model/bert.h"
#include "train/host_read.h"
#include "train/inputs.h"

namespace pbert::train {

Evaluator::Evaluator(std::shared_ptr<const data::SequenceSource> source,
                     std::shared_ptr<const data::PackIndex> index, data::LoaderOptions options,
                     model::Precision precision, c10::Device device)
    : source_(std::move(source)),
      index_(std::move(index)),
      options_(options),
      precision_(precision),
      device_(device) {
  options_.single_pass = true;
  options_.shuffle = false;
  options_.batches_per_step = 1;
}

absl::StatusOr<PretrainingMetrics> Evaluator::Run(
    model::BertForPreTraining& model, distributed::Communicator& communicator,
    const std::function<void(uint64_t)>& progress) const {
  // The inputs are made on the loader's threads, in the layout this model
  // runs (train/inputs.h).
  const at::ScalarType dtype = model->bert->embeddings->word_embeddings->weight.scalar_type();
  data::LoaderOptions options = options_;
  options.prepare = Preparer(model::InputPlan::For(model->options, device_, precision_, dtype));
  ASSIGN_OR_RETURN(auto loader, data::Loader::Create(source_, index_, options));
  const bool was_training = model->is_training();
  model->eval();
  at::NoGradGuard no_grad;
  PretrainingMetrics host;  // what the host knows of the batches
  at::Tensor sums;          // summed on the device, read once
  for (uint64_t step = 0, steps = loader->StepsPerPass(); step < steps; ++step) {
    ASSIGN_OR_RETURN(data::StepBatches batches, loader->Next());
    for (const MicroBatch& batch : Prepared(batches)) {
      model::PretrainingLogits logits;
      {
        model::AutocastGuard autocast(precision_, device_.type());
        logits = model(batch.inputs);
      }
      at::Tensor s = PretrainingMetrics::DeviceSums(model::ComputeSums(logits, batch.inputs), {});
      sums = sums.defined() ? sums + s : s;
      if (progress) progress(static_cast<uint64_t>(batch.rows));
    }
    host.tokens += static_cast<double>(batches.tokens);
    host.rows += static_cast<double>(batches.rows);
  }
  if (was_training) model->train();
  // Every rank sums and reads, also one that had no batch.
  const at::Tensor all = host.WithDeviceSums(sums, device_);
  communicator.SumInPlace(all);
  return PretrainingMetrics::FromVector(ReadToHost(all));
}

}  // namespace pbert::train
