#include "train/trainer.h"

#include <ATen/Context.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "common/progress.h"
#include "common/platform.h"
#include "common/status.h"
#include "model/weights.h"
#include "train/fault.h"
#include "train/inputs.h"
#include "train/peak_flops.h"

namespace pbert::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string ChecksumText(uint64_t checksum) { return absl::StrFormat("%016x", checksum); }

// A source's content checksum as saved in the loop's state; "" unknown.
std::string DataChecksumText(const data::SequenceSource* source) {
  if (source == nullptr || source->content_checksum() == 0) return "";
  return ChecksumText(source->content_checksum());
}

// Fails if `key`'s data is not the data `checkpoint` was trained with: the
// same lengths (so the same pack index) prepared again from other text, or
// with another vocabulary, is other data.
absl::Status CheckSameData(const std::string& saved, const std::string& now,
                           const std::string& checkpoint, const char* key,
                           const std::string& path) {
  if (saved.empty() || now.empty() || saved == now) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(checkpoint, " was trained with other data at ", key, " ", path,
                   ": its records or vocabulary differ (data checksum ", saved, ", now ", now,
                   "; prepared again?); resume with the data it was trained with"));
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

}  // namespace

Trainer::Trainer(const TrainerSetup& setup)
    : setup_(setup),
      config_(setup.config),
      plan_(setup.plan),
      comm_(setup.communicator),
      rank0_(setup.communicator.rank() == 0),
      evaluation_(setup.data.eval ? std::make_unique<Evaluator>(
                                        setup.data.eval, setup.data.eval_rows, setup.plan.loader,
                                        setup.plan.precision, setup.plan.device)
                                  : nullptr,
                  setup.plan.evaluation),
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

// The parts that keep state across a resume, from `state`. The logs are
// opened by `OpenLogs`, when training starts: a run refused while it is
// created writes nothing.
absl::Status Trainer::OpenParts(const TrainerState& state) {
  log_state_ = {state.mllog, state.metrics};
  // The loader's threads make each micro-batch the model's inputs on the
  // device (train/inputs.h).
  data::LoaderOptions loader = plan_.loader;
  loader.prepare = Preparer(trainee_->input_plan());
  ASSIGN_OR_RETURN(loader_,
                   data::Loader::Create(setup_.data.train, setup_.data.rows, loader, state.loader));
  evaluation_.Restore(state.evaluation);
  stop_.Restore(state.stop);
  if (model::LossScaler* scaler = trainee_->scaler()) scaler->Restore(state.loss_scale);
  RETURN_IF_ERROR(trainee_->RestoreFp8(state.fp8));
  loop_ = state.loop;
  loop_.world_size = comm_.world_size();
  // One seed gives every rank the same weights; rank 0's are sent anyway,
  // so that nothing else (an init checkpoint read differently) can differ.
  comm_.Broadcast(trainee_->weights()->parameters());
  trainee_->SyncModelWeights();
  return absl::OkStatus();
}

absl::Status Trainer::InitNew() {
  RETURN_IF_ERROR(BuildModel());
  if (!config_.train.init_checkpoint.empty()) {
    RETURN_IF_ERROR(Annotate(
        model::LoadWeights(*trainee_->weights(), config_.train.init_checkpoint),
        "train.init_checkpoint"));
  }
  TrainerState state;
  state.evaluation.next_samples = static_cast<uint64_t>(plan_.eval_every_samples);
  state.loop.train_index_checksum = ChecksumText(setup_.data.rows->Checksum());
  state.loop.train_data_checksum = DataChecksumText(setup_.data.train.get());
  state.loop.eval_data_checksum = DataChecksumText(setup_.data.eval.get());
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
  ASSIGN_OR_RETURN(mllog_, MlperfLog::Open(rank0_ ? dir + "/mllog.txt" : "", log_state_.mllog));
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
  if (setup_.resume && mllog_->has_header()) return absl::OkStatus();
  return mllog_->Start(config_.mlperf, plan_.mllog_header, loop_.samples);
}

absl::Status Trainer::InitResume(const CheckpointInfo& checkpoint) {
  TrainerState state = checkpoint.trainer;
  const std::string checksum = ChecksumText(setup_.data.rows->Checksum());
  if (state.loop.train_index_checksum != checksum) {
    return absl::InvalidArgumentError(absl::StrCat(
        checkpoint.dir, " was trained on other rows (pack index checksum ",
        state.loop.train_index_checksum, ", now ", checksum,
        "); resume with the same data.store, data.pack_index and packing settings"));
  }
  const std::string train_data = DataChecksumText(setup_.data.train.get());
  const std::string eval_data = DataChecksumText(setup_.data.eval.get());
  RETURN_IF_ERROR(CheckSameData(state.loop.train_data_checksum, train_data, checkpoint.dir,
                                "data.store", config_.data.store));
  RETURN_IF_ERROR(CheckSameData(state.loop.eval_data_checksum, eval_data, checkpoint.dir,
                                "data.eval", config_.data.eval));
  state.loop.train_data_checksum = train_data;
  state.loop.eval_data_checksum = eval_data;
  if (!state.loop.status.empty()) {  // finished: nothing to load
    finished_ = std::make_unique<TrainerState>(std::move(state));
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(BuildModel());
  RETURN_IF_ERROR(
      LoadCheckpointWeights(checkpoint.dir, *trainee_->weights(), trainee_->optimizer(),
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

absl::StatusOr<TrainResult> Trainer::Train() {
  if (finished_) {
    TrainResult r = Result(finished_->loop.status);
    r.already_finished = true;
    r.checkpoint = setup_.resume->dir;
    return r;
  }
  try {
    RETURN_IF_ERROR(OpenLogs());
    return Loop();
  } catch (const std::exception& e) {
    return Failed(e);
  }
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
  return absl::InvalidArgumentError(
      absl::StrCat("step ", loop_.step + 1, " ran out of memory (", FirstLine(e),
                   limits.empty() ? "" : absl::StrCat("; ", limits),
                   "); lower train.micro_batch_rows (now ", config_.train.micro_batch_rows,
                   ") and raise optim.accumulation_steps to keep the batch"));
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
      !rank0_ ? "resume with --resume auto from the run's newest checkpoint (rank 0 writes them)"
      : last.empty() ? "no checkpoint was written"
                     : absl::StrCat("resume from ", last, " (--resume auto)")));
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
    loop_.samples += static_cast<uint64_t>(step.metrics.nsp_sequences);
    loss_finite_ = std::isfinite(step.metrics.loss);
    FaultPoint("after-step", loop_.step, comm_.rank());
    if (absl::Status bad = stop_.Count(step, loop_.step, checkpointer_.last()); !bad.ok()) {
      return Abort(bad);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    RETURN_IF_ERROR(profiler_.After(loop_.step, seconds));
    RETURN_IF_ERROR(metrics_->AddStep(step, lr, seconds, Position()));
    const PretrainingMetrics& m = step.metrics;
    session_flops_ += m.flops;
    session_step_seconds_ += seconds;
    const double flops_per_s = m.flops / std::max(seconds, 1e-9);
    progress.SetStatus(absl::StrFormat(
        "%s seq  loss %.3f  mlm %.1f%%  nsp %.1f%%  lr %.2e  |g| %.2f  %.0f tok/s  pad %.1f%%  "
        "%.3g TFLOP/s%s",
        HumanCount(loop_.samples), m.loss, 100 * m.MlmAccuracy(), 100 * m.NspAccuracy(), lr,
        step.grad_norm, m.tokens / std::max(seconds, 1e-9),
        100 * m.PaddingShare(static_cast<int>(config_.data.max_seq_len)), flops_per_s / 1e12,
        peak_flops_ > 0 ? absl::StrFormat("  MFU %.1f%%", 100 * flops_per_s / peak_flops_)
                        : ""));
    progress.Add(1);

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
    if (checkpointer_.Due(loop_.step)) RETURN_IF_ERROR(Save(SaveReason::kDue));
  }
}

absl::Status Trainer::EndBlock() {
  RETURN_IF_ERROR(metrics_->Flush(Position()));
  RETURN_IF_ERROR(mllog_->BlockStop(loop_.samples));
  return evaluation_.enabled() ? Evaluate() : absl::OkStatus();
}

absl::Status Trainer::Evaluate() {
  const auto start = Clock::now();
  RETURN_IF_ERROR(mllog_->EvalStart(loop_.samples));
  ASSIGN_OR_RETURN(PretrainingMetrics eval,
                   evaluation_.Run(trainee_->model(), comm_, loop_.samples));
  RETURN_IF_ERROR(mllog_->EvalStop(loop_.samples, eval.MlmAccuracy()));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  Log()->info(
      "eval at {} sequences: MLM accuracy {:.4f} (target {:.4f}), MLM loss {:.4f}, NSP accuracy "
      "{:.4f}, {} sequences in {:.1f} s",
      loop_.samples, eval.MlmAccuracy(), evaluation_.target(), eval.MlmLossPerToken(),
      eval.NspAccuracy(), static_cast<uint64_t>(eval.nsp_sequences), seconds);
  return metrics_->AddEvaluation(eval, seconds, Position());
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
  return checkpointer_.Save(loop_.step, *trainee_->weights(), trainee_->optimizer(),
                            ToJson(State()));
}

absl::StatusOr<TrainResult> Trainer::Finish() {
  if (const std::string unmet = profiler_.Unmet(loop_.step); !unmet.empty() && rank0_) {
    Log()->warn("{}", unmet);
  }
  loop_.status = evaluation_.reached() ? "success" : "aborted";
  RETURN_IF_ERROR(mllog_->RunStop(loop_.status, loop_.samples));
  RETURN_IF_ERROR(Save(SaveReason::kEnd));
  return Result(loop_.status);
}

// After too many bad steps: the MLLOG ends the run as aborted, and `why`
// says what to do.
absl::Status Trainer::Abort(const absl::Status& why) {
  RETURN_IF_ERROR(mllog_->BlockStop(loop_.samples));
  RETURN_IF_ERROR(mllog_->RunStop("aborted", loop_.samples));
  return why;
}

std::string Trainer::Diverged() const {
  if (!loss_finite_) return absl::StrCat("the loss of step ", loop_.step, " is not finite");
  for (const auto& item : trainee_->weights()->named_parameters()) {
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
  r.samples = loop.samples;
  r.samples_to_target = eval.samples_to_target;
  r.mlm_accuracy = eval.last_mlm_accuracy;
  r.best_mlm_accuracy = eval.best_mlm_accuracy;
  r.evaluations = eval.evaluations;
  r.skipped_steps = done ? finished_->stop.skipped_steps : stop_.state().skipped_steps;
  r.train_seconds = done ? loop.train_seconds : Elapsed();
  r.run_seconds = done ? finished_->mllog.run_seconds : mllog_->run_seconds();
  r.checkpoint = checkpointer_.last();
  r.session_flops = session_flops_;
  r.session_step_seconds = session_step_seconds_;
  r.peak_flops = peak_flops_;
  return r;
}

}  // namespace pbert::train
