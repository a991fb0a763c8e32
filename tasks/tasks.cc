#include "tasks/tasks.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tasks/fine_tuning.h"
#include "tasks/glue.h"
#include "tasks/multi_label.h"
#include "tasks/pretraining.h"
#include "tasks/token_classification.h"

namespace pbert::tasks {
namespace {

using Maker = absl::StatusOr<std::unique_ptr<Task>> (*)(const TaskSetup&);

// The finetune keys of a config section's fields (SquadOptions').
struct KeysOf {
  std::vector<std::string> keys;
  template <class T, class... Rest>
  void Field(const char* key, T*, Rest&&...) {
    keys.push_back(absl::StrCat("finetune.", key));
  }
};

std::vector<std::string> SquadKeys() {
  SquadOptions options;
  KeysOf keys;
  options.Visit(keys);
  return keys.keys;
}

struct FineTuningEntry {
  const char* name;
  Maker make;
  std::vector<std::string> own_keys;  // of the keys only some tasks read
};

// The fine-tuning tasks of one file format each, by name; a line registers
// a task (GLUE's, a family of one format, follow them).
const std::vector<FineTuningEntry>& FineTuningTasks() {
  static const std::vector<FineTuningEntry> tasks = {
      {"squad", MakeSquad, SquadKeys()},
      {kTokenClassification, MakeTokenClassification, {"finetune.labels"}},
      {kMultiLabel, MakeMultiLabel, {"finetune.labels", "finetune.threshold"}},
  };
  return tasks;
}

}  // namespace

std::vector<std::string> TaskNames() {
  std::vector<std::string> names;
  for (const FineTuningEntry& task : FineTuningTasks()) names.emplace_back(task.name);
  for (const GlueTask& task : GlueTasks()) names.emplace_back(task.name);
  return names;
}

absl::StatusOr<std::unique_ptr<Task>> MakeTask(const std::string& name, const TaskSetup& setup) {
  if (name == kPretraining) return MakePretraining(setup);
  for (const FineTuningEntry& task : FineTuningTasks()) {
    if (name == task.name) return task.make(setup);
  }
  if (const GlueTask* glue = FindGlueTask(name)) return MakeGlue(*glue, setup);
  return absl::InvalidArgumentError(absl::StrCat("no task '", name, "'; finetune.task takes ",
                                                 absl::StrJoin(TaskNames(), ", ")));
}

std::string TaskOfArchitecture(const std::string& architecture) {
  return architecture == kPretrainingArchitecture ? kPretraining : "";
}

std::vector<std::string> TaskOwnKeys() {
  std::vector<std::string> keys;
  for (const FineTuningEntry& task : FineTuningTasks()) {
    for (const std::string& key : task.own_keys) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  }
  return keys;
}

bool TaskReadsKey(const std::string& name, const std::string& key) {
  for (const FineTuningEntry& task : FineTuningTasks()) {
    if (name == task.name) {
      return std::find(task.own_keys.begin(), task.own_keys.end(), key) != task.own_keys.end();
    }
  }
  return false;  // GLUE's tasks and pretraining read none of them
}

WeightsOrigin Task::OriginOf(const std::string& trained_for) const {
  if (trained_for.empty()) return WeightsOrigin::kUnknown;
  if (trained_for == name_) return WeightsOrigin::kThisTask;
  if (trained_for == kPretraining) return WeightsOrigin::kPretraining;
  return WeightsOrigin::kOtherTask;
}

}  // namespace pbert::tasks
