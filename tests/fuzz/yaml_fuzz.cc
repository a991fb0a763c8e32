// Configs: a YAML file and --set assignments read into the whole
// experiment's config (every section's checks), then the checks across
// sections. The input's parts: the assignments (a line each), the file.
#include <set>

#include "absl/strings/str_split.h"
#include "common/config.h"
#include "tests/fuzz/fuzz_target.h"
#include "train/experiment.h"
#include "train/regimen.h"

namespace pbert::fuzz::yaml {

PBERT_FUZZ_TARGET(yaml) {
  const auto parts = Parts(input, 2);
  std::vector<std::string> assignments;
  for (absl::string_view line : absl::StrSplit(parts[0], '\n', absl::SkipEmpty())) {
    assignments.emplace_back(line);
  }
  train::ExperimentConfig config;
  std::set<std::string> given;
  const std::string path = WriteInput("config.yaml", parts[1]);
  if (!config::Load(path, config::SetFlags(assignments), &config, &given).ok()) return false;
  for (const train::Regimen* regimen :
       {&train::PretrainingRegimen(), &train::FineTuningRegimen()}) {
    (void)config.InactiveSettings(given, *regimen, model::Precision::kFp32, false, 1, false);
  }
  (void)config::Dump(config);
  return config.CheckTrainable().ok();
}

}  // namespace pbert::fuzz::yaml
