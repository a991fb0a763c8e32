#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/nn/module.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/platform.h"
#include "common/progress.h"
#include "common/status.h"
#include "model/task_heads.h"
#include "model/weights.h"
#include "tasks/pretraining.h"
#include "tasks/tasks.h"
#include "common/fault.h"
#include "train/inputs.h"
#include "train/peak_flops.h"

namespace pbert::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string ChecksumText(uint64_t checksum) { return absl::StrFormat("%016x", checksum); }

// The checksum of `sets`' data as saved in the loop's state (several sets
// one after the other); "" unknown. `what` gets the keys and paths that
// named them, for messages.
std::string DataChecksumText(const std::vector<const tasks::PackedSet*>& sets, std::string* what) {
  std::vector<std::string> checksums, names;
  for (const tasks::PackedSet* set : sets) {
    if (set->checksum == 0) return "";
    checksums.push_back(ChecksumText(set->checksum));
    names.push_back(absl::StrCat(set->key, " ", set->path));
  }
  if (what != nullptr) *what = absl::StrJoin(names, ", ");
  return absl::StrJoin(checksums, ",");
}

// The sets a run scores (a file to predict is no part of its data).
std::vector<const tasks::PackedSet*> EvaluationSets(const tasks::Task& task) {
  std::vector<const tasks::PackedSet*> sets;
  for (const tasks::PackedSet& set : task.evaluation()) {
    if (set.labeled) sets.push_back(&set);
  }
  return sets;
}

// Fails if `what`'s data is not the data `checkpoint` was trained with:
// the same lengths (so the same rows) made again from other text, with
// another vocabulary, or other targets, is other data; `force` goes on
// with it, saying so.
absl::Status CheckSameData(const std::string& saved, const std::string& now,
                           const std::string& checkpoint, const std::string& what, bool force) {
  if (saved.empty() || now.empty() || saved == now) return absl::OkStatus();
  const std::string differ = absl::StrCat(checkpoint, " was trained with other data at ", what,
                                          ": its records or vocabulary differ (data checksum ",
                                          saved, ", now ", now, "; prepared again?)");
  if (force) {
    logging::Get("train")->warn("{}; going on with it (--force)", differ);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      differ, "; resume with the data it was trained with, or add --force to go on with this"));
}

std::shared_ptr<spdlog::logger> Log() { return logging::Get("train"); }

// The run folder a checkpoint was written in: RUN_DIR/checkpoints/step-N.
std::string RunFolderOf(const std::string& checkpoint) {
  return std::filesystem::path(checkpoint).lexically_normal().parent_path().parent_path().string();
}

// Resumed into another run.output_dir than the checkpoint's own, the run's
// logs so far (the MLLOG and metrics.jsonl up to the checkpoint) are carried
// over, so that the new folder holds the whole run. Returns the folder to
// carry them from, or "" when the run stays in its folder.
std::string LogSource(const std::string& checkpoint, const std::string& run_dir) {
  const std::string source = RunFolderOf(checkpoint);
  std::error_code error;
  return std::filesystem::equivalent(source, run_dir, error) ? std::string() : source;
}

// The logs a run appends to, with their lengths at a checkpoint.
std::vector<std::pair<std::string, uint64_t>> RunLogs(const MlperfLogState& mllog,
                                                      const MetricsLogState& metrics) {
  std::vector<std::pair<std::string, uint64_t>> logs = {{"mllog.txt", mllog.bytes},
                                                        {"metrics.jsonl", metrics.bytes}};
  if (metrics.tensorboard_bytes > 0) logs.emplace_back(kTensorBoardFile, metrics.tensorboard_bytes);
  return logs;
}

// " name value" for each metric.
std::string MetricsText(const tasks::Metrics& metrics) {
  std::string out;
  for (const auto& [name, value] : metrics) absl::StrAppendFormat(&out, " %s %.4f", name, value);
  return out;
}

// One evaluator per set of the task.
std::vector<std::unique_ptr<Evaluator>> Evaluators(const tasks::Task& task,
                                                   const TrainingPlan& plan) {
  std::vector<std::unique_ptr<Evaluator>> out;
  for (const tasks::PackedSet& set : task.evaluation()) {
    out.push_back(std::make_unique<Evaluator>(task, set, plan.eval_loader, plan.trainee.bert,
                                              plan.precision, plan.device));
  }
  return out;
}

}  // namespace

Trainer::Trainer(const TrainerSetup& setup)
    : setup_(setup),
      config_(setup.config),
      plan_(setup.plan),
      task_(*setup.task),
      comm_(setup.communicator),
      rank0_(setup.communicator.rank() == 0),
      evaluation_(Evaluators(*setup.task, setup.plan), setup.plan.evaluation),
      stop_(setup.plan.stop, setup.stop_requested),
      checkpointer_(setup.plan.checkpoint, setup.communicator),
      profiler_(setup.plan.profile,
                setup.communicator.rank() == 0 ? setup.config.run.output_dir : std::string(),
                setup.plan.device),
      session_start_(Clock::now()) {}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainerSetup& setup) {
  std::unique_ptr<Trainer> trainer(new Trainer(setup));
  try {
    RETURN_IF_ERROR(setup.resume ? trainer->InitResume(*setup.resume) : trainer->InitNew());
  } catch (const std::exception& e) {
    return trainer->Failed(e);
  }
  return trainer;
}

absl::Status Trainer::BuildModel() {
  ASSIGN_OR_RETURN(trainee_, Trainee::Make(plan_.trainee, comm_));
  return absl::OkStatus();
}

// The weights the run starts from: a model of the task itself (a run's
// checkpoint, or its exported model), or a pretrained model whose encoder
// is taken (any format model convert reads).
absl::Status Trainer::LoadStart() {
  const std::string& path = plan_.init_checkpoint;
  if (path.empty()) {
    if (!plan_.init_required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "the run needs ", plan_.init_key, " (or --init): the pretrained weights to start from"));
  }
  // The parameters a model of this task reads from a file (a model for
  // SQuAD has no use for the pooler, which its export leaves out).
  const auto used = [this](const std::string& name) { return task_.Trains(name); };
  const std::string trained_for = TaskOfWeights(path);
  if (task_.OriginOf(trained_for) == tasks::WeightsOrigin::kOtherTask) {
    // Another task's fine-tuned model: its encoder, and the pooler where
    // it has one; this task's head is drawn anew, as transformers does.
    ASSIGN_OR_RETURN(const model::Weights weights, model::ReadWeights(path));
    const bool pooled = weights.tensors.count("bert.pooler.dense.weight") > 0;
    const auto encoder = [&](const std::string& name) {
      return absl::StartsWith(name, "bert.") && used(name) &&
             (pooled || !absl::StartsWith(name, "bert.pooler."));
    };
    RETURN_IF_ERROR(
        Annotate(LoadVerifiedWeights(path, trainee_->weights(), encoder), plan_.init_key));
    logging::Get("train")->warn(
        "{} is a model fine-tuned for {}: its encoder{} taken, and {}'s head is drawn anew", path,
        trained_for, pooled ? " and pooler are" : " is", task_.name());
    return absl::OkStatus();
  }
  if (LoadVerifiedWeights(path, trainee_->weights(), used).ok()) return absl::OkStatus();
  // Built without drawing from the generators, as if it had not been.
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  const at::Tensor state = cpu.get_state();
  model::BertForPreTraining pretrained(config_.model.bert);
  cpu.set_state(state);
  absl::Status as_pretrained = LoadVerifiedWeights(path, *pretrained);
  if (as_pretrained.ok()) {
    model::CopyEncoder(pretrained->bert, trainee_->weights_encoder());
    return absl::OkStatus();
  }
  // A fine-tuned model of another task (or of this one with other labels)
  // says so, naming its head (a tensor beside the encoder and pretraining's
  // heads); anything else gets the pretrained reader's message.
  if (auto weights = model::ReadWeights(path); weights.ok()) {
    for (const auto& [name, tensor] : weights->tensors) {
      if (absl::StartsWith(name, "bert.") || tasks::IsPretrainingHead(name) ||
          !absl::EndsWith(name, ".weight") || tensor.dim() != 2) {
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is a fine-tuned model (", name, " of ", tensor.size(0),
          " outputs), not one of ", task_.name(), "'s head: start from pretrained weights"));
    }
  }
  return Annotate(as_pretrained, plan_.init_key);
}

// The parts that keep state across a resume, from `state`. The logs are
// opened by `OpenLogs`, when training starts: a run refused while it is
// created writes nothing.
absl::Status Trainer::OpenParts(const TrainerState& state) {
  RETURN_IF_ERROR(CheckSameDataOnEveryRank(state.loop));
  log_state_ = {state.mllog, state.metrics};
  // The loader's threads make each micro-batch the model's inputs on the
  // device, with the task's tensors (train/inputs.h).
  const tasks::PackedSet& train = *task_.train();
  data::LoaderOptions loader = plan_.loader;
  loader.prepare = Preparer(trainee_->input_plan(), {&task_, &train});
  ASSIGN_OR_RETURN(loader_,
                   data::Loader::Create(train.sequences, train.rows, loader, state.loader));
  evaluation_.Restore(state.evaluation);
  stop_.Restore(state.stop);
  if (model::LossScaler* scaler = trainee_->scaler()) scaler->Restore(state.loss_scale);
  RETURN_IF_ERROR(trainee_->RestoreFp8(state.fp8));
  loop_ = state.loop;
  loop_.world_size = comm_.world_size();
  loop_.rows_per_step = plan_.rows_per_step;
  loop_.rows_per_batch = plan_.loader.rows_per_batch;
  loop_.batches_per_step = plan_.loader.batches_per_step;
  // One seed gives every rank the same weights; rank 0's are sent anyway,
  // so that nothing else (an init checkpoint read differently) can differ.
  comm_.Broadcast(trainee_->weights().parameters());
  trainee_->SyncModelWeights();
  return absl::OkStatus();
}

// Every rank reads its share of the same rows: a node whose copy of a
// file differs (another version, a half-copied file) would train on other
// sequences without a word. Each rank's checksums of its training and
// evaluation data (`loop`'s) are compared with the others' (their sum
// against world size times its own), and every rank then agrees on the
// outcome, so that all stop together, each naming its own data.
absl::Status Trainer::CheckSameDataOnEveryRank(const LoopState& loop) {
  if (comm_.world_size() <= 1) return absl::OkStatus();
  // 32 bits of each: their sums over any world are exact in double.
  auto bits = [](const std::string& checksum) {
    return static_cast<double>(std::hash<std::string>()(checksum) & 0xffffffffu);
  };
  const std::vector<double> own = {bits(loop.train_data_checksum),
                                   bits(loop.eval_data_checksum)};
  const std::vector<double> sums = comm_.Sum(own);
  const bool train_differs = sums[0] != own[0] * comm_.world_size();
  const bool differs = train_differs || sums[1] != own[1] * comm_.world_size();
  if (comm_.Sum({differs ? 1.0 : 0.0})[0] == 0) return absl::OkStatus();
  // This rank's data that differs (its training data where none of its own does).
  const bool eval = differs && !train_differs;
  std::string sets;
  const std::string checksum = DataChecksumText(
      eval ? EvaluationSets(task_) : std::vector<const tasks::PackedSet*>{task_.train()}, &sets);
  return absl::InvalidArgumentError(absl::StrCat(
      "the ranks read different data (rank ", comm_.rank(), ": ", sets, ", checksum ", checksum,
      "; another rank's differs): give every node the same files (copy them whole), or a path "
      "all of them share"));
}

absl::Status Trainer::InitNew() {
  RETURN_IF_ERROR(BuildModel());
  RETURN_IF_ERROR(LoadStart());
  TrainerState state;
  state.evaluation.next_samples = static_cast<uint64_t>(plan_.eval_every_samples);
  state.loop.task = task_.name();
  state.loop.train_index_checksum = ChecksumText(task_.train()->rows->Checksum());
  state.loop.train_data_checksum = DataChecksumText({task_.train()}, nullptr);
  state.loop.eval_data_checksum = DataChecksumText(EvaluationSets(task_), nullptr);
  return OpenParts(state);
}

absl::Status Trainer::OpenLogs() {
  const std::string& dir = config_.run.output_dir;
  if (rank0_ && !log_source_.empty()) {
    // A log that is missing or shorter there is carried as it is, and
    // opened below as any cut log is.
    for (const auto& [name, bytes] : RunLogs(log_state_.mllog, log_state_.metrics)) {
      const std::string from = absl::StrCat(log_source_, "/", name);
      std::error_code missing;
      if (!std::filesystem::exists(from, missing)) continue;
      ASSIGN_OR_RETURN(std::string text, ReadFile(from));
      RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/", name), text.substr(0, bytes)));
    }
  }
  ASSIGN_OR_RETURN(
      mllog_, MlperfLog::Open(rank0_ && plan_.mllog ? dir + "/mllog.txt" : "", log_state_.mllog));
  if (rank0_) {
    const PeakFlops peak = DevicePeakFlops(plan_.device, plan_.precision);
    peak_flops_ = peak.flops * comm_.world_size();
    if (peak.flops > 0) {
      Log()->info("MFU is against {:.3g} TFLOP/s per device ({})", peak.flops / 1e12, peak.source);
    }
  }
  MetricsLogOptions metrics = plan_.metrics;
  metrics.dir = rank0_ ? dir : "";
  metrics.peak_flops = peak_flops_;
  ASSIGN_OR_RETURN(metrics_, MetricsLog::Open(metrics, log_state_.metrics));
  if (!plan_.mllog || (setup_.resume && mllog_->has_header())) return absl::OkStatus();
  return mllog_->Start(config_.mlperf, plan_.mllog_header, loop_.samples);
}

absl::Status Trainer::InitResume(const CheckpointInfo& checkpoint) {
  TrainerState state = checkpoint.trainer;
  const tasks::PackedSet& train = *task_.train();
  const std::string checksum = ChecksumText(train.rows->Checksum());
  if (state.loop.train_index_checksum != checksum) {
    return absl::InvalidArgumentError(absl::StrCat(
        checkpoint.dir, " was trained on other rows (pack index checksum ",
        state.loop.train_index_checksum, ", now ", checksum, "); resume with the same ", train.key,
        train.key == "data.store" ? ", data.pack_index and packing settings"
                                  : " and packing settings"));
  }
  std::string train_sets, eval_sets;
  const std::string train_data = DataChecksumText({&train}, &train_sets);
  const std::string eval_data = DataChecksumText(EvaluationSets(task_), &eval_sets);
  RETURN_IF_ERROR(CheckSameData(state.loop.train_data_checksum, train_data, checkpoint.dir,
                                train_sets, setup_.force));
  RETURN_IF_ERROR(CheckSameData(state.loop.eval_data_checksum, eval_data, checkpoint.dir, eval_sets,
                                setup_.force));
  state.loop.train_data_checksum = train_data;
  state.loop.eval_data_checksum = eval_data;
  if (!state.loop.status.empty()) {  // finished: nothing to load
    finished_ = std::make_unique<TrainerState>(std::move(state));
    return absl::OkStatus();
  }
  if (!setup_.force) RETURN_IF_ERROR(CheckSameBatch(checkpoint));
  RETURN_IF_ERROR(BuildModel());
  RETURN_IF_ERROR(LoadCheckpointWeights(checkpoint.dir, trainee_->weights(), trainee_->optimizer(),
                                        trainee_->device()));
  RETURN_IF_ERROR(trainee_->randomness().Restore(state.random));
  if (state.loop.world_size != comm_.world_size()) {
    Log()->warn("resuming a run of {} ranks on {}: the remaining rows are shared out anew",
                state.loop.world_size, comm_.world_size());
  }
  if (rank0_) log_source_ = LogSource(checkpoint.dir, config_.run.output_dir);
  RETURN_IF_ERROR(OpenParts(state));
  Log()->info(
      "resuming {} at step {} ({} sequences seen){}", checkpoint.dir, loop_.step, loop_.samples,
      log_source_.empty()
          ? ""
          : absl::StrCat(" into ", config_.run.output_dir, ", its logs so far carried over"));
  return absl::OkStatus();
}

// Fails if the rows of a step over all ranks would change (more or fewer
// ranks with the same rows each): the schedule and the optimizer were set
// for the checkpoint's. A checkpoint of version 2 counts them from its
// config, as pretraining set them.
absl::Status Trainer::CheckSameBatch(const CheckpointInfo& checkpoint) const {
  LoopState saved = checkpoint.trainer.loop;
  if (saved.rows_per_step == 0) {
    ExperimentConfig config;
    if (!config::LoadText(checkpoint.config_yaml, checkpoint.dir + "/config.yaml", &config).ok()) {
      return absl::OkStatus();  // FindResumePoint read it, and said so
    }
    auto adjusted = config.optim.AdjustedFor(task_.train()->packing_factor());
    if (!adjusted.ok()) return adjusted.status();
    saved.rows_per_batch = config.train.micro_batch_rows;
    saved.batches_per_step = adjusted->accumulation_steps;
    saved.rows_per_step = saved.rows_per_batch * saved.batches_per_step * saved.world_size;
  }
  if (saved.rows_per_step == plan_.rows_per_step) return absl::OkStatus();
  const int world = comm_.world_size();
  return absl::InvalidArgumentError(absl::StrCat(
      "resuming ", checkpoint.dir, " (", saved.world_size,
      saved.world_size == 1 ? " rank" : " ranks", " x ", saved.rows_per_batch, " rows x ",
      saved.batches_per_step, " micro-batches = ", saved.rows_per_step, " rows per step) on ",
      world, world == 1 ? " rank" : " ranks", " would train ", plan_.rows_per_step,
      " rows per step, for which its schedule and optimizer were not set; keep ",
      saved.rows_per_step, " (", plan_.batch_keys, "), or add --force"));
}

absl::StatusOr<TrainResult> Trainer::Train() {
  try {
    if (finished_) {
      RETURN_IF_ERROR(CompleteEnd());
      TrainResult r = Result(finished_->loop.status);
      r.already_finished = true;
      r.checkpoint = setup_.resume->dir;
      return r;
    }
    RETURN_IF_ERROR(OpenLogs());
    return Loop();
  } catch (const std::exception& e) {
    return Failed(e);
  }
}

// A finished run resumed: what its end had left to do when it stopped
// after its last checkpoint (killed, a full disk) is done now, from that
// checkpoint's weights: the export where RUN_DIR/model is missing, and the
// predictions, made again on every such resume (the file to predict may be
// a new one, --predict). So the command's exit 0 means every output exists.
absl::Status Trainer::CompleteEnd() {
  const std::filesystem::path run_dir(config_.run.output_dir);
  const std::string model_dir = (run_dir / "model").string();
  std::error_code error;
  bool export_missing = false;
  if (rank0_ && setup_.export_model) {
    RemoveStaleTemporaries(model_dir, ".tmp-");  // an export killed on its way
    export_missing = !std::filesystem::exists(model_dir, error);
    if (!export_missing) model_dir_ = model_dir;
  }
  // Every rank builds the model, or none: rank 0 says whether it must.
  export_missing = comm_.Sum({export_missing ? 1.0 : 0.0})[0] > 0;
  if (!export_missing && !evaluation_.predicts()) return absl::OkStatus();
  RETURN_IF_ERROR(BuildModel());
  RETURN_IF_ERROR(LoadCheckpointWeights(setup_.resume->dir, trainee_->weights(),
                                        trainee_->optimizer(), trainee_->device()));
  if (export_missing) {
    Log()->info("the run had stopped before its export: {} from {}", model_dir,
                setup_.resume->dir);
    RETURN_IF_ERROR(Export());
  }
  return Predict();
}

// Training stopped by an exception: the MLLOG says the run was aborted,
// and one line says why (out of memory, or a lost rank).
absl::Status Trainer::Failed(const std::exception& e) {
  if (mllog_) {
    (void)mllog_->RunStop("aborted", loop_.samples);
    (void)mllog_->Sync();
  }
  if (IsOutOfMemory(e)) return OutOfMemory(e);
  return LostContact(e);
}

// The config asks for more memory than the machine has.
absl::Status Trainer::OutOfMemory(const std::exception& e) const {
  const std::string limits = ExhaustedLimits(/*out_of_memory=*/true);
  return absl::InvalidArgumentError(absl::StrCat("step ", loop_.step + 1, " ran out of memory (",
                                                 FirstLine(e),
                                                 limits.empty() ? "" : absl::StrCat("; ", limits),
                                                 "); ", plan_.memory_advice));
}

// A collective failed: another rank died, stopped or hung past
// dist.timeout_s (c10d reports it by exception). Nothing more can be computed
// together; one line says so. With one process the exception is no
// collective's and goes on up.
absl::Status Trainer::LostContact(const std::exception& e) {
  if (comm_.world_size() <= 1) throw;
  const std::string what = FirstLine(e);
  const std::string& last = checkpointer_.last();
  return absl::UnavailableError(absl::StrCat(
      "rank ", comm_.rank(), " lost contact with the other ranks: ", comm_.DescribeLostRanks(),
      " (", what, "; a rank that stops, or does not answer within dist.timeout_s, ends the run); ",
      !rank0_ ? absl::StrCat("resume with ", setup_.resume_flag,
                             " from the run's newest checkpoint (rank 0 writes them)")
      : last.empty() ? "no checkpoint was written"
                     : absl::StrCat("resume from ", last, " (", setup_.resume_flag, ")")));
}

absl::StatusOr<TrainResult> Trainer::Loop() {
  Progress progress("train", static_cast<uint64_t>(stop_.total_steps()), "steps",
                    static_cast<uint64_t>(loop_.step));
  while (true) {
    if (stop_.Requested(comm_)) {
      RETURN_IF_ERROR(Save(SaveReason::kStop));
      progress.Finish();
      return Result("interrupted");
    }
    const auto start = Clock::now();
    RETURN_IF_ERROR(profiler_.Before(loop_.step + 1));
    ASSIGN_OR_RETURN(data::StepBatches batches, loader_->Next());
    const double lr = optim::LearningRate(plan_.optim.schedule, loop_.step);
    ASSIGN_OR_RETURN(StepResult step,
                     TrainStep(*trainee_, comm_, Prepared(batches), lr, plan_.step));
    loop_.step += 1;
    loop_.samples += static_cast<uint64_t>(step.metrics.sequences);
    loss_finite_ = std::isfinite(step.metrics.loss);
    FaultPoint("after-step", loop_.step, comm_.rank());
    if (absl::Status bad = stop_.Count(step, loop_.step, checkpointer_.last()); !bad.ok()) {
      return Abort(bad);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    RETURN_IF_ERROR(profiler_.After(loop_.step, seconds));
    RETURN_IF_ERROR(metrics_->AddStep(step, lr, seconds, Position()));
    ShowProgress(progress, step, lr, seconds);

    // An evaluation ends the current block; a new one starts if training
    // goes on. A run that ends between evaluations is evaluated at its end.
    const bool evaluated = evaluation_.Due(loop_.samples);
    if (evaluated) RETURN_IF_ERROR(EndBlock());
    if (stop_.AtEnd(loop_.step, loop_.samples, evaluation_.reached())) {
      if (!evaluated) RETURN_IF_ERROR(EndBlock());
      progress.Finish();
      return Finish();
    }
    if (evaluated) RETURN_IF_ERROR(mllog_->BlockStart(loop_.samples));
    if (checkpointer_.Due(loop_.step) || (evaluated && plan_.checkpoint.after_evaluation)) {
      RETURN_IF_ERROR(Save(SaveReason::kDue));
    }
  }
}

void Trainer::ShowProgress(Progress& progress, const StepResult& step, double lr, double seconds) {
  const StepMetrics& m = step.metrics;
  session_flops_ += m.flops;
  session_tokens_ += m.tokens;
  session_step_seconds_ += seconds;
  const double flops_per_s = m.flops / std::max(seconds, 1e-9);
  // The task's accuracies, as "mlm 41.2%" of "mlm_accuracy".
  std::string accuracies;
  for (const auto& [name, value] : task_.TrainMetrics(m.sums)) {
    if (!absl::EndsWith(name, "accuracy")) continue;
    const absl::string_view label = absl::StripSuffix(absl::StripSuffix(name, "accuracy"), "_");
    absl::StrAppendFormat(&accuracies, "%s %.1f%%  ", label.empty() ? "acc" : label, 100 * value);
  }
  progress.SetStatus(absl::StrFormat(
      "%s seq  loss %.3f  %slr %.2e  |g| %.2f  %.0f tok/s  pad %.1f%%  %.3g TFLOP/s%s",
      HumanCount(loop_.samples), m.loss, accuracies, lr, step.grad_norm,
      m.tokens / std::max(seconds, 1e-9), 100 * m.PaddingShare(plan_.metrics.max_len),
      flops_per_s / 1e12,
      peak_flops_ > 0 ? absl::StrFormat("  MFU %.1f%%", 100 * flops_per_s / peak_flops_) : ""));
  progress.Add(1);
}

absl::Status Trainer::EndBlock() {
  RETURN_IF_ERROR(metrics_->Flush(Position()));
  RETURN_IF_ERROR(mllog_->BlockStop(loop_.samples));
  return evaluation_.enabled() ? Evaluate() : absl::OkStatus();
}

absl::Status Trainer::Evaluate() {
  const auto start = Clock::now();
  RETURN_IF_ERROR(mllog_->EvalStart(loop_.samples));
  ASSIGN_OR_RETURN(tasks::Scored scored, evaluation_.Run(trainee_->model(), comm_, loop_.samples));
  RETURN_IF_ERROR(mllog_->EvalStop(loop_.samples, evaluation_.state().last_score));
  if (rank0_) {
    for (const auto& [name, text] : scored.files) {
      const std::string path = absl::StrCat(config_.run.output_dir, "/", name);
      RETURN_IF_ERROR(WriteFileAtomically(path, text));
      if (std::find(files_.begin(), files_.end(), path) == files_.end()) files_.push_back(path);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const EvaluationOptions& options = evaluation_.options();
  Log()->info("eval at {} sequences:{}{}, {} sequences in {:.1f} s", loop_.samples,
              MetricsText(scored.metrics),
              options.target_metric.empty()
                  ? ""
                  : absl::StrFormat(" (target %s %.4f)", options.target_metric, options.target),
              evaluation_.sequences(), seconds);
  const std::string score = options.target_metric.empty() && !scored.metrics.empty()
                                ? scored.metrics.front().first
                                : options.target_metric;
  return metrics_->AddEvaluation(scored.metrics, score, seconds, Position());
}

// `reason`: a save that is due, on a stop request, or the run's last save,
// whose state (its status) differs from an earlier save of the same step.
absl::Status Trainer::Save(SaveReason reason) {
  if (checkpointer_.Saved(loop_.step) && reason != SaveReason::kEnd) return absl::OkStatus();
  // Weights that give a non-finite loss, or hold inf or NaN themselves (a
  // learning rate far too high), are never saved: a due checkpoint is left
  // out (train.max_bad_steps decides whether the run goes on), a last one
  // ends the run.
  if (const std::string why = Diverged(); !why.empty()) {
    if (reason == SaveReason::kDue) {
      Log()->warn("checkpoint of step {} left out: {}", loop_.step, why);
      return absl::OkStatus();
    }
    const std::string& last = checkpointer_.last();
    (void)mllog_->RunStop("aborted", loop_.samples);
    return absl::InvalidArgumentError(absl::StrCat(
        "the weights diverged by step ", loop_.step, " (", why,
        "), so no checkpoint was written; lower optim.lr (now ", config_.optim.schedule.peak_lr,
        ")", last.empty() ? "" : absl::StrCat(" and resume from ", last, " with --force")));
  }
  loop_.train_seconds = Elapsed();
  session_start_ = Clock::now();
  RETURN_IF_ERROR(metrics_->Flush(Position()));
  RETURN_IF_ERROR(mllog_->Sync());
  RETURN_IF_ERROR(metrics_->Sync());
  return checkpointer_.Save(loop_.step, trainee_->weights(), trainee_->optimizer(),
                            ToJson(State()));
}

absl::StatusOr<TrainResult> Trainer::Finish() {
  if (const std::string unmet = profiler_.Unmet(loop_.step); !unmet.empty() && rank0_) {
    Log()->warn("{}", unmet);
  }
  loop_.status = plan_.evaluation.target_metric.empty() ? "done"
                 : evaluation_.reached()                ? "success"
                                                        : "aborted";
  RETURN_IF_ERROR(mllog_->RunStop(loop_.status, loop_.samples));
  RETURN_IF_ERROR(Save(SaveReason::kEnd));
  FaultPoint("run-end", loop_.step, comm_.rank());
  RETURN_IF_ERROR(Export());
  RETURN_IF_ERROR(Predict());
  return Result(loop_.status);
}

// The finished run's predictions of the files without labels, into
// RUN_DIR/predict, whole (rank 0 writes; every rank predicts its share).
absl::Status Trainer::Predict() {
  if (!evaluation_.predicts()) return absl::OkStatus();
  const auto start = Clock::now();
  ASSIGN_OR_RETURN(tasks::Scored predicted, evaluation_.Predict(trainee_->model(), comm_));
  if (!rank0_) return absl::OkStatus();
  predict_dir_ = (std::filesystem::path(config_.run.output_dir) / "predict").string();
  if (absl::Status written =
          WriteFolderAtomically(predict_dir_, predicted.files, Existing::kReplace);
      !written.ok()) {
    return absl::Status(
        written.code(),
        absl::StrCat(
            written.message(), "; the run is saved: predict with finetune --evaluate ",
            !model_dir_.empty() ? model_dir_ + "/model.safetensors"
            : checkpointer_.last().empty() && setup_.resume ? setup_.resume->dir
                                                            : checkpointer_.last()));
  }
  Log()->info("predicted{} into {} in {:.1f} s", MetricsText(predicted.counts), predict_dir_,
              std::chrono::duration<double>(Clock::now() - start).count());
  return absl::OkStatus();
}

// The finished run's model for Hugging Face, into RUN_DIR/model (rank 0).
absl::Status Trainer::Export() {
  if (!setup_.export_model || !rank0_) return absl::OkStatus();
  model_dir_ = (std::filesystem::path(config_.run.output_dir) / "model").string();
  return setup_.export_model(trainee_->weights(), task_.Export(), model_dir_);
}

// After too many bad steps: the MLLOG ends the run as aborted, and `why`
// says what to do.
absl::Status Trainer::Abort(const absl::Status& why) {
  RETURN_IF_ERROR(mllog_->BlockStop(loop_.samples));
  RETURN_IF_ERROR(mllog_->RunStop("aborted", loop_.samples));
  return why;
}

std::string Trainer::Diverged() {
  if (!loss_finite_) return absl::StrCat("the loss of step ", loop_.step, " is not finite");
  for (const auto& item : trainee_->weights().named_parameters()) {
    if (!item.value().isfinite().all().template item<bool>()) {
      return absl::StrCat(item.key(), " holds inf or NaN");
    }
  }
  return "";
}

TrainerState Trainer::State() {
  TrainerState s;
  s.loop = loop_;
  s.loader = loader_->position();
  s.random = trainee_->randomness().Save();
  if (const model::LossScaler* scaler = trainee_->scaler()) s.loss_scale = scaler->State();
  if (const model::Fp8Scaling* fp8 = trainee_->fp8()) s.fp8 = fp8->State();
  s.evaluation = evaluation_.state();
  s.stop = stop_.state();
  s.mllog = mllog_->State();
  s.metrics = metrics_->State();
  return s;
}

LoopPosition Trainer::Position() const {
  return {loop_.step, loop_.samples, Elapsed(), stop_.state().skipped_steps};
}

double Trainer::Elapsed() const {
  return loop_.train_seconds + std::chrono::duration<double>(Clock::now() - session_start_).count();
}

TrainResult Trainer::Result(const std::string& status) const {
  const bool done = finished_ != nullptr;
  const LoopState& loop = done ? finished_->loop : loop_;
  const EvaluationState& eval = done ? finished_->evaluation : evaluation_.state();
  TrainResult r;
  r.status = status;
  r.step = loop.step;
  r.total_steps = plan_.stop.total_steps;
  r.samples = loop.samples;
  r.samples_to_target = eval.samples_to_target;
  r.metrics = eval.metrics;
  r.last_score = eval.last_score;
  r.best_score = eval.best_score;
  r.evaluations = eval.evaluations;
  r.skipped_steps = done ? finished_->stop.skipped_steps : stop_.state().skipped_steps;
  r.train_sequences = task_.train()->rows->sequences();
  r.train_rows = task_.train()->rows->rows();
  r.packing_factor = task_.train()->packing_factor();
  r.train_seconds = done ? loop.train_seconds : Elapsed();
  r.run_seconds = done ? finished_->mllog.run_seconds : mllog_->run_seconds();
  r.checkpoint = checkpointer_.last();
  r.files = files_;
  r.model_dir = model_dir_;
  r.predict_dir = predict_dir_;
  r.session_flops = session_flops_;
  r.session_tokens = session_tokens_;
  r.session_step_seconds = session_step_seconds_;
  r.peak_flops = peak_flops_;
  return r;
}

}  // namespace pbert::train
