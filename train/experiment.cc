#include "train/experiment.h"

#include "absl/strings/str_cat.h"

namespace pbert::train {

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

}  // namespace pbert::train
