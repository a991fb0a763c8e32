#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/append_log.h"
#include "common/logging.h"
#include "common/progress.h"
#include "common/status.h"
#include "model/weights.h"
#include "train/checkpointer.h"
#include "train/evaluator.h"
#include "train/fault.h"
#include "train/mllog.h"

namespace pbert::train {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr int kStateVersion = 1;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The default CPU generator (dropout) as bytes, and back.
std::string CpuRngState() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  at::Tensor state = generator.get_state();
  return absl::BytesToHexString(
      absl::string_view(static_cast<const char*>(state.data_ptr()), state.numel()));
}

absl::Status RestoreCpuRng(const std::string& hex) {
  // absl::HexStringToBytes changed its signature after Debian 12's Abseil.
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    int byte = 0;
    if (!absl::SimpleHexAtoi(hex.substr(i, 2), &byte)) {
      return absl::DataLossError("the checkpoint's random generator state is not hexadecimal");
    }
    bytes.push_back(static_cast<char>(byte));
  }
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  at::Tensor current = generator.get_state();
  if (static_cast<int64_t>(bytes.size()) != current.numel()) {
    return absl::DataLossError("the checkpoint's random generator state has the wrong size");
  }
  at::Tensor state = at::empty({current.numel()}, at::kByte);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  generator.set_state(state);
  return absl::OkStatus();
}

// Everything the loop depends on, saved and loaded whole.
struct TrainerState {
  int64_t step = 0;
  uint64_t samples = 0;      // sequences trained on, all ranks
  uint64_t loader_rows = 0;  // the loader's position
  uint64_t next_eval_samples = 0;
  int64_t evaluations = 0;
  double last_mlm_accuracy = 0;
  double best_mlm_accuracy = 0;
  uint64_t samples_to_target = 0;
  int64_t bad_steps_in_row = 0;
  int64_t skipped_steps = 0;
  double train_seconds = 0;
  uint64_t block_start_samples = 0;
  int64_t run_start_ms = 0;
  double run_seconds = 0;  // MLLOG run_start to run_stop, once stopped
  uint64_t mllog_bytes = 0;
  uint64_t metrics_bytes = 0;
  std::string cpu_rng;
  double loss_scale = 0;
  int loss_scale_good_steps = 0;
  int world_size = 1;
  std::string train_index_checksum;
  std::string status;  // "" while running; "success" or "aborted" once finished

  json ToJson() const {
    return json{{"version", kStateVersion},
                {"step", step},
                {"samples", samples},
                {"loader_rows", loader_rows},
                {"next_eval_samples", next_eval_samples},
                {"evaluations", evaluations},
                {"last_mlm_accuracy", last_mlm_accuracy},
                {"best_mlm_accuracy", best_mlm_accuracy},
                {"samples_to_target", samples_to_target},
                {"bad_steps_in_row", bad_steps_in_row},
                {"skipped_steps", skipped_steps},
                {"train_seconds", train_seconds},
                {"block_start_samples", block_start_samples},
                {"run_start_ms", run_start_ms},
                {"run_seconds", run_seconds},
                {"mllog_bytes", mllog_bytes},
                {"metrics_bytes", metrics_bytes},
                {"cpu_rng", cpu_rng},
                {"loss_scale", loss_scale},
                {"loss_scale_good_steps", loss_scale_good_steps},
                {"world_size", world_size},
                {"train_index_checksum", train_index_checksum},
                {"status", status}};
  }

  static absl::StatusOr<TrainerState> FromJson(const json& j, const std::string& where) {
    TrainerState s;
    try {
      if (j.at("version").get<int>() != kStateVersion) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, ": trainer state version ", j.at("version").get<int>(),
                         ", this build reads ", kStateVersion));
      }
      s.step = j.at("step").get<int64_t>();
      s.samples = j.at("samples").get<uint64_t>();
      s.loader_rows = j.at("loader_rows").get<uint64_t>();
      s.next_eval_samples = j.at("next_eval_samples").get<uint64_t>();
      s.evaluations = j.at("evaluations").get<int64_t>();
      s.last_mlm_accuracy = j.at("last_mlm_accuracy").get<double>();
      s.best_mlm_accuracy = j.at("best_mlm_accuracy").get<double>();
      s.samples_to_target = j.at("samples_to_target").get<uint64_t>();
      s.bad_steps_in_row = j.at("bad_steps_in_row").get<int64_t>();
      s.skipped_steps = j.at("skipped_steps").get<int64_t>();
      s.train_seconds = j.at("train_seconds").get<double>();
      s.block_start_samples = j.at("block_start_samples").get<uint64_t>();
      s.run_start_ms = j.at("run_start_ms").get<int64_t>();
      s.run_seconds = j.at("run_seconds").get<double>();
      s.mllog_bytes = j.at("mllog_bytes").get<uint64_t>();
      s.metrics_bytes = j.at("metrics_bytes").get<uint64_t>();
      s.cpu_rng = j.at("cpu_rng").get<std::string>();
      s.loss_scale = j.at("loss_scale").get<double>();
      s.loss_scale_good_steps = j.at("loss_scale_good_steps").get<int>();
      s.world_size = j.at("world_size").get<int>();
      s.train_index_checksum = j.at("train_index_checksum").get<std::string>();
      s.status = j.at("status").get<std::string>();
    } catch (const json::exception& e) {
      return absl::DataLossError(absl::StrCat(where, ": malformed trainer state (", e.what(), ")"));
    }
    return s;
  }
};

std::string ChecksumText(uint64_t checksum) { return absl::StrFormat("%016x", checksum); }

class Loop {
 public:
  explicit Loop(const TrainerOptions& o)
      : o_(o),
        comm_(*o.communicator),
        log_(logging::Get("train")),
        rank0_(o.communicator->rank() == 0) {}

  absl::StatusOr<TrainResult> Run();

  // After a failure that leaves the run unable to go on (a lost rank): the
  // MLLOG ends with run_stop status aborted, if it was started. Returns
  // where the run can resume from ("" if nowhere).
  std::string Abort() {
    if (mllog_ && state_.run_start_ms > 0) {
      (void)mllog_->End("run_stop", nullptr, {{"status", "aborted"}, {"epoch_num", state_.samples}});
      (void)mllog_->Sync();
    }
    return last_checkpoint_;
  }

 private:
  absl::Status Init();
  absl::Status WriteHeader();
  absl::Status Evaluate();
  absl::Status SaveCheckpoint();
  absl::Status Stop(const std::string& status);
  absl::Status LogInterval();
  TrainResult Result(const std::string& status) const;
  double Elapsed() const {
    return state_.train_seconds +
           std::chrono::duration<double>(Clock::now() - session_start_).count();
  }

  const TrainerOptions& o_;
  distributed::Communicator& comm_;
  std::shared_ptr<spdlog::logger> log_;
  const bool rank0_;
  model::BertForPreTraining model_{nullptr};
  std::unique_ptr<optim::Lamb> optimizer_;
  std::unique_ptr<model::LossScaler> scaler_;
  std::unique_ptr<data::Loader> loader_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<MlLog> mllog_;
  std::unique_ptr<AppendLog> metrics_;
  TrainerState state_;
  std::string last_checkpoint_;
  int64_t checkpointed_step_ = -1;
  Clock::time_point session_start_ = Clock::now();

  // The current logging interval.
  PretrainingMetrics interval_;
  int64_t interval_steps_ = 0;
  double interval_seconds_ = 0;
  double last_lr_ = 0, last_grad_norm_ = 0;
};

absl::Status Loop::Init() {
  if (o_.resume.empty() && rank0_) {
    // A new run never appends to, or overwrites, an earlier run's records.
    for (const char* name : {"mllog.txt", "metrics.jsonl"}) {
      if (std::filesystem::exists(o_.run_dir + "/" + name)) {
        return absl::AlreadyExistsError(absl::StrCat(
            o_.run_dir, " holds an earlier run (", name, "); continue it with --resume auto, ",
            "or choose another run.output_dir"));
      }
    }
  }
  std::error_code error;
  std::filesystem::create_directories(o_.run_dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", o_.run_dir, ": ", error.message()));
  }

  torch::manual_seed(o_.seed);
  model_ = model::BertForPreTraining(o_.model);
  if (!o_.init_checkpoint.empty() && o_.resume.empty()) {
    RETURN_IF_ERROR(Annotate(model::LoadWeights(*model_, o_.init_checkpoint),
                             "train.init_checkpoint"));
  }
  optimizer_ = std::make_unique<optim::Lamb>(
      optim::BertParamGroups(model_->named_parameters(), o_.lamb, o_.exclude_from_trust_ratio),
      o_.lamb);
  if (o_.step.precision == model::Precision::kFp16) scaler_ = std::make_unique<model::LossScaler>();

  const std::string train_checksum = ChecksumText(o_.train_index->Checksum());
  if (!o_.resume.empty()) {
    ASSIGN_OR_RETURN(CheckpointInfo info, ReadCheckpointInfo(o_.resume));
    ASSIGN_OR_RETURN(state_, TrainerState::FromJson(info.state, o_.resume + "/trainer_state.json"));
    if (state_.train_index_checksum != train_checksum) {
      return absl::InvalidArgumentError(absl::StrCat(
          o_.resume, " was trained on other rows (pack index checksum ", state_.train_index_checksum,
          ", now ", train_checksum, "); resume with the same data.store, data.pack_index and ",
          "packing settings"));
    }
    if (!state_.status.empty()) return absl::OkStatus();  // finished: nothing to load
    RETURN_IF_ERROR(LoadCheckpointWeights(o_.resume, *model_, *optimizer_));
    RETURN_IF_ERROR(RestoreCpuRng(state_.cpu_rng));
    if (scaler_) scaler_->Restore(state_.loss_scale, state_.loss_scale_good_steps);
    if (state_.world_size != comm_.world_size()) {
      log_->warn("resuming a run of {} ranks on {}: the remaining rows are shared out anew",
                 state_.world_size, comm_.world_size());
    }
  } else {
    state_.next_eval_samples = static_cast<uint64_t>(o_.eval_every_samples);
    state_.train_index_checksum = train_checksum;
  }
  state_.world_size = comm_.world_size();
  // One seed gives every rank the same weights; rank 0's are sent anyway,
  // so that nothing else (an init checkpoint read differently) can differ.
  comm_.Broadcast(model_->parameters());

  if (rank0_) {
    ASSIGN_OR_RETURN(auto mllog_file, AppendLog::Open(o_.run_dir + "/mllog.txt", state_.mllog_bytes));
    mllog_ = std::make_unique<MlLog>(std::move(mllog_file));
    ASSIGN_OR_RETURN(metrics_, AppendLog::Open(o_.run_dir + "/metrics.jsonl", state_.metrics_bytes));
  } else {
    mllog_ = std::make_unique<MlLog>(nullptr);
  }

  data::LoaderOptions loader = o_.loader;
  loader.seed = o_.seed;
  loader.shuffle = true;
  loader.single_pass = false;
  ASSIGN_OR_RETURN(loader_, data::Loader::Create(o_.train_source, o_.train_index, loader,
                                                 {state_.loader_rows}));
  if (o_.eval_source) {
    data::LoaderOptions eval = o_.loader;
    evaluator_ = std::make_unique<Evaluator>(o_.eval_source, o_.eval_index, eval, o_.step.precision);
  }
  return absl::OkStatus();
}

absl::Status Loop::WriteHeader() {
  MlLog& m = *mllog_;
  const double rows_per_step = static_cast<double>(loader_->RowsPerStep());
  const double packing_factor = static_cast<double>(o_.train_index->sequences()) /
                                static_cast<double>(o_.train_index->rows());
  auto [beta1, beta2] = o_.lamb.betas();
  RETURN_IF_ERROR(m.Event("cache_clear", true));
  RETURN_IF_ERROR(m.Start("init_start"));
  RETURN_IF_ERROR(m.Event("submission_benchmark", "bert"));
  RETURN_IF_ERROR(m.Event("submission_division", o_.mlperf.division));
  RETURN_IF_ERROR(m.Event("submission_org", o_.mlperf.org));
  RETURN_IF_ERROR(m.Event("submission_platform", o_.mlperf.platform));
  RETURN_IF_ERROR(m.Event("submission_status", o_.mlperf.status));
  RETURN_IF_ERROR(m.Event("seed", o_.seed));
  // Sequences per step: rows per step times the packing factor, as packed
  // MLPerf submissions count it.
  RETURN_IF_ERROR(m.Event("global_batch_size", std::llround(rows_per_step * packing_factor)));
  RETURN_IF_ERROR(m.Event("gradient_accumulation_steps", o_.loader.batches_per_step));
  RETURN_IF_ERROR(m.Event("opt_base_learning_rate", o_.schedule.peak_lr));
  RETURN_IF_ERROR(m.Event("opt_lamb_epsilon", o_.lamb.eps()));
  RETURN_IF_ERROR(m.Event("opt_epsilon", o_.lamb.eps()));
  RETURN_IF_ERROR(m.Event("opt_learning_rate_training_steps", o_.schedule.total_steps));
  RETURN_IF_ERROR(m.Event("opt_learning_rate_warmup_steps", o_.schedule.warmup_steps));
  RETURN_IF_ERROR(m.Event("num_warmup_steps", o_.schedule.warmup_steps));
  RETURN_IF_ERROR(m.Event("start_warmup_step", o_.schedule.start_warmup_step));
  RETURN_IF_ERROR(m.Event("opt_lamb_beta_1", beta1));
  RETURN_IF_ERROR(m.Event("opt_lamb_beta_2", beta2));
  RETURN_IF_ERROR(m.Event("opt_lamb_weight_decay_rate", o_.lamb.weight_decay()));
  RETURN_IF_ERROR(m.Event("opt_lamb_learning_rate_decay_poly_power", o_.schedule.power));
  RETURN_IF_ERROR(m.Event("max_sequence_length", o_.loader.shape.max_len));
  RETURN_IF_ERROR(m.Event("train_samples", o_.train_index->sequences()));
  RETURN_IF_ERROR(m.Event("eval_samples", evaluator_ ? evaluator_->sequences() : 0));
  RETURN_IF_ERROR(m.End("init_stop"));
  state_.run_start_ms = NowMs();
  RETURN_IF_ERROR(m.Start("run_start"));
  return m.Start("block_start", nullptr, {{"samples_count", 0}});
}

absl::Status Loop::Evaluate() {
  auto start = Clock::now();
  RETURN_IF_ERROR(mllog_->Start("eval_start", nullptr, {{"samples_count", state_.samples}}));
  ASSIGN_OR_RETURN(PretrainingMetrics eval, evaluator_->Run(model_, comm_));
  const double accuracy = eval.MlmAccuracy();
  RETURN_IF_ERROR(mllog_->Event("eval_accuracy", accuracy, {{"epoch_num", state_.samples}}));
  RETURN_IF_ERROR(mllog_->End("eval_stop", nullptr, {{"samples_count", state_.samples}}));
  state_.evaluations += 1;
  state_.last_mlm_accuracy = accuracy;
  state_.best_mlm_accuracy = std::max(state_.best_mlm_accuracy, accuracy);
  if (accuracy >= o_.target_mlm_accuracy && state_.samples_to_target == 0) {
    state_.samples_to_target = state_.samples;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  log_->info("eval at {} sequences: MLM accuracy {:.4f} (target {:.4f}), MLM loss {:.4f}, NSP "
             "accuracy {:.4f}, {} sequences in {:.1f} s",
             state_.samples, accuracy, o_.target_mlm_accuracy, eval.MlmLossPerToken(),
             eval.NspAccuracy(), static_cast<uint64_t>(eval.nsp_sequences), seconds);
  if (metrics_) {
    json line = {{"kind", "eval"},
                 {"step", state_.step},
                 {"samples", state_.samples},
                 {"time", Elapsed()},
                 {"mlm_accuracy", accuracy},
                 {"mlm_loss", eval.MlmLossPerToken()},
                 {"nsp_accuracy", eval.NspAccuracy()},
                 {"nsp_loss", eval.NspLoss()},
                 {"seconds", seconds}};
    RETURN_IF_ERROR(metrics_->Append(line.dump()));
  }
  while (state_.next_eval_samples <= state_.samples) {
    state_.next_eval_samples += static_cast<uint64_t>(o_.eval_every_samples);
  }
  return absl::OkStatus();
}

absl::Status Loop::LogInterval() {
  if (interval_steps_ == 0) return absl::OkStatus();
  const PretrainingMetrics& m = interval_;
  const double seconds = std::max(interval_seconds_, 1e-9);
  if (metrics_) {
    json line = {{"kind", "train"},
                 {"step", state_.step},
                 {"samples", state_.samples},
                 {"time", Elapsed()},
                 {"loss", m.loss / static_cast<double>(interval_steps_)},
                 {"mlm_loss", m.MlmLossPerToken()},
                 {"mlm_accuracy", m.MlmAccuracy()},
                 {"nsp_loss", m.NspLoss()},
                 {"nsp_accuracy", m.NspAccuracy()},
                 {"lr", last_lr_},
                 {"grad_norm", last_grad_norm_},
                 {"tokens_per_s", m.tokens / seconds},
                 {"sequences_per_s", m.nsp_sequences / seconds},
                 {"padding", m.PaddingShare(o_.loader.shape.max_len)},
                 {"skipped_steps", state_.skipped_steps}};
    RETURN_IF_ERROR(metrics_->Append(line.dump()));
  }
  interval_ = PretrainingMetrics();
  interval_steps_ = 0;
  interval_seconds_ = 0;
  return absl::OkStatus();
}

absl::Status Loop::SaveCheckpoint() {
  if (checkpointed_step_ == state_.step) return absl::OkStatus();
  state_.loader_rows = loader_->position().rows;
  state_.train_seconds = Elapsed();
  session_start_ = Clock::now();
  state_.cpu_rng = CpuRngState();
  if (scaler_) {
    state_.loss_scale = scaler_->scale();
    state_.loss_scale_good_steps = scaler_->good_steps();
  }
  if (rank0_) {
    RETURN_IF_ERROR(LogInterval());
    RETURN_IF_ERROR(mllog_->Sync());
    RETURN_IF_ERROR(metrics_->Sync());
    state_.mllog_bytes = mllog_->bytes();
    state_.metrics_bytes = metrics_->bytes();
    ASSIGN_OR_RETURN(last_checkpoint_,
                     train::SaveCheckpoint(o_.run_dir, state_.step, *model_, *optimizer_,
                                           state_.ToJson(), o_.config_yaml, o_.keep_checkpoints));
    log_->info("checkpoint {} (step {}, {} sequences)", last_checkpoint_, state_.step,
               state_.samples);
  }
  // No rank runs ahead of a checkpoint that is not yet complete.
  comm_.Barrier();
  checkpointed_step_ = state_.step;
  return absl::OkStatus();
}

absl::Status Loop::Stop(const std::string& status) {
  state_.status = status;
  state_.run_seconds = static_cast<double>(NowMs() - state_.run_start_ms) / 1000.0;
  RETURN_IF_ERROR(mllog_->End("run_stop", nullptr, {{"status", status}, {"epoch_num", state_.samples}}));
  checkpointed_step_ = -1;  // the final state differs from an earlier save of this step
  return SaveCheckpoint();
}

TrainResult Loop::Result(const std::string& status) const {
  TrainResult r;
  r.status = status;
  r.step = state_.step;
  r.samples = state_.samples;
  r.samples_to_target = state_.samples_to_target;
  r.mlm_accuracy = state_.last_mlm_accuracy;
  r.best_mlm_accuracy = state_.best_mlm_accuracy;
  r.evaluations = state_.evaluations;
  r.skipped_steps = state_.skipped_steps;
  r.train_seconds = state_.train_seconds;
  r.run_seconds = state_.run_seconds;
  r.checkpoint = last_checkpoint_;
  return r;
}

absl::StatusOr<TrainResult> Loop::Run() {
  RETURN_IF_ERROR(Init());
  if (!state_.status.empty()) {
    TrainResult r = Result(state_.status);
    r.already_finished = true;
    r.checkpoint = o_.resume;
    return r;
  }
  if (o_.resume.empty()) {
    RETURN_IF_ERROR(WriteHeader());
  } else {
    log_->info("resuming {} at step {} ({} sequences seen)", o_.resume, state_.step, state_.samples);
  }
  Progress progress("train", static_cast<uint64_t>(o_.total_steps), "steps",
                    static_cast<uint64_t>(state_.step));
  const int max_len = o_.loader.shape.max_len;
  while (true) {
    // A stop request reaches the ranks at different moments: they agree on
    // it before each step, so that all stop after the same one.
    bool stop = o_.stop_requested && o_.stop_requested();
    if (comm_.world_size() > 1) stop = comm_.Sum({stop ? 1.0 : 0.0})[0] > 0;
    if (stop) {
      RETURN_IF_ERROR(SaveCheckpoint());
      progress.Finish();
      state_.train_seconds = Elapsed();
      return Result("interrupted");
    }
    auto step_start = Clock::now();
    ASSIGN_OR_RETURN(data::StepBatches batches, loader_->Next());
    const double lr = optim::LearningRate(o_.schedule, state_.step);
    ASSIGN_OR_RETURN(StepResult result, TrainStep(model_, *optimizer_, comm_, batches.batches, lr,
                                                  o_.step, scaler_.get()));
    state_.step += 1;
    state_.samples += static_cast<uint64_t>(result.metrics.nsp_sequences);
    FaultPoint("after-step", state_.step, comm_.rank());
    if (result.applied) {
      state_.bad_steps_in_row = 0;
    } else {
      state_.bad_steps_in_row += 1;
      state_.skipped_steps += 1;
      log_->warn("step {} skipped: loss {} and gradient norm {} are not both finite ({} in a row)",
                 state_.step, result.metrics.loss, result.grad_norm, state_.bad_steps_in_row);
      if (state_.bad_steps_in_row >= o_.max_bad_steps) {
        RETURN_IF_ERROR(mllog_->End("block_stop", nullptr, {{"samples_count", state_.samples}}));
        RETURN_IF_ERROR(mllog_->End("run_stop", nullptr,
                                    {{"status", "aborted"}, {"epoch_num", state_.samples}}));
        return absl::FailedPreconditionError(absl::StrCat(
            o_.max_bad_steps, " steps in a row had a non-finite loss or gradient (train.max_bad_steps); ",
            last_checkpoint_.empty() ? "no checkpoint was written"
                                     : absl::StrCat("the last good checkpoint is ", last_checkpoint_),
            "; lower optim.lr or check the data"));
      }
    }
    const double step_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
    interval_.Add(result.metrics);
    interval_steps_ += 1;
    interval_seconds_ += step_seconds;
    last_lr_ = lr;
    last_grad_norm_ = result.grad_norm;
    const PretrainingMetrics& m = result.metrics;
    progress.SetStatus(absl::StrFormat(
        "%s seq  loss %.3f  mlm %.1f%%  nsp %.1f%%  lr %.2e  |g| %.2f  %.0f tok/s  pad %.1f%%",
        HumanCount(state_.samples), m.loss, 100 * m.MlmAccuracy(), 100 * m.NspAccuracy(), lr,
        result.grad_norm, m.tokens / std::max(step_seconds, 1e-9), 100 * m.PaddingShare(max_len)));
    progress.Add(1);
    if (state_.step % std::max<int64_t>(1, o_.log_every_steps) == 0) RETURN_IF_ERROR(LogInterval());

    // An evaluation ends the current block; a new one starts if training goes on.
    bool evaluated = false;
    if (evaluator_ && state_.samples >= state_.next_eval_samples) {
      RETURN_IF_ERROR(LogInterval());
      RETURN_IF_ERROR(mllog_->End("block_stop", nullptr, {{"samples_count", state_.samples}}));
      RETURN_IF_ERROR(Evaluate());
      evaluated = true;
    }
    const bool reached = state_.samples_to_target > 0;
    const bool out_of_steps = state_.step >= o_.total_steps;
    const bool out_of_samples =
        o_.max_samples > 0 && state_.samples >= static_cast<uint64_t>(o_.max_samples);
    if (reached || out_of_steps || out_of_samples) {
      RETURN_IF_ERROR(LogInterval());
      if (!evaluated) {
        // The run ends between evaluations: the last block is evaluated too.
        RETURN_IF_ERROR(mllog_->End("block_stop", nullptr, {{"samples_count", state_.samples}}));
        if (evaluator_) RETURN_IF_ERROR(Evaluate());
      }
      const std::string status = state_.samples_to_target > 0 ? "success" : "aborted";
      RETURN_IF_ERROR(Stop(status));
      progress.Finish();
      return Result(status);
    }
    if (evaluated) {
      state_.block_start_samples = state_.samples;
      RETURN_IF_ERROR(mllog_->Start("block_start", nullptr, {{"samples_count", state_.samples}}));
    }
    if (o_.checkpoint_every_steps > 0 && state_.step % o_.checkpoint_every_steps == 0) {
      RETURN_IF_ERROR(SaveCheckpoint());
    }
  }
}

}  // namespace

absl::StatusOr<TrainResult> Train(const TrainerOptions& options) {
  if (options.communicator == nullptr || !options.train_source || !options.train_index) {
    return absl::InvalidArgumentError("Train needs a communicator, a train source and its rows");
  }
  if (options.eval_source && options.eval_every_samples <= 0) {
    return absl::InvalidArgumentError("train.eval_every_samples must be > 0 with an eval set");
  }
  Loop loop(options);
  try {
    return loop.Run();
  } catch (const std::exception& e) {
    // A collective failed: another rank died, stopped or hung past
    // dist.timeout_s (c10d reports it by exception). Nothing more can be
    // computed together; say so in the MLLOG and in one line.
    const std::string checkpoint = loop.Abort();
    if (options.communicator->world_size() <= 1) throw;
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return absl::UnavailableError(absl::StrCat(
        "rank ", options.communicator->rank(), " lost contact with the other ranks: ",
        options.communicator->DescribeLostRanks(), " (", what,
        "; a rank that stops, or does not answer within dist.timeout_s, ends the run); ",
        options.communicator->rank() != 0
            ? "resume with --resume auto from the run's newest checkpoint (rank 0 writes them)"
        : checkpoint.empty() ? "no checkpoint was written"
                             : absl::StrCat("resume from ", checkpoint, " (--resume auto)")));
  }
}

}  // namespace pbert::train
