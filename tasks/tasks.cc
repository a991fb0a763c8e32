#include "tasks/tasks.h"

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

// The fine-tuning tasks of one file format each, by name; a line registers
// a task (GLUE's, a family of one format, follow them).
const std::vector<std::pair<const char*, Maker>>& FineTuningTasks() {
  static const std::vector<std::pair<const char*, Maker>> tasks = {
      {"squad", MakeSquad},
      {kTokenClassification, MakeTokenClassification},
      {kMultiLabel, MakeMultiLabel},
  };
  return tasks;
}

}  // namespace

std::vector<std::string> TaskNames() {
  std::vector<std::string> names;
  for (const auto& [name, make] : FineTuningTasks()) names.emplace_back(name);
  for (const GlueTask& task : GlueTasks()) names.emplace_back(task.name);
  return names;
}

absl::StatusOr<std::unique_ptr<Task>> MakeTask(const std::string& name, const TaskSetup& setup) {
  if (name == kPretraining) return MakePretraining(setup);
  for (const auto& [task, make] : FineTuningTasks()) {
    if (name == task) return make(setup);
  }
  if (const GlueTask* glue = FindGlueTask(name)) return MakeGlue(*glue, setup);
  return absl::InvalidArgumentError(absl::StrCat("no task '", name, "'; finetune.task takes ",
                                                 absl::StrJoin(TaskNames(), ", ")));
}

}  // namespace pbert::tasks
