#include "train/step.h"

#include <ATen/ATen.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "optim/lamb.h"
#include "train/captured_step.h"
#include "train/host_read.h"

namespace pbert::train {
namespace {

// The step's totals (the task's: masked tokens, sequences, labeled tokens)
// over all micro-batches and ranks, from the counts the loader's threads
// computed on the host: summed over the ranks on the device, never read
// back.
absl::StatusOr<at::Tensor> SumTotals(const std::vector<MicroBatch>& batches, const tasks::Task& task,
                                     distributed::Communicator& communicator,
                                     const c10::Device& device) {
  std::vector<double> local(task.TotalNames().size(), 0.0);
  for (const auto& batch : batches) {
    if (batch.totals.size() != local.size()) {
      return absl::InternalError(absl::StrCat("a micro-batch prepared without the totals of task ",
                                              task.name(), " (train::TaskInputs)"));
    }
    for (size_t i = 0; i < local.size(); ++i) local[i] += batch.totals[i];
  }
  at::Tensor totals = model::HostToDevice(at::tensor(local, at::kDouble), device);
  communicator.SumInPlace(totals);
  return totals;
}

// Waits for the gradients' sums over the ranks, sums the metrics, unscales
// (fp16) and computes the clipping on the device, reads the metrics, the
// norm and the finite checks in the step's one read, and steps the
// optimizer unless the loss or a gradient is not finite. `sums`: the
// metrics as StepMetrics::WithDeviceSums lays them out, on the device.
StepResult ApplyGradients(Trainee& trainee, distributed::Communicator& communicator,
                          const at::Tensor& sums, double lr, const StepOptions& options) {
  trainee.reducer().Finish();
  communicator.SumInPlace(sums);
  std::vector<at::Tensor> parameters = trainee.model().parameters();
  model::LossScaler* scaler = trainee.scaler();
  const at::Tensor unscaled = scaler != nullptr ? scaler->Unscale(parameters)
                                                : at::ones({}, sums.options().dtype(at::kBool));
  // Clipping's coefficient multiplies the gradients inside the optimizer's
  // step (no pass of its own), computed on the device.
  const at::Tensor norm = optim::GlobalGradNorm(parameters, trainee.optimizer().fused());
  const at::Tensor clip = optim::ClipCoefficient(norm, options.max_grad_norm);
  const std::vector<double> read =
      ReadToHost(at::cat({sums, norm.to(sums.device(), at::kDouble).reshape({1}),
                          unscaled.to(sums.device(), at::kDouble).reshape({1})}));
  const size_t n = read.size() - 2;
  StepResult result;
  result.metrics =
      StepMetrics::FromVector({read.begin(), read.begin() + n}, trainee.task().SumNames().size());
  result.grad_norm = read[n];
  const bool finite_gradients = read[n + 1] != 0;
  if (scaler != nullptr) scaler->Update(finite_gradients);
  if (!(std::isfinite(result.metrics.loss) && finite_gradients &&
        std::isfinite(result.grad_norm))) {
    return result;
  }
  for (auto& group : trainee.optimizer().param_groups()) group.options().set_lr(lr);
  trainee.optimizer().ScaleGradients(clip);
  trainee.optimizer().step();
  result.applied = true;
  return result;
}

}  // namespace

absl::StatusOr<StepResult> TrainStep(Trainee& trainee, distributed::Communicator& communicator,
                                     const std::vector<MicroBatch>& batches, double lr,
                                     const StepOptions& options) {
  trainee.model().train();
  ASSIGN_OR_RETURN(const at::Tensor totals,
                   SumTotals(batches, trainee.task(), communicator, trainee.device()));
  trainee.reducer().ZeroGrad();
  // What the host knows of the micro-batches; the sums stay on the device
  // until the step's one read.
  StepMetrics host;
  at::Tensor sums_total;
  model::Randomness::Step random(trainee.randomness());
  // Forward and backward of one micro-batch: its loss and the task's sums.
  // The same work eagerly or captured (train/captured_step.h); what it
  // holds stays valid for as long as the trainee.
  Trainee* const t = &trainee;
  const CapturedMicroBatches::Work work = [t](const model::Inputs& inputs,
                                              const at::Tensor& step_totals) {
    tasks::Outputs outputs;
    {
      model::AutocastGuard autocast(t->precision(), t->device().type());
      outputs = t->task().Forward(t->model(), inputs);
    }
    const tasks::MicroBatchSums sums = t->task().Sums(outputs, inputs, step_totals);
    (t->scaler() != nullptr ? t->scaler()->Scale(sums.loss) : sums.loss).backward();
    return at::cat({sums.loss.detach().to(at::kDouble).reshape({1}), sums.sums});
  };
  for (size_t k = 0; k < batches.size(); ++k) {
    const MicroBatch& batch = batches[k];
    const uint64_t g = batch.index;
    random.MicroBatch(g);
    at::Tensor stats;
    if (CapturedMicroBatches* graphs = trainee.graphs()) {
      // The reducer's hooks run at capture only: every bucket starts after
      // the last replay (ApplyGradients).
      trainee.reducer().ReduceNextBackward(false);
      ASSIGN_OR_RETURN(stats, graphs->Run(batch.inputs, totals, [&] { random.MicroBatch(g); },
                                          work));
      if (k == 0) stats = stats.clone();  // a replay's sums are overwritten by the next one
    } else {
      trainee.reducer().ReduceNextBackward(k + 1 == batches.size());
      stats = work(batch.inputs, totals);
    }
    sums_total = sums_total.defined() ? sums_total + stats : stats;
    host.rows += static_cast<double>(batch.rows);
    host.tokens += static_cast<double>(batch.tokens);
    host.sequences += batch.work.sequences;
    host.flops += trainee.task().TrainingFlops(trainee.bert_options(), batch.work, batch.totals);
  }
  const size_t task_sums = trainee.task().SumNames().size();
  StepResult result =
      ApplyGradients(trainee, communicator,
                     host.WithDeviceSums(sums_total, task_sums, trainee.device()), lr, options);
  // After every step, applied or skipped (a skipped step's non-finite
  // maxima enter the history as 0).
  trainee.UpdateFp8(communicator);
  return result;
}

absl::StatusOr<StepResult> TrainStep(Trainee& trainee, distributed::Communicator& communicator,
                                     const std::vector<data::PackedBatch>& batches, double lr,
                                     const StepOptions& options, const tasks::PackedSet* set) {
  const TaskInputs task{&trainee.task(), set};
  ASSIGN_OR_RETURN(std::vector<MicroBatch> prepared,
                   Prepare(batches, trainee.input_plan(), task));
  // This rank's micro-batches follow those of the ranks before it.
  for (size_t k = 0; k < prepared.size(); ++k) {
    prepared[k].index = static_cast<uint64_t>(communicator.rank()) * prepared.size() + k;
  }
  return TrainStep(trainee, communicator, prepared, lr, options);
}

}  // namespace pbert::train
