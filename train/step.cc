#include "train/step.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <mutex>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/bert.h"
#include "optim/lamb.h"

namespace pbert::train {
namespace {

// SplitMix64 of the step's number and the micro-batch's place in the step.
uint64_t MicroBatchSeed(uint64_t step_seed, uint64_t micro) {
  uint64_t z = step_seed + (micro + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The step's totals (masked tokens, sequences) over all micro-batches and
// ranks, from the tensors alone: no graph is kept waiting for them.
model::StepTotals SumTotals(const std::vector<data::PackedBatch>& batches,
                            distributed::Communicator& communicator) {
  model::StepTotals local;
  for (const auto& batch : batches) local += model::TotalsOf(batch);
  std::vector<double> summed =
      communicator.Sum({local.mlm_tokens, local.mlm_sequences, local.nsp_sequences});
  return {summed[0], summed[1], summed[2]};
}

// Sums the gradients and metrics over the ranks, unscales (fp16), clips, and
// steps the optimizer unless the loss or a gradient is not finite.
StepResult ApplyGradients(std::vector<at::Tensor>& parameters, optim::Lamb& optimizer,
                          distributed::Communicator& communicator,
                          const PretrainingMetrics& local, double lr, const StepOptions& options,
                          model::LossScaler* scaler) {
  communicator.SumGradients(parameters, options.bucket_bytes);
  StepResult result;
  result.metrics = PretrainingMetrics::FromVector(communicator.Sum(local.ToVector()));
  bool finite = std::isfinite(result.metrics.loss);
  if (scaler != nullptr) {
    const bool unscaled = scaler->Unscale(parameters);
    scaler->Update(unscaled);
    finite = finite && unscaled;
  }
  result.grad_norm = optim::ClipGradNorm(parameters, options.max_grad_norm);
  finite = finite && std::isfinite(result.grad_norm);
  if (!finite) {
    optimizer.zero_grad();
    return result;
  }
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
  optimizer.step();
  result.applied = true;
  return result;
}

}  // namespace

absl::StatusOr<StepResult> TrainStep(model::BertForPreTraining& model, optim::Lamb& optimizer,
                                     distributed::Communicator& communicator,
                                     const std::vector<data::PackedBatch>& batches, double lr,
                                     const StepOptions& options, model::LossScaler* scaler) {
  model->train();
  std::vector<at::Tensor> parameters = model->parameters();
  const model::StepTotals totals = SumTotals(batches, communicator);

  optimizer.zero_grad();
  PretrainingMetrics metrics;
  const c10::DeviceType device = parameters.front().device().type();
  // The step's sums stay on the device until the end: one host copy a step.
  at::Tensor sums_total;
  // Dropout: micro-batch g of the step over all ranks (g = rank * A + k)
  // draws its masks from the generator seeded by (a number drawn once per
  // step, g). So two ranks with a micro-batch each draw exactly the masks one
  // rank accumulating both draws, and all ranks' generators stay in step.
  auto generator = at::detail::getDefaultCPUGenerator();
  uint64_t step_seed;
  at::Tensor generator_after;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    step_seed = generator.get<at::CPUGeneratorImpl>()->random64();
    generator_after = generator.get_state();
  }
  const uint64_t first_micro = static_cast<uint64_t>(communicator.rank()) * batches.size();
  for (size_t k = 0; k < batches.size(); ++k) {
    const data::PackedBatch& batch = batches[k];
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_current_seed(MicroBatchSeed(step_seed, first_micro + k));
    }
    model::PretrainingLogits logits;
    {
      model::AutocastGuard autocast(options.precision, device);
      logits = model(batch);
    }
    model::PretrainingSums sums = model::ComputeSums(logits, batch);
    at::Tensor loss = model::PretrainingLoss(sums, options.mlm_loss, totals);
    (scaler != nullptr ? scaler->Scale(loss) : loss).backward();
    at::Tensor stats = at::cat({PretrainingMetrics::SumsTensor(sums),
                                loss.detach().to(at::kDouble).reshape({1})});
    sums_total = sums_total.defined() ? sums_total + stats : stats;
    metrics.rows += static_cast<double>(batch.rows());
    metrics.tokens += static_cast<double>(batch.tokens);
  }
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(generator_after);
  }
  if (sums_total.defined()) {
    at::Tensor host = sums_total.to(at::kCPU);
    metrics.AddSums(host.slice(0, 0, 8));
    metrics.loss = host[8].item<double>();
  }
  return ApplyGradients(parameters, optimizer, communicator, metrics, lr, options, scaler);
}

RandomState SaveRandomState() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  at::Tensor state = generator.get_state();
  return {absl::BytesToHexString(
      absl::string_view(static_cast<const char*>(state.data_ptr()), state.numel()))};
}

absl::Status RestoreRandomState(const RandomState& saved) {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  at::Tensor current = generator.get_state();
  const std::string& hex = saved.cpu;
  if (static_cast<int64_t>(hex.size()) != 2 * current.numel()) {
    return absl::DataLossError("the checkpoint's random generator state has the wrong size");
  }
  at::Tensor state = at::empty({current.numel()}, at::kByte);
  uint8_t* bytes = state.data_ptr<uint8_t>();
  for (int64_t i = 0; i < current.numel(); ++i) {
    // absl::HexStringToBytes changed its signature after Debian 12's Abseil.
    int byte = 0;
    if (!absl::SimpleHexAtoi(absl::string_view(hex).substr(2 * i, 2), &byte)) {
      return absl::DataLossError("the checkpoint's random generator state is not hexadecimal");
    }
    bytes[i] = static_cast<uint8_t>(byte);
  }
  generator.set_state(state);
  return absl::OkStatus();
}

}  // namespace pbert::train
