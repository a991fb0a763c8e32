#include "tasks/config.h"

#include "tasks/glue.h"

namespace pbert::tasks {

std::vector<std::string> TaskNames() {
  std::vector<std::string> names = {"squad"};
  for (const GlueTask& task : GlueTasks()) names.emplace_back(task.name);
  return names;
}

}  // namespace pbert::tasks
