// Multi-label files (GoEmotions' layout), labeled or not, of 1 to 64
// labels, and a label-names file.
#include "tasks/multi_label.h"
#include "tests/fuzz/fuzz_target.h"

namespace pbert::fuzz::multilabel {

PBERT_FUZZ_TARGET(multilabel) {
  const int choice = TakeChoice(&input, 128);
  const auto parts = Parts(input, 2);
  const std::string path = WriteInput("train.tsv", parts[1]);
  WriteInput("labels.txt", parts[0]);
  auto names = tasks::MultiLabelNames("", path);
  const int64_t classes =
      names.ok() && !names->empty() ? static_cast<int64_t>(names->size()) : 1 + choice % 64;
  return tasks::ReadMultiLabel(path, choice >= 64, classes).ok();
}

}  // namespace pbert::fuzz::multilabel
