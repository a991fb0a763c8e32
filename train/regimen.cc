#include "train/regimen.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "data/store.h"
#include "tasks/task.h"
#include "train/experiment.h"
#include "train/training_plan.h"

namespace pbert::train {

namespace {

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

class Pretraining : public Regimen {
 public:
  // The starting weights' key, which a resumed run does not read.
  static constexpr char kInitKey[] = "train.init_checkpoint";

  absl::Status Complete(const std::set<std::string>& given,
                        ExperimentConfig* config) const override {
    RETURN_IF_ERROR(TakeStoreLimits(given, config));
    return config->CheckTrainable();
  }
  // MLPerf's pretraining: the optim section's steps, LAMB after the packing
  // adjustment, train.micro_batch_rows x accumulation per rank, the MLPerf
  // evaluation interval and target, the MLLOG.
  absl::Status Plan(const ExperimentConfig& config, const tasks::PackedSet& train, int rank,
                    int world_size, TrainingPlan* plan) const override {
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
    plan->init_key = kInitKey;
    plan->batch_keys = "train.micro_batch_rows, optim.accumulation_steps";
    plan->length_keys = "optim.total_steps";
    plan->memory_advice =
        absl::StrCat("lower train.micro_batch_rows (now ", config.train.micro_batch_rows,
                     ") and raise optim.accumulation_steps to keep the batch");
    return absl::OkStatus();
  }

  std::string Describe(const ExperimentConfig& config, const tasks::Task& task,
                       const TrainingPlan& plan) const override {
    return config.optim.DescribeAdjustment(plan.optim, task.train()->packing_factor());
  }
  void Unread(const ExperimentConfig& config, bool resumed,
              config::InactiveKeys* keys) const override {
    keys->Section("finetune.", "train pretrains; packed-bert finetune reads the finetune section");
    if (config.optim.schedule.kind == optim::ScheduleKind::kConstant) {
      keys->Keys({"optim.warmup_steps", "optim.start_warmup_step", "optim.power", "optim.end_lr"},
                 "optim.schedule is constant (optim.lr throughout)");
    }
    if (config.data.eval.empty()) {
      keys->Keys({"train.eval_every_samples", "train.eval_packed", "train.target_mlm_accuracy"},
                 "there is no eval set (data.eval)");
    }
    if (resumed) {
      keys->Keys({kInitKey}, "a resumed run continues from its checkpoint's weights");
    }
  }
};

class FineTuning : public Regimen {
 public:
  // The starting weights' key, which a resumed run does not read.
  static constexpr char kInitKey[] = "finetune.init_checkpoint";

  absl::Status Complete(const std::set<std::string>&, ExperimentConfig*) const override {
    return absl::OkStatus();
  }
  // Fine-tuning: finetune.batch_size sequences a step on average (the rows
  // that hold as many, whatever the ranks, in micro-batches of
  // finetune.micro_batch_rows, the last shorter, or the step's rows shared
  // by the ranks), finetune.epochs passes, the rate
  // warmed up over finetune.warmup_proportion of the steps and decayed
  // linearly to 0, AdamW or LAMB without the packing adjustment, an
  // evaluation and a checkpoint after each epoch.
  absl::Status Plan(const ExperimentConfig& config, const tasks::PackedSet& train, int rank,
                    int world_size, TrainingPlan* plan) const override {
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
        1, static_cast<int64_t>(
               std::ceil(fc.epochs * rows / static_cast<double>(plan->rows_per_step))));
    plan->optim = config.optim;
    plan->optim.accumulation_steps = batches;
    optim::ScheduleOptions& schedule = plan->optim.schedule;
    schedule.kind = optim::ScheduleKind::kPoly;
    schedule.total_steps = total_steps;
    schedule.warmup_steps =
        static_cast<int64_t>(fc.warmup_proportion * static_cast<double>(total_steps));
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
    plan->init_key = kInitKey;
    plan->init_required = true;
    plan->mllog = false;
    plan->batch_keys = "finetune.batch_size, finetune.micro_batch_rows";
    plan->length_keys = "finetune.epochs";
    plan->memory_advice = absl::StrCat("lower finetune.micro_batch_rows (now ", per_batch, ")");
    return absl::OkStatus();
  }

  std::string Describe(const ExperimentConfig& config, const tasks::Task& task,
                       const TrainingPlan& plan) const override {
    const tasks::PackedSet& train = *task.train();
    return absl::StrFormat(
        "%s: %d sequences in %d rows (packing factor %.3f); %d rows per step, %d steps, %s at lr "
        "%.3g",
        task.name(), train.rows->sequences(), train.rows->rows(), train.packing_factor(),
        plan.rows_per_step, plan.stop.total_steps, NameOf(config.finetune.optimizer),
        plan.optim.schedule.peak_lr);
  }
  // Pretraining's schedule, data and MLLOG, and the finetune keys of other
  // tasks than the config's.
  void Unread(const ExperimentConfig& config, bool resumed,
              config::InactiveKeys* keys) const override {
    keys->Keys({"train.micro_batch_rows", "train.eval_every_samples", "train.target_mlm_accuracy",
                "train.max_samples", "train.checkpoint_every_steps", "train.log_every_steps",
                "train.init_checkpoint", "train.eval_packed", "optim.total_steps",
                "optim.warmup_steps", "optim.start_warmup_step", "optim.power", "optim.end_lr",
                "optim.schedule", "optim.accumulation_steps"},
               "finetune sets it (finetune.epochs, batch_size, micro_batch_rows, "
               "warmup_proportion, log_every_steps, checkpoint_every_steps)");
    keys->Keys({"optim.packing_adjustment"},
               "fine-tuning trains with the optim section's betas as given");
    keys->Keys({"model.mlm_loss"}, "a fine-tuning task has no masked-LM loss");
    keys->Keys({"data.store", "data.pack_index", "data.eval", "data.max_seq_len", "data.histogram"},
               "a fine-tuning task reads finetune.train_file and finetune.eval_file");
    keys->Section("mlperf.", "fine-tuning writes no MLLOG");
    const std::string& task = config.finetune.task;
    for (const std::string& key : tasks::TaskOwnKeys()) {
      if (!tasks::TaskReadsKey(task, key)) {
        keys->Keys({key}, absl::StrCat("finetune.task ", task, " does not read it"));
      }
    }
    if (resumed) {
      keys->Keys({kInitKey}, "a resumed run continues from its checkpoint's weights");
    }
  }
};

}  // namespace

const Regimen& PretrainingRegimen() {
  static const Pretraining regimen;
  return regimen;
}

const Regimen& FineTuningRegimen() {
  static const FineTuning regimen;
  return regimen;
}

absl::Status TakeStoreLimits(const std::set<std::string>& given, ExperimentConfig* config) {
  const std::string& store = config->data.store;
  std::error_code error;
  // Not a store: the command that opens it says so.
  if (store.empty() || !std::filesystem::exists(store + "/store.json", error)) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const data::StoreInfo info, data::ReadStoreInfo(store));
  auto log = logging::Get("run");
  if (given.count("data.max_seq_len") == 0) {
    config->data.max_seq_len = info.max_len;
  } else if (config->data.max_seq_len > info.max_len) {
    log->info(
        "data.max_seq_len {} is longer than the sequences of {} (at most {} tokens): "
        "they share rows of {}",
        config->data.max_seq_len, store, info.max_len, config->data.max_seq_len);
  }
  if (given.count("model.vocab_size") == 0) {
    config->model.bert.vocab_size(info.vocab_size);
  } else if (config->model.bert.vocab_size() != static_cast<int64_t>(info.vocab_size)) {
    log->info("model.vocab_size {} differs from the {} tokens of the vocabulary of {}",
              config->model.bert.vocab_size(), info.vocab_size, store);
  }
  return absl::OkStatus();
}

}  // namespace pbert::train
