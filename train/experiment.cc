#include "train/experiment.h"

#include "absl/strings/str_cat.h"
#include "train/regimen.h"

namespace pbert::train {

void RunConfig::InactiveInEvaluation(config::InactiveKeys* keys) {
  keys->Keys({"run.cuda_graphs"}, "evaluating replays no captured training step");
}

data::PackingOptions ExperimentConfig::PackingOptions() const {
  data::PackingOptions options = packing.options;
  options.max_len = static_cast<int>(data.max_seq_len);
  options.seed = static_cast<uint64_t>(run.seed);
  return options;
}

absl::Status ExperimentConfig::CheckTrainable() const {
  const model::Ablation ablation = model.bert.ablation();
  if (ablation != model::Ablation::kNone && mlperf.division == Division::kClosed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.ablation ", NameOf(ablation),
        " trains a model that is not BERT, which a closed-division MLPerf run may not; for an "
        "experiment set mlperf.division: open"));
  }
  return absl::OkStatus();
}

std::vector<std::string> ExperimentConfig::InactiveSettings(const std::set<std::string>& given,
                                                            const Regimen& regimen,
                                                            model::Precision precision,
                                                            bool device_is_cuda, int world_size,
                                                            bool resumed) const {
  config::InactiveKeys keys(given);
  regimen.Unread(*this, resumed, &keys);
  model.Inactive(precision, device_is_cuda, &keys);
  dist.Inactive(world_size, &keys);
  optim.Inactive(device_is_cuda, &keys);
  return keys.Take();
}

std::vector<std::string> ExperimentConfig::EvaluationIdleSettings(
    const std::set<std::string>& given) {
  config::InactiveKeys keys(given);
  RunConfig::InactiveInEvaluation(&keys);
  model::ModelConfig::InactiveInEvaluation(&keys);
  return keys.Take();
}

}  // namespace pbert::train
