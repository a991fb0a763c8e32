#include "train/training_plan.h"

#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/platform.h"
#include "common/status.h"
#include "model/attention.h"
#include "train/captured_step.h"
#include "train/device.h"

namespace pbert::train {

namespace {

// What the model and its optimizer are made with.
void PlanTrainee(const ExperimentConfig& config, const c10::Device& device, TrainingPlan* plan) {
  plan->trainee.bert = config.model.bert;
  plan->trainee.lamb = plan->optim.lamb;
  plan->trainee.exclude_from_trust_ratio = plan->optim.exclude_from_trust_ratio;
  plan->trainee.precision = plan->precision;
  plan->trainee.device = device;
  plan->trainee.seed = static_cast<uint64_t>(config.run.seed);
  plan->trainee.bucket_bytes = config.dist.bucket_bytes();
  plan->trainee.overlap = config.dist.overlap;
  plan->trainee.master_weights = config.model.master_weights;
  plan->trainee.fused_optimizer = config.optim.fused;
  plan->trainee.fp8 = config.model.fp8;
  plan->trainee.cuda_graphs = config.run.cuda_graphs;
  plan->step.mlm_loss = config.model.mlm_loss;
  plan->step.max_grad_norm = config.optim.max_grad_norm;
}

// This rank's loader, and the rows and sequences of one step.
absl::Status PlanLoader(const ExperimentConfig& config, const TrainingData& data, int rank,
                        int world_size, TrainingPlan* plan) {
  plan->loader = config.data.loader;  // its threads and prefetch
  plan->loader.rows_per_batch = config.train.micro_batch_rows;
  plan->loader.batches_per_step = plan->optim.accumulation_steps;
  plan->loader.shape = {static_cast<int>(config.data.max_seq_len),
                        config.packing.options.max_depth, 0};
  RETURN_IF_ERROR(
      config.model.CheckMicroBatchFits(config.train.micro_batch_rows, config.data.max_seq_len));
  plan->loader.rank = rank;
  plan->loader.world_size = world_size;
  plan->loader.seed = static_cast<uint64_t>(config.run.seed);
  plan->rows_per_step = config.train.RowsPerStep(plan->optim.accumulation_steps, world_size);
  plan->sequences_per_step = static_cast<double>(plan->rows_per_step) * data.packing_factor();
  if (static_cast<uint64_t>(plan->rows_per_step) > data.rows->rows() && rank == 0) {
    // Allowed (a tiny store to try a config on), but rarely meant.
    logging::Get("train")->warn(
        "one step takes {} rows and the training data has {}: each step spans more than an "
        "epoch, so it sees some sequences twice; use a larger data.store or fewer rows per step "
        "(train.micro_batch_rows, optim.accumulation_steps)",
        plan->rows_per_step, data.rows->rows());
  }
  return absl::OkStatus();
}

// The loop's parts: when it stops, checkpoints, evaluates and logs.
void PlanLoop(const ExperimentConfig& config, TrainingPlan* plan) {
  plan->eval_every_samples = config.train.eval_every_samples > 0
                                 ? config.train.eval_every_samples
                                 : MlperfEvalInterval(plan->sequences_per_step);
  plan->stop.total_steps = config.optim.schedule.total_steps;
  plan->stop.max_samples = config.train.max_samples;
  plan->stop.max_bad_steps = config.train.max_bad_steps;
  plan->checkpoint.run_dir = config.run.output_dir;
  plan->checkpoint.every_steps = config.train.checkpoint_every_steps;
  plan->checkpoint.keep = static_cast<int>(config.train.keep_checkpoints);
  plan->evaluation.every_samples = static_cast<uint64_t>(plan->eval_every_samples);
  plan->evaluation.target_mlm_accuracy = config.train.target_mlm_accuracy;
  plan->metrics.every_steps = config.train.log_every_steps;
  plan->metrics.max_len = static_cast<int>(config.data.max_seq_len);
  plan->metrics.tensorboard = config.train.tensorboard;
}

// The hyperparameters the MLPerf log states at the start.
MlperfHeader PlanMllogHeader(const ExperimentConfig& config, const TrainingData& data,
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
  h.train_samples = data.rows->sequences();
  h.eval_samples = data.eval && data.eval_rows ? data.eval_rows->sequences() : 0;
  return h;
}

}  // namespace

absl::StatusOr<TrainingPlan> TrainingPlan::Make(const ExperimentConfig& config,
                                                const TrainingData& data, int rank, int world_size,
                                                const c10::Device& device) {
  TrainingPlan plan;
  plan.device = device;
  const double p = data.packing_factor();
  ASSIGN_OR_RETURN(plan.optim, config.optim.AdjustedFor(p));
  ASSIGN_OR_RETURN(plan.precision, model::ResolvePrecision(config.model.precision, device));
  if (plan.precision == model::Precision::kFp8) {
    RETURN_IF_ERROR(model::CheckFp8(config.model.fp8, config.model.bert, device));
  }
  RETURN_IF_ERROR(model::CheckVarlenKernel(config.model.bert, device));
  PlanTrainee(config, device, &plan);
  if (config.run.cuda_graphs) {
    const model::InputPlan inputs =
        model::InputPlan::For(config.model.bert, device, plan.precision, c10::kFloat);
    RETURN_IF_ERROR(CheckCapturable(config.model.bert, inputs, plan.precision));
  }
  RETURN_IF_ERROR(PlanLoader(config, data, rank, world_size, &plan));
  PlanLoop(config, &plan);
  ASSIGN_OR_RETURN(plan.profile, ParseProfileSteps(config.train.profile_steps));
  if (!plan.profile.empty() && plan.profile.last > plan.stop.total_steps) {
    // The profile is written after its last step: one the run never takes
    // would leave none, without a word.
    return absl::InvalidArgumentError(absl::StrCat(
        "train.profile_steps: steps ", plan.profile.first, " to ", plan.profile.last,
        " go past optim.total_steps ", plan.stop.total_steps, "; profile steps the run takes"));
  }
  plan.mllog_header = PlanMllogHeader(config, data, plan);
  const std::string& kernels = TuneOpenBlasKernels().chosen;
  plan.description = absl::StrFormat(
      "%s; %.1f sequences per step; evaluation every %d sequences; device %s; precision %s%s; "
      "OpenBLAS kernels %s",
      config.optim.DescribeAdjustment(plan.optim, p), plan.sequences_per_step,
      plan.eval_every_samples, DescribeDevice(device), NameOf(plan.precision),
      config.run.cuda_graphs ? "; micro-batches replayed as CUDA graphs" : "",
      kernels.empty() ? "(not OpenBLAS)" : kernels);
  return plan;
}

int64_t MlperfEvalInterval(double gbs) {
  return static_cast<int64_t>(std::floor(0.05 * (230.23 * gbs + 3'000'000) / 25'000)) * 25'000;
}

}  // namespace pbert::train
