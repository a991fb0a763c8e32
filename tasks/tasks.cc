#include "tasks/tasks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tasks/fine_tuning.h"
#include "tasks/glue.h"
#include "tasks/pretraining.h"

namespace pbert::tasks {

absl::StatusOr<std::unique_ptr<Task>> MakeTask(const std::string& name, const TaskSetup& setup) {
  if (name == kPretraining) return MakePretraining(setup);
  if (name == "squad") return MakeSquad(setup);
  if (const GlueTask* glue = FindGlueTask(name)) return MakeGlue(*glue, setup);
  return absl::InvalidArgumentError(absl::StrCat("no task '", name, "'; finetune.task takes ",
                                                 absl::StrJoin(TaskNames(), ", ")));
}

}  // namespace pbert::tasks
