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

// This rank's loader of `rows_per_batch` rows a micro-batch and
// `batches_per_step` micro-batches a step (`rows_per_step` rows over all
// ranks; 0: every micro-batch full), and the evaluations' of `eval_rows`
// rows a pass.
absl::Status PlanLoaders(const ExperimentConfig& config, const tasks::PackedSet& train,
                         int64_t rows_per_batch, int64_t batches_per_step, int64_t rows_per_step,
                         int64_t eval_rows, int rank, int world_size, TrainingPlan* plan) {
  plan->loader = config.data.loader;  // its threads and prefetch
  plan->loader.rows_per_batch = rows_per_batch;
  plan->loader.batches_per_step = batches_per_step;
  plan->loader.rows_per_step = rows_per_step;
  plan->loader.shape = train.shape;
  RETURN_IF_ERROR(config.model.CheckMicroBatchFits(rows_per_batch, train.shape.max_len));
  plan->loader.rank = rank;
  plan->loader.world_size = world_size;
  plan->loader.seed = static_cast<uint64_t>(config.run.seed);
  plan->eval_loader = plan->loader;
  plan->eval_loader.rows_per_batch = eval_rows;
  plan->rows_per_step =
      rows_per_step > 0 ? rows_per_step : rows_per_batch * batches_per_step * world_size;
  plan->sequences_per_step = static_cast<double>(plan->rows_per_step) * train.packing_factor();
  if (static_cast<uint64_t>(plan->rows_per_step) > train.rows->rows() && rank == 0) {
    // Allowed (a tiny set to try a config on), but rarely meant.
    logging::Get("train")->warn(
        "one step takes {} rows and the training data has {}: each step spans more than an "
        "epoch, so it sees some sequences twice; use more training data or fewer rows per step",
        plan->rows_per_step, train.rows->rows());
  }
  return absl::OkStatus();
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

// MLPerf's pretraining: the optim section's steps, LAMB after the packing
// adjustment, train.micro_batch_rows x accumulation per rank, the MLPerf
// evaluation interval and target, the MLLOG.
absl::Status PlanPretraining(const ExperimentConfig& config, const tasks::PackedSet& train,
                             int rank, int world_size, TrainingPlan* plan) {
  ASSIGN_OR_RETURN(plan->optim, config.optim.AdjustedFor(train.packing_factor()));
  RETURN_IF_ERROR(PlanLoaders(config, train, config.train.micro_batch_rows,
                              plan->optim.accumulation_steps, 0, config.train.micro_batch_rows,
                              rank, world_size, plan));
  plan->eval_every_samples = config.train.eval_every_samples > 0
                                 ? config.train.eval_every_samples
                                 : MlperfEvalInterval(plan->sequences_per_step);
  plan->stop.total_steps = config.optim.schedule.total_steps;
  plan->stop.max_samples = config.train.max_samples;
  plan->checkpoint.every_steps = config.train.checkpoint_every_steps;
  plan->evaluation.target = config.train.target_mlm_accuracy;
  plan->metrics.every_steps = config.train.log_every_steps;
  plan->init_checkpoint = config.train.init_checkpoint;
  plan->init_key = "train.init_checkpoint";
  plan->batch_keys = "train.micro_batch_rows, optim.accumulation_steps";
  plan->length_keys = "optim.total_steps";
  plan->memory_advice =
      absl::StrCat("lower train.micro_batch_rows (now ", config.train.micro_batch_rows,
                   ") and raise optim.accumulation_steps to keep the batch");
  return absl::OkStatus();
}

// Fine-tuning: finetune.batch_size sequences a step on average (the rows
// that hold as many, whatever the ranks, in micro-batches of
// finetune.micro_batch_rows, the last shorter, or the step's rows shared
// by the ranks), finetune.epochs passes, the rate
// warmed up over finetune.warmup_proportion of the steps and decayed
// linearly to 0, AdamW or LAMB without the packing adjustment, an
// evaluation and a checkpoint after each epoch.
absl::Status PlanFineTuning(const ExperimentConfig& config, const tasks::PackedSet& train,
                            int rank, int world_size, TrainingPlan* plan) {
  const tasks::FinetuneConfig& fc = config.finetune;
  const int64_t world = world_size;
  const int64_t wanted = std::max<int64_t>(
      1, std::llround(static_cast<double>(fc.batch_size) / train.packing_factor()));
  const int64_t per_batch =
      fc.micro_batch_rows > 0 ? fc.micro_batch_rows : (wanted + world - 1) / world;
  const int64_t batches = (wanted + per_batch * world - 1) / (per_batch * world);
  RETURN_IF_ERROR(PlanLoaders(config, train, per_batch, batches, wanted, fc.eval_batch_rows, rank,
                              world_size, plan));
  const double rows = static_cast<double>(train.rows->rows());
  const int64_t total_steps = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(fc.epochs * rows / static_cast<double>(plan->rows_per_step))));
  plan->optim = config.optim;
  plan->optim.accumulation_steps = batches;
  optim::ScheduleOptions& schedule = plan->optim.schedule;
  schedule.kind = optim::ScheduleKind::kPoly;
  schedule.total_steps = total_steps;
  schedule.warmup_steps = static_cast<int64_t>(fc.warmup_proportion * static_cast<double>(total_steps));
  schedule.start_warmup_step = 0;
  schedule.power = 1.0;
  schedule.end_lr = 0.0;
  if (fc.optimizer == tasks::FinetuneOptimizer::kAdamW) plan->optim.lamb.trust_ratio(false);
  plan->eval_every_samples = static_cast<int64_t>(train.rows->sequences());  // an epoch
  plan->stop.total_steps = total_steps;
  plan->checkpoint.every_steps = fc.checkpoint_every_steps;
  plan->checkpoint.after_evaluation = true;
  plan->metrics.every_steps = fc.log_every_steps;
  plan->init_checkpoint = fc.init_checkpoint;
  plan->init_key = "finetune.init_checkpoint";
  plan->init_required = true;
  plan->mllog = false;
  plan->batch_keys = "finetune.batch_size, finetune.micro_batch_rows";
  plan->length_keys = "finetune.epochs";
  plan->memory_advice = absl::StrCat("lower finetune.micro_batch_rows (now ", per_batch, ")");
  return absl::OkStatus();
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
                                                Regimen regimen, int rank, int world_size,
                                                const c10::Device& device) {
  TrainingPlan plan;
  plan.regimen = regimen;
  plan.device = device;
  const tasks::PackedSet* train = task->train();
  if (train == nullptr) return absl::InternalError("a training plan of a task without training data");
  ASSIGN_OR_RETURN(plan.precision, model::ResolvePrecision(config.model.precision, device));
  RETURN_IF_ERROR(regimen == Regimen::kPretraining
                      ? PlanPretraining(config, *train, rank, world_size, &plan)
                      : PlanFineTuning(config, *train, rank, world_size, &plan));
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
  const std::string shape =
      regimen == Regimen::kPretraining
          ? config.optim.DescribeAdjustment(plan.optim, train->packing_factor())
          : absl::StrFormat(
                "%s: %d sequences in %d rows (packing factor %.3f); %d rows per step, %d steps, "
                "%s at lr %.3g",
                task->name(), train->rows->sequences(), train->rows->rows(),
                train->packing_factor(), plan.rows_per_step, plan.stop.total_steps,
                NameOf(config.finetune.optimizer), plan.optim.schedule.peak_lr);
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
