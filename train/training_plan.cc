#include "train/training_plan.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/platform.h"
#include "common/status.h"
#include "train/device.h"

namespace pbert::train {

namespace {

// What the model and its optimizer are made with, in either regimen.
void PlanTrainee(const ExperimentConfig& config, std::shared_ptr<const tasks::Task> task,
                 const c10::Device& device, TrainingPlan* plan) {
  plan->trainee = TraineeOptionsOf(config, plan->precision, device);
  plan->trainee.task = std::move(task);
  plan->trainee.lamb = plan->optim.lamb;
  plan->trainee.exclude_from_trust_ratio = plan->optim.exclude_from_trust_ratio;
  plan->step.max_grad_norm = config.optim.max_grad_norm;
}

// The loop's parts shared by both regimens: bad steps, checkpoints kept,
// TensorBoard, the profile.
void PlanLoop(const ExperimentConfig& config, const tasks::PackedSet& train, TrainingPlan* plan) {
  plan->stop.max_bad_steps = config.train.max_bad_steps;
  plan->checkpoint.run_dir = config.run.output_dir;
  plan->checkpoint.keep = static_cast<int>(config.train.keep_checkpoints);
  plan->metrics.max_len = train.shape.max_len;
  plan->metrics.tensorboard = config.train.tensorboard;
  plan->metrics.task = plan->trainee.task.get();
  plan->evaluation.every_samples = static_cast<uint64_t>(plan->eval_every_samples);
}

// The hyperparameters the MLPerf log states at the start.
MlperfHeader PlanMllogHeader(const ExperimentConfig& config, const tasks::Task& task,
                             const TrainingPlan& plan) {
  MlperfHeader h;
  const optim::ScheduleOptions& s = plan.optim.schedule;
  h.seed = static_cast<uint64_t>(config.run.seed);
  h.global_batch_size = std::llround(plan.sequences_per_step);
  h.gradient_accumulation_steps = plan.optim.accumulation_steps;
  h.base_learning_rate = s.peak_lr;
  h.epsilon = plan.optim.lamb.eps();
  h.training_steps = s.total_steps;
  h.warmup_steps = s.warmup_steps;
  h.start_warmup_step = s.start_warmup_step;
  std::tie(h.beta1, h.beta2) = plan.optim.lamb.betas();
  h.weight_decay = plan.optim.lamb.weight_decay();
  h.decay_power = s.power;
  h.max_sequence_length = config.data.max_seq_len;
  h.train_samples = task.train()->rows->sequences();
  h.eval_samples = task.evaluation().empty() ? 0 : task.evaluation().front().rows->sequences();
  return h;
}

}  // namespace

TraineeOptions TraineeOptionsOf(const ExperimentConfig& config, model::Precision precision,
                                const c10::Device& device) {
  TraineeOptions options;
  options.bert = config.model.bert;
  options.precision = precision;
  options.device = device;
  options.seed = static_cast<uint64_t>(config.run.seed);
  options.bucket_bytes = config.dist.bucket_bytes();
  options.overlap = config.dist.overlap;
  options.master_weights = IsOn(config.model.master_weights, device.is_cuda());
  options.fused_optimizer = config.optim.fused;
  options.fp8 = config.model.fp8;
  options.cuda_graphs = config.run.cuda_graphs;
  return options;
}

absl::StatusOr<TrainingPlan> TrainingPlan::Make(const ExperimentConfig& config,
                                                std::shared_ptr<const tasks::Task> task,
                                                const Regimen& regimen, int rank, int world_size,
                                                const c10::Device& device) {
  TrainingPlan plan;
  plan.device = device;
  const tasks::PackedSet* train = task->train();
  if (train == nullptr) return absl::InternalError("a training plan of a task without training data");
  ASSIGN_OR_RETURN(plan.precision, model::ResolvePrecision(config.model.precision, device));
  RETURN_IF_ERROR(regimen.Plan(config, *train, rank, world_size, &plan));
  plan.evaluation.target_metric = task->TargetMetric();
  PlanTrainee(config, task, device, &plan);
  PlanLoop(config, *train, &plan);
  ASSIGN_OR_RETURN(plan.profile, ParseProfileSteps(config.train.profile_steps));
  if (!plan.profile.empty() && plan.profile.last > plan.stop.total_steps) {
    // The profile is written after its last step: one the run never takes
    // would leave none, without a word.
    return absl::InvalidArgumentError(absl::StrCat(
        "train.profile_steps: steps ", plan.profile.first, " to ", plan.profile.last,
        " go past the run's ", plan.stop.total_steps, " steps (", plan.length_keys,
        "); profile steps the run takes"));
  }
  if (plan.mllog) plan.mllog_header = PlanMllogHeader(config, *task, plan);
  const std::string& kernels = TuneOpenBlasKernels().chosen;
  const std::string shape = regimen.Describe(config, *task, plan);
  plan.description = absl::StrFormat(
      "%s; %.1f sequences per step; evaluation every %d sequences; device %s; precision %s%s; "
      "OpenBLAS kernels %s",
      shape, plan.sequences_per_step, plan.eval_every_samples, DescribeDevice(device),
      NameOf(plan.precision),
      config.run.cuda_graphs ? "; micro-batches replayed as CUDA graphs" : "",
      kernels.empty() ? "(not OpenBLAS)" : kernels);
  return plan;
}

int64_t MlperfEvalInterval(double gbs) {
  return static_cast<int64_t>(std::floor(0.05 * (230.23 * gbs + 3'000'000) / 25'000)) * 25'000;
}

}  // namespace pbert::train
