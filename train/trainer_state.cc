#include "train/trainer_state.h"

#include "absl/strings/str_cat.h"
#include "common/saved_state.h"
#include "common/status.h"
#include "common/structured_text.h"

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

// Version 2's evaluation part, in version 3's names: pretraining's score
// was its MLM accuracy, and no metrics were kept.
void FromVersion2(nlohmann::json& parts) {
  nlohmann::json& evaluation = parts["evaluation"];
  if (!evaluation.is_object()) return;  // the part's reader names it
  for (const auto& [old, now] : {std::pair{"last_mlm_accuracy", "last_score"},
                                 std::pair{"best_mlm_accuracy", "best_score"}}) {
    if (!evaluation.contains(old)) continue;
    evaluation[now] = evaluation[old];
    evaluation.erase(old);
  }
  evaluation["metrics"] = nlohmann::json::array();
}

// One part of version 3, read by its owner's type; errors name the part.
template <class T>
absl::StatusOr<T> ReadPart(const nlohmann::json& parts, const char* name, const std::string& what) {
  return ReadSavedState<T>(parts.contains(name) ? parts.at(name) : nlohmann::json(),
                           absl::StrCat(what, ", part '", name, "'"));
}

}  // namespace

void to_json(nlohmann::json& json, const LoopState& s) {
  json = {{"step", s.step},
          {"samples", s.samples},
          {"train_seconds", s.train_seconds},
          {"status", s.status},
          {"task", s.task},
          {"world_size", s.world_size},
          {"rows_per_step", s.rows_per_step},
          {"rows_per_batch", s.rows_per_batch},
          {"batches_per_step", s.batches_per_step},
          {"train_index_checksum", s.train_index_checksum},
          {"train_data_checksum", s.train_data_checksum},
          {"eval_data_checksum", s.eval_data_checksum}};
}

void from_json(const nlohmann::json& json, LoopState& s) {
  json.at("step").get_to(s.step);
  json.at("samples").get_to(s.samples);
  json.at("train_seconds").get_to(s.train_seconds);
  json.at("status").get_to(s.status);
  json.at("world_size").get_to(s.world_size);
  json.at("train_index_checksum").get_to(s.train_index_checksum);
  // (absent in checkpoints of earlier releases)
  s.train_data_checksum = json.value("train_data_checksum", std::string());
  s.eval_data_checksum = json.value("eval_data_checksum", std::string());
  s.task = json.value("task", std::string());
  s.rows_per_step = json.value("rows_per_step", int64_t{0});
  s.rows_per_batch = json.value("rows_per_batch", int64_t{0});
  s.batches_per_step = json.value("batches_per_step", int64_t{0});
}

nlohmann::json ToJson(const TrainerState& s) {
  nlohmann::json json = {{"version", kTrainerStateVersion},
                         {"loop", s.loop},
                         {"loader", s.loader},
                         {"random", s.random},
                         {"loss_scale", s.loss_scale},
                         {"evaluation", s.evaluation},
                         {"stop", s.stop},
                         {"mllog", s.mllog},
                         {"metrics", s.metrics}};
  if (s.fp8) json["fp8"] = *s.fp8;
  return json;
}

absl::StatusOr<TrainerState> TrainerStateFromJson(const nlohmann::json& json,
                                                  const std::string& where) {
  const std::string what = absl::StrCat("trainer state ", where);
  nlohmann::json parts;
  try {
    const int version = IntegerOf<int>(json.at("version"));
    if (version == 1 || version == 2) {
      parts = version == 1 ? FromVersion1(json) : json;
      FromVersion2(parts);
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
  if (parts.contains("fp8")) {
    ASSIGN_OR_RETURN(s.fp8, ReadPart<model::Fp8ScalingState>(parts, "fp8", what));
  }
  ASSIGN_OR_RETURN(s.evaluation, ReadPart<EvaluationState>(parts, "evaluation", what));
  ASSIGN_OR_RETURN(s.stop, ReadPart<StopState>(parts, "stop", what));
  ASSIGN_OR_RETURN(s.mllog, ReadPart<MlperfLogState>(parts, "mllog", what));
  ASSIGN_OR_RETURN(s.metrics, ReadPart<MetricsLogState>(parts, "metrics", what));
  // The parts agree with each other: each step trains at least one row of
  // at least one sequence, on a world of at least one rank.
  if (s.loop.world_size < 1 || s.loop.world_size > kMaxWorldSize) {
    return absl::DataLossError(absl::StrCat("malformed ", what, ": world_size ", s.loop.world_size,
                                            ", which no run saves"));
  }
  if (s.loader.rows < static_cast<uint64_t>(s.loop.step) || s.loader.rows > s.loop.samples) {
    return absl::DataLossError(
        absl::StrCat("malformed ", what, ": the loader is at row ", s.loader.rows, " after ",
                     s.loop.step, " steps of ", s.loop.samples,
                     " sequences; a run reads at least one row per step and one sequence per row"));
  }
  return s;
}

}  // namespace pbert::train
