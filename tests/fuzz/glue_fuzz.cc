// GLUE files of every task, labeled (train, dev) or not (test), and the
// features made of them.
#include "tasks/glue.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/small_tokenizer.h"

namespace pbert::fuzz::glue {

PBERT_FUZZ_TARGET(glue) {
  const auto tasks = tasks::GlueTasks();
  const int choice = TakeChoice(&input, 2 * static_cast<int>(tasks.size()));
  const tasks::GlueTask& task = tasks[choice / 2];
  auto examples = tasks::ReadGlue(task, WriteInput("dev.tsv", input), (choice & 1) != 0);
  if (!examples.ok()) return false;
  return tasks::MakeGlueFeatures(*examples, SmallTokenizer(), 32).size() == examples->size();
}

}  // namespace pbert::fuzz::glue
