// Everything a resume needs, saved whole in each checkpoint's
// trainer_state.json (version 3, docs/training.md): one part per component,
// each written by the component that owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "data/loader.h"
#include "model/fp8.h"
#include "model/precision.h"
#include "model/random_state.h"
#include "nlohmann/json.hpp"
#include "train/evaluation.h"
#include "train/metrics_log.h"
#include "train/mllog.h"
#include "train/step.h"
#include "train/stop_policy.h"

namespace pbert::train {

inline constexpr int kTrainerStateVersion = 3;
// The most ranks a saved run may have had.
inline constexpr int kMaxWorldSize = 1 << 20;

// The loop's own counters.
struct LoopState {
  int64_t step = 0;
  uint64_t samples = 0;              // sequences trained on, all ranks
  double train_seconds = 0;          // time in the loop, over all sessions
  std::string status;                // "" while running; "success" or "aborted" once finished
  int world_size = 1;                // of the session that saved it
  std::string train_index_checksum;  // XXH3 of the rows, as 16 hex digits
  // The data's content_checksum (data/source.h) as 16 hex digits: its records
  // and vocabulary. "" where unknown (checkpoints of earlier releases).
  std::string train_data_checksum;
  std::string eval_data_checksum;
  // The rows of a step over all ranks, and of one rank: micro-batches of
  // rows (what its schedule and optimizer were set for). 0: unknown
  // (version 2).
  int64_t rows_per_step = 0, rows_per_batch = 0, batches_per_step = 0;
  // The task trained ("pretraining", "squad", ...); "" in earlier releases.
  std::string task;
};
void to_json(nlohmann::json& json, const LoopState& state);
void from_json(const nlohmann::json& json, LoopState& state);

struct TrainerState {
  LoopState loop;
  data::LoaderPosition loader;
  model::SavedRandomState random;             // the generators (model/random_state.h)
  model::LossScalerState loss_scale;          // fp16 only; the defaults otherwise
  std::optional<model::Fp8ScalingState> fp8;  // fp8 only: part "fp8", absent otherwise
  EvaluationState evaluation;
  StopState stop;
  MlperfLogState mllog;
  MetricsLogState metrics;
};

nlohmann::json ToJson(const TrainerState& state);
// Reads version 3, and versions 2 and 1 (one flat object) of earlier
// releases.
// `where` names the file in errors.
absl::StatusOr<TrainerState> TrainerStateFromJson(const nlohmann::json& json,
                                                  const std::string& where);

}  // namespace pbert::train
