// A training run stopped at a checkpoint and resumed from it, as the
// trainer does it (train/checkpointer.h): the tests of exact resume on the
// CPU and on a GPU build it here, then step the resumed trainee and compare.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/batch.h"
#include "tests/train/model_batches.h"
#include "train/checkpointer.h"
#include "train/step.h"
#include "train/trainee.h"
#include "train/trainer_state.h"

namespace pbert::testing {

struct ResumedRun {
  std::unique_ptr<train::Trainee> whole;    // trained without a stop, to `end`
  std::unique_ptr<train::Trainee> resumed;  // loaded from step `stop`, not stepped yet
  std::vector<double> losses;        // whole's losses of steps stop..end-1
  model::SavedRandomState random;    // the generators as the checkpoint saved them
  std::string error;                 // what failed, or ""
};

// The steps the resume tests train on: step k holds 4 rows of 64 tokens,
// each of at most two sequences of 6 to 30 tokens (vocabulary 97), drawn
// with `seed`; 4 rows and 8 sequences a step.
inline std::function<std::vector<data::PackedBatch>(int)> FourRowSteps(uint32_t seed) {
  auto instances = std::make_shared<std::vector<data::Instance>>(
      model::testing::RandomInstances(60, 6, 30, 97, seed));
  auto rows = std::make_shared<std::vector<std::vector<const data::Instance*>>>(
      model::testing::PackInOrder(*instances, 2, 64));
  return [instances, rows](int step) {
    std::vector<std::vector<const data::Instance*>> part(rows->begin() + 4 * step,
                                                         rows->begin() + 4 * step + 4);
    return std::vector<data::PackedBatch>{*data::MakeBatch(part, {64, 2, 0})};
  };
}

// Trains a trainee of `options` for `end` steps (step k trains on
// batches(k), of `rows` rows and `sequences` sequences each), saving at
// step `stop` a checkpoint of its weights() (the fp32 masters, where it has
// them), its optimizer and its generators into a folder `name` under the
// temporary folder; then makes a new trainee of `options` and loads that
// checkpoint into it as a resumed run does, and removes the folder. The
// generators are the process's: the uninterrupted trainee takes all its
// steps before the resumed one restores them, as a new process would.
inline ResumedRun RunAndResume(const train::TraineeOptions& options,
                               distributed::Communicator& communicator,
                               const std::function<std::vector<data::PackedBatch>(int)>& batches,
                               int stop, int end, uint64_t rows, uint64_t sequences, double lr,
                               const std::string& name) {
  ResumedRun run;
  auto failed = [&](const std::string& what, const absl::Status& status) {
    run.error = absl::StrCat(what, ": ", status.ToString());
    return std::move(run);
  };
  auto whole = train::Trainee::Make(options, communicator);
  if (!whole.ok()) return failed("making the trainee", whole.status());
  run.whole = std::move(*whole);
  for (int step = 0; step < stop; ++step) {
    auto result = train::TrainStep(*run.whole, communicator, batches(step), lr, {});
    if (!result.ok()) return failed(absl::StrCat("step ", step), result.status());
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(dir);
  train::CheckpointOptions checkpoints;
  checkpoints.run_dir = dir.string();
  checkpoints.every_steps = 0;
  train::Checkpointer checkpointer(checkpoints, communicator);
  train::TrainerState state;
  state.loop.step = stop;
  state.loop.samples = sequences * static_cast<uint64_t>(stop);
  state.loader.rows = rows * static_cast<uint64_t>(stop);
  state.random = run.whole->randomness().Save();
  if (const model::Fp8Scaling* fp8 = run.whole->fp8()) state.fp8 = fp8->State();
  run.random = state.random;
  if (absl::Status saved = checkpointer.Save(stop, run.whole->weights(), run.whole->optimizer(),
                                             train::ToJson(state));
      !saved.ok()) {
    return failed("saving the checkpoint", saved);
  }
  for (int step = stop; step < end; ++step) {
    auto result = train::TrainStep(*run.whole, communicator, batches(step), lr, {});
    if (!result.ok()) return failed(absl::StrCat("step ", step), result.status());
    run.losses.push_back(result->metrics.loss);
  }
  auto info = train::ReadCheckpointInfo(checkpointer.last());
  if (!info.ok()) return failed("reading the checkpoint", info.status());
  auto resumed = train::Trainee::Make(options, communicator);
  if (!resumed.ok()) return failed("making the resumed trainee", resumed.status());
  run.resumed = std::move(*resumed);
  if (absl::Status loaded = train::LoadCheckpointWeights(info->dir, run.resumed->weights(),
                                                  run.resumed->optimizer(), options.device);
      !loaded.ok()) {
    return failed("loading the checkpoint", loaded);
  }
  run.resumed->SyncModelWeights();
  if (absl::Status restored = run.resumed->RestoreFp8(info->trainer.fp8); !restored.ok()) {
    return failed("restoring the fp8 scales", restored);
  }
  if (absl::Status restored = run.resumed->randomness().Restore(info->trainer.random);
      !restored.ok()) {
    return failed("restoring the generators", restored);
  }
  std::filesystem::remove_all(dir);
  return run;
}

}  // namespace pbert::testing
