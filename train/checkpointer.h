// Training checkpoints: one folder per saved step, written whole into a
// temporary folder, fsynced and renamed into place, so that a crash at any
// moment leaves the previous checkpoints usable. Layout (docs/training.md):
//
//   RUN_DIR/checkpoints/step-00000100/
//     model.safetensors    the weights, Hugging Face names (score, HF load it)
//     optimizer.pt         LAMB's state (LibTorch archive)
//     trainer_state.json   everything else a resume needs (TrainerState)
//     config.yaml          the effective config of the run
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "optim/lamb.h"

namespace pbert::train {

// Writes step `step`'s checkpoint under `run_dir`/checkpoints and then
// removes all but the newest `keep` (0 keeps all). Returns its folder.
absl::StatusOr<std::string> SaveCheckpoint(const std::string& run_dir, int64_t step,
                                           const torch::nn::Module& model,
                                           const optim::Lamb& optimizer,
                                           const nlohmann::json& state,
                                           const std::string& config_yaml, int keep);

// The newest complete checkpoint folder of `run_dir`, "" if there is none.
// Leftover temporary folders of interrupted saves are removed.
std::string LatestCheckpoint(const std::string& run_dir);

// The trainer state and config of checkpoint folder `dir` (no weights).
struct CheckpointInfo {
  std::string dir;
  nlohmann::json state;
  std::string config_yaml;
};
absl::StatusOr<CheckpointInfo> ReadCheckpointInfo(const std::string& dir);

// Loads the weights and optimizer state of checkpoint folder `dir`.
absl::Status LoadCheckpointWeights(const std::string& dir, torch::nn::Module& model,
                                   optim::Lamb& optimizer);

}  // namespace pbert::train
