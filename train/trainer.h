// The one training loop, for every task (tasks/task.h): `packed-bert train`
// runs it as MLPerf BERT runs pretraining (steps until the MLM accuracy on
// a fixed eval set reaches the target, with `:::MLLOG` lines), `packed-bert
// finetune` as the fine-tuning scripts run SQuAD and GLUE (epochs, an
// evaluation after each, the model exported at the end). Each component
// decides when it acts (the evaluation, the checkpointer, the stop policy,
// the logs, the profiler) and saves its own part of the trainer state; the
// loop ties them together and knows no task. docs/training.md describes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/progress.h"
#include "data/loader.h"
#include "distributed/communicator.h"
#include "tasks/task.h"
#include "train/checkpointer.h"
#include "train/evaluation.h"
#include "train/experiment.h"
#include "train/metrics_log.h"
#include "train/mllog.h"
#include "train/stop_policy.h"
#include "train/trainee.h"
#include "train/trainer_state.h"
#include "train/training_plan.h"

namespace torch::nn {
class Module;
}

namespace pbert::train {

struct TrainResult {
  // "success" (the target reached), "aborted" (steps or samples ran out
  // before it), "done" (a run without a target at its end) or
  // "interrupted" (asked to stop; resumable).
  std::string status;
  int64_t step = 0;
  int64_t total_steps = 0;
  uint64_t samples = 0;            // sequences trained on
  uint64_t samples_to_target = 0;  // sequences seen when the target was reached, 0 if not
  tasks::Metrics metrics;          // of the last evaluation
  // The last and best evaluation's score (the target's metric, or the
  // task's own).
  double last_score = 0, best_score = 0;
  int64_t evaluations = 0;
  int64_t skipped_steps = 0;
  uint64_t train_sequences = 0, train_rows = 0;  // of the training set
  double packing_factor = 1;
  double train_seconds = 0;  // time spent in the loop, over all sessions
  double run_seconds = 0;    // MLLOG run_start to run_stop (0 if not stopped)
  // This session's steps: the model's FLOPs, the real tokens and the time
  // they took, and the devices' peak (all ranks; 0: unknown), for model
  // FLOP/s, MFU and tokens per second.
  double session_flops = 0, session_tokens = 0, session_step_seconds = 0, peak_flops = 0;
  std::string checkpoint;          // the last one written
  std::vector<std::string> files;  // what the evaluations wrote into the run folder
  std::string model_dir;           // the exported model ("" if none)
  std::string predict_dir;         // the predictions of the files without labels ("" if none)
  bool already_finished = false;   // the resumed checkpoint was of a finished run
};

// Writes the trained weights of `model` as a Hugging Face folder at `dir`
// with the task's head (app/hf_export.h).
using ModelExport = std::function<absl::Status(
    const torch::nn::Module& model, const tasks::ExportHead& head, const std::string& dir)>;

// What a run is made of; everything it refers to outlives the trainer.
struct TrainerSetup {
  const ExperimentConfig& config;
  std::shared_ptr<const tasks::Task> task;
  const TrainingPlan& plan;
  distributed::Communicator& communicator;
  const CheckpointInfo* resume = nullptr;  // the checkpoint to continue; null: a new run
  std::function<bool()> stop_requested;    // polled before each step (SIGINT, SIGTERM)
  bool force = false;        // resume a checkpoint that trained other rows per step (--force)
  ModelExport export_model;  // at the end of a finished run, into RUN_DIR/model; null: none
  std::string resume_flag = "--resume auto";  // the command's flag that continues a run
};

class Trainer {
 public:
  // A new run, a resumed one, or a finished one (which trains nothing).
  // Builds and checks everything and writes nothing: the logs are opened
  // (and a new run's MLLOG header written) when `Train` starts.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const TrainerSetup& setup);

  // Trains until the run ends or is asked to stop. A collective that fails
  // (a rank died, stopped or hung past dist.timeout_s) ends the run with an
  // error naming the lost ranks and where to resume.
  absl::StatusOr<TrainResult> Train();

  // A resumed run that had finished: `Train` only reports it.
  bool finished() const { return finished_ != nullptr; }

 private:
  explicit Trainer(const TrainerSetup& setup);
  absl::Status InitNew();
  absl::Status InitResume(const CheckpointInfo& checkpoint);
  absl::Status CheckSameBatch(const CheckpointInfo& checkpoint) const;
  absl::Status BuildModel();
  absl::Status LoadStart();
  absl::Status OpenParts(const TrainerState& state);
  absl::Status CheckSameDataOnEveryRank(const LoopState& loop);
  absl::Status OpenLogs();

  absl::StatusOr<TrainResult> Loop();
  void ShowProgress(Progress& progress, const StepResult& step, double lr, double seconds);
  absl::Status EndBlock();
  absl::Status Evaluate();
  enum class SaveReason { kDue, kStop, kEnd };
  absl::Status Save(SaveReason reason);
  absl::StatusOr<TrainResult> Finish();
  absl::Status Export();
  absl::Status Predict();
  absl::Status CompleteEnd();
  absl::Status Abort(const absl::Status& why);
  absl::Status Failed(const std::exception& e);
  absl::Status OutOfMemory(const std::exception& e) const;
  absl::Status LostContact(const std::exception& e);

  TrainerState State();
  // Why the weights may not be saved ("" if they may): the last step's loss
  // was not finite, or a weight is not.
  std::string Diverged();
  LoopPosition Position() const;
  double Elapsed() const;
  TrainResult Result(const std::string& status) const;

  const TrainerSetup setup_;
  const ExperimentConfig& config_;
  const TrainingPlan& plan_;
  const tasks::Task& task_;
  distributed::Communicator& comm_;
  const bool rank0_;

  std::unique_ptr<Trainee> trainee_;  // the model, optimizer, scaler, reducer, generators
  std::unique_ptr<data::Loader> loader_;
  Evaluation evaluation_;
  StopPolicy stop_;
  Checkpointer checkpointer_;
  std::unique_ptr<MlperfLog> mllog_;
  std::unique_ptr<MetricsLog> metrics_;
  StepProfiler profiler_;  // train.profile_steps (rank 0 writes the files)
  struct {
    MlperfLogState mllog;
    MetricsLogState metrics;
  } log_state_;  // what the logs reopen at (empty for a new run)
  LoopState loop_;
  // A resume into another run.output_dir: the checkpoint's run folder, whose
  // logs up to the checkpoint are carried over; "" otherwise.
  std::string log_source_;
  bool loss_finite_ = true;  // of the last step
  double peak_flops_ = 0;    // of all ranks' devices (rank 0 measures it); 0: unknown
  double session_flops_ = 0, session_tokens_ = 0, session_step_seconds_ = 0;  // this session's
  std::vector<std::string> files_;  // written by the evaluations
  std::string model_dir_;
  std::string predict_dir_;
  std::chrono::steady_clock::time_point session_start_;
  // A resumed run that had finished: its saved state, and nothing to train.
  std::unique_ptr<TrainerState> finished_;
};

}  // namespace pbert::train
