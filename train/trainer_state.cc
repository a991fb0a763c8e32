#include "train/trainer_state.h"

#include "absl/strings/str_cat.h"
#include "common/saved_state.h"
#include "common/status.h"

namespace pbert::train {
namespace {

// Version 1 held every field in one object.
nlohmann::json FromVersion1(const nlohmann::json& v1) {
  return {{"loop",
           {{"step", v1.at("step")},
            {"samples", v1.at("samples")},
            {"train_seconds", v1.at("train_seconds")},
            {"status", v1.at("status")},
            {"world_size", v1.at("world_size")},
            {"train_index_checksum", v1.at("train_index_checksum")}}},
          {"loader", {{"rows", v1.at("loader_rows")}}},
          {"random", {{"cpu", v1.at("cpu_rng")}}},
          {"loss_scale",
           {{"scale", v1.at("loss_scale")}, {"good_steps", v1.at("loss_scale_good_steps")}}},
          {"evaluation",
           {{"next_samples", v1.at("next_eval_samples")},
            {"evaluations", v1.at("evaluations")},
            {"last_mlm_accuracy", v1.at("last_mlm_accuracy")},
            {"best_mlm_accuracy", v1.at("best_mlm_accuracy")},
            {"samples_to_target", v1.at("samples_to_target")}}},
          {"stop",
           {{"bad_steps_in_row", v1.at("bad_steps_in_row")},
            {"skipped_steps", v1.at("skipped_steps")}}},
          {"mllog",
           {{"bytes", v1.at("mllog_bytes")},
            {"run_start_ms", v1.at("run_start_ms")},
            {"run_seconds", v1.at("run_seconds")}}},
          {"metrics", {{"bytes", v1.at("metrics_bytes")}}}};
}

// One part of version 2, read by its owner's type; errors name the part.
template <class T>
absl::StatusOr<T> ReadPart(const nlohmann::json& parts, const char* name,
                           const std::string& what) {
  return ReadSavedState<T>(parts.contains(name) ? parts.at(name) : nlohmann::json(),
                           absl::StrCat(what, ", part '", name, "'"));
}

}  // namespace

nlohmann::json ToJson(const TrainerState& s) {
  return {{"version", kTrainerStateVersion}, {"loop", s.loop},       {"loader", s.loader},
          {"random", s.random},              {"loss_scale", s.loss_scale},
          {"evaluation", s.evaluation},      {"stop", s.stop},       {"mllog", s.mllog},
          {"metrics", s.metrics}};
}

absl::StatusOr<TrainerState> TrainerStateFromJson(const nlohmann::json& json,
                                                  const std::string& where) {
  const std::string what = absl::StrCat("trainer state ", where);
  nlohmann::json parts;
  try {
    const int version = json.at("version").get<int>();
    if (version == 1) {
      parts = FromVersion1(json);
    } else if (version == kTrainerStateVersion) {
      parts = json;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": trainer state version ", version, "; this packed-bert reads versions 1 to ",
          kTrainerStateVersion, ": resume with the packed-bert that wrote it, or a newer one"));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("malformed ", what, " (", e.what(), ")"));
  }
  TrainerState s;
  ASSIGN_OR_RETURN(s.loop, ReadPart<LoopState>(parts, "loop", what));
  ASSIGN_OR_RETURN(s.loader, ReadPart<data::LoaderPosition>(parts, "loader", what));
  ASSIGN_OR_RETURN(s.random, ReadPart<model::SavedRandomState>(parts, "random", what));
  ASSIGN_OR_RETURN(s.loss_scale, ReadPart<model::LossScalerState>(parts, "loss_scale", what));
  ASSIGN_OR_RETURN(s.evaluation, ReadPart<EvaluationState>(parts, "evaluation", what));
  ASSIGN_OR_RETURN(s.stop, ReadPart<StopState>(parts, "stop", what));
  ASSIGN_OR_RETURN(s.mllog, ReadPart<MlperfLogState>(parts, "mllog", what));
  ASSIGN_OR_RETURN(s.metrics, ReadPart<MetricsLogState>(parts, "metrics", what));
  return s;
}

}  // namespace pbert::train
