#include "train/step.h"

#include <ATen/ATen.h>

#include <cmath>

#include "model/bert.h"
#include "optim/lamb.h"

namespace pbert::train {
namespace {

// The step's totals (masked tokens, sequences) over all micro-batches and
// ranks, from the host tensors alone: no graph is kept waiting for them.
model::StepTotals SumTotals(const std::vector<data::PackedBatch>& batches,
                            distributed::Communicator& communicator) {
  model::StepTotals local;
  for (const auto& batch : batches) local += model::TotalsOf(batch);
  std::vector<double> summed =
      communicator.Sum({local.mlm_tokens, local.mlm_sequences, local.nsp_sequences});
  return {summed[0], summed[1], summed[2]};
}

// Waits for the gradients' sums over the ranks, sums the metrics, unscales
// (fp16), clips, and steps the optimizer unless the loss or a gradient is
// not finite.
StepResult ApplyGradients(Trainee& trainee, distributed::Communicator& communicator,
                          const PretrainingMetrics& local, double lr, const StepOptions& options) {
  trainee.reducer().Finish();
  std::vector<at::Tensor> parameters = trainee.model()->parameters();
  StepResult result;
  result.metrics = PretrainingMetrics::FromVector(communicator.Sum(local.ToVector()));
  bool finite = std::isfinite(result.metrics.loss);
  if (model::LossScaler* scaler = trainee.scaler()) {
    const bool unscaled = scaler->Unscale(parameters);
    scaler->Update(unscaled);
    finite = finite && unscaled;
  }
  result.grad_norm = optim::ClipGradNorm(parameters, options.max_grad_norm);
  finite = finite && std::isfinite(result.grad_norm);
  if (!finite) return result;
  for (auto& group : trainee.optimizer().param_groups()) group.options().set_lr(lr);
  trainee.optimizer().step();
  result.applied = true;
  return result;
}

}  // namespace

model::BatchWork WorkOf(const data::PackedBatch& batch) {
  model::BatchWork work;
  work.tokens = static_cast<double>(batch.tokens);
  work.sequences = static_cast<double>(batch.sequences.size());
  for (const data::SequenceSpan& s : batch.sequences) {
    work.squared_lengths += static_cast<double>(s.length) * static_cast<double>(s.length);
  }
  work.masked_tokens = static_cast<double>(batch.mlm_used.numel());
  return work;
}

absl::StatusOr<StepResult> TrainStep(Trainee& trainee, distributed::Communicator& communicator,
                                     const std::vector<data::PackedBatch>& batches, double lr,
                                     const StepOptions& options) {
  model::BertForPreTraining& model = trainee.model();
  model->train();
  const model::StepTotals totals = SumTotals(batches, communicator);
  trainee.reducer().ZeroGrad();
  PretrainingMetrics metrics;
  // The step's sums stay on the device until the end: one host copy a step.
  at::Tensor sums_total;
  model::Randomness::Step random(trainee.randomness());
  const uint64_t first_micro = static_cast<uint64_t>(communicator.rank()) * batches.size();
  for (size_t k = 0; k < batches.size(); ++k) {
    const data::PackedBatch batch = batches[k].To(trainee.device(), /*non_blocking=*/true);
    random.MicroBatch(first_micro + k);
    model::PretrainingLogits logits;
    {
      model::AutocastGuard autocast(trainee.precision(), trainee.device().type());
      logits = model(batch);
    }
    model::PretrainingSums sums = model::ComputeSums(logits, batch);
    at::Tensor loss = model::PretrainingLoss(sums, options.mlm_loss, totals);
    trainee.reducer().ReduceNextBackward(k + 1 == batches.size());
    (trainee.scaler() != nullptr ? trainee.scaler()->Scale(loss) : loss).backward();
    at::Tensor stats = at::cat({PretrainingMetrics::SumsTensor(sums),
                                loss.detach().to(at::kDouble).reshape({1})});
    sums_total = sums_total.defined() ? sums_total + stats : stats;
    metrics.rows += static_cast<double>(batch.rows());
    metrics.tokens += static_cast<double>(batch.tokens);
    metrics.flops += model::TrainingFlops(model->options, WorkOf(batches[k]));
  }
  if (sums_total.defined()) {
    at::Tensor host = sums_total.to(at::kCPU);
    metrics.AddSums(host.slice(0, 0, 8));
    metrics.loss = host[8].item<double>();
  }
  return ApplyGradients(trainee, communicator, metrics, lr, options);
}

}  // namespace pbert::train
