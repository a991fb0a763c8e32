// Training checkpoints: one folder per saved step, written whole into a
// temporary folder, fsynced and renamed into place, so that a crash at any
// moment leaves the previous checkpoints usable. Layout (docs/training.md):
//
//   RUN_DIR/checkpoints/step-00000100/
//     model.safetensors    the weights, Hugging Face names (score, HF load it)
//     optimizer.pt         LAMB's state (LibTorch archive)
//     trainer_state.json   everything else a resume needs, each part saved
//                          by the component that owns it (train/trainer.h)
//     config.yaml          the effective config of the run
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/communicator.h"
#include "nlohmann/json.hpp"
#include "train/trainer_state.h"

namespace torch::nn {
class Module;
}
namespace pbert::optim {
class Lamb;
}

namespace pbert::train {

// From run.output_dir, train.checkpoint_every_steps and keep_checkpoints.
struct CheckpointOptions {
  std::string run_dir;
  int64_t every_steps = 1000;     // 0: only when asked and at the end
  int keep = 3;                   // the newest kept; 0: all
  std::string config_yaml;        // the effective config, saved with each
  bool after_evaluation = false;  // also after each evaluation (fine-tuning's epochs)
  // The command line that continues the run, for messages; "" says
  // `packed-bert train --config RUN_DIR/config.yaml --resume auto`.
  std::string resume_command;
};

// Saves a run's checkpoints when they are due: every
// train.checkpoint_every_steps steps, when asked to stop, and at the end.
class Checkpointer {
 public:
  Checkpointer(CheckpointOptions options, distributed::Communicator& communicator)
      : options_(std::move(options)), communicator_(communicator) {}

  bool Due(int64_t step) const {
    return options_.every_steps > 0 && step % options_.every_steps == 0;
  }
  // Step `step` was saved as it stands.
  bool Saved(int64_t step) const { return saved_step_ == step; }
  // Rank 0 writes step `step`'s checkpoint with `state`; every rank waits
  // until it is complete, so that none runs ahead of it.
  absl::Status Save(int64_t step, const torch::nn::Module& model, const optim::Lamb& optimizer,
                    const nlohmann::json& state);
  // The newest checkpoint this run wrote, "" if none.
  const std::string& last() const { return last_; }

 private:
  // The error of a save that failed, naming what survived and how to resume.
  absl::Status NotSaved(int64_t step, const absl::Status& why) const;

  const CheckpointOptions options_;
  distributed::Communicator& communicator_;
  int64_t saved_step_ = -1;
  std::string last_;
};

// Writes step `step`'s checkpoint under `run_dir`/checkpoints and then
// removes all but the newest `keep` (0 keeps all). Returns its folder.
absl::StatusOr<std::string> SaveCheckpoint(const std::string& run_dir, int64_t step,
                                           const torch::nn::Module& model,
                                           const optim::Lamb& optimizer,
                                           const nlohmann::json& state,
                                           const std::string& config_yaml, int keep);

// The newest complete checkpoint folder of `run_dir`, "" if there is none.
// Leftover temporary folders of interrupted saves are removed. `passed_by`
// (if given) receives the newer folders that lack a file, each with it.
std::string LatestCheckpoint(const std::string& run_dir,
                             std::vector<std::string>* passed_by = nullptr);

// The trainer state and config of checkpoint folder `dir` (no weights).
struct CheckpointInfo {
  std::string dir;
  nlohmann::json state;  // trainer_state.json as written, its "files" part included
  TrainerState trainer;  // its parts, read once (train/trainer_state.h)
  std::string config_yaml;
};
absl::StatusOr<CheckpointInfo> ReadCheckpointInfo(const std::string& dir);

// OK if the weights and optimizer state of `checkpoint` are those its
// trainer state was saved with (their checksums, part "files"; checkpoints
// written before it have none); else a DataLoss error naming the file.
absl::Status CheckBoundFiles(const CheckpointInfo& checkpoint);

// A shared hold on a checkpoint folder while it is read outside its run
// (export-hf, score): the run's rotation (train.keep_checkpoints) leaves a
// held folder for a later save to remove. A step-N folder that is not there
// (rotated away before it was held) is NotFound naming the run's newest
// checkpoint; any other path (a weights file) is held as nothing.
class CheckpointHold {
 public:
  static absl::StatusOr<CheckpointHold> Take(const std::string& path);
  CheckpointHold(CheckpointHold&& other) noexcept;
  CheckpointHold& operator=(CheckpointHold&&) = delete;
  CheckpointHold(const CheckpointHold&) = delete;
  ~CheckpointHold();

 private:
  explicit CheckpointHold(int fd) : fd_(fd) {}
  int fd_;  // the folder, locked shared; -1 for none
};

// Loads the weights at `path` (any file model::LoadWeights reads, or a
// checkpoint folder of train) for use outside training (score, export-hf):
// a checkpoint's files must have the checksums its trainer state recorded
// (CheckBoundFiles), and every weight must be finite. A checkpoint is held
// while it is read (CheckpointHold).
absl::Status LoadVerifiedWeights(const std::string& path, torch::nn::Module& model,
                                 const std::function<bool(const std::string&)>& take = {});

// The task the weights at `path` were trained for, where they say: a
// checkpoint folder's (or its model.safetensors's) trainer state, a
// Hugging Face folder's (or its model.safetensors's) config.json
// "finetuning_task"; "pretraining" for pretraining weights; "" where
// unknown.
std::string TaskOfWeights(const std::string& path);

// Loads the weights and optimizer state of checkpoint folder `dir`.
absl::Status LoadCheckpointWeights(const std::string& dir, torch::nn::Module& model,
                                   optim::Lamb& optimizer, const c10::Device& device);

}  // namespace pbert::train
