// Multi-label classification (GoEmotions) as a task: texts of
// tab-separated files (text, its label ids comma-separated, an id; no
// header), the label names from finetune.labels or a file beside them
// (labels.txt, or GoEmotions' emotions.txt: a name a line, in id order); a
// sigmoid for each label on the [CLS] through the pooler, trained with
// binary cross-entropy (Hugging Face's BertForSequenceClassification of
// problem_type multi_label_classification); micro and macro F1 of the
// labels whose probability reaches finetune.threshold; predictions with
// each label's probability. docs/finetuning.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tasks/fine_tuning.h"

namespace pbert::tasks {

// The task's name (finetune.task).
inline constexpr char kMultiLabel[] = "multilabel";

struct LabeledText {
  std::string text;
  std::vector<int32_t> labels;  // ascending, each once
  std::string id;               // the file's third column, or the line's number
  uint64_t line = 0;
};

// Reads a file of `classes` labels: each line text TAB ids [TAB id]
// (`labeled`; otherwise the text, and the id where a third column holds
// it). An error names the file and line: too few columns, an empty text, a
// label that is not a whole number below `classes`, no line at all.
absl::StatusOr<std::vector<LabeledText>> ReadMultiLabel(const std::string& path, bool labeled,
                                                        int64_t classes);

// The label names: finetune.labels, else labels.txt or emotions.txt in the
// folder of `beside` (a name a line).
absl::StatusOr<std::vector<std::string>> MultiLabelNames(const std::string& labels,
                                                         const std::string& beside);

// Micro and macro F1 (sklearn's f1_score, a label never true nor predicted
// counting 0 in the macro mean), micro precision and recall and the share
// of texts whose labels are all right, of `probabilities` ([text][label])
// at `threshold` against `labels`.
Metrics MultiLabelMetrics(const std::vector<std::vector<float>>& probabilities,
                          const std::vector<LabeledText>& labels, double threshold);

// The task of finetune.task multilabel.
absl::StatusOr<std::unique_ptr<Task>> MakeMultiLabel(const TaskSetup& setup);

// The multi-label classifier's task over sets given whole (benchmarks,
// tests): features whose Feature::label_set hold ids below `labels`.
std::unique_ptr<Task> MakeMultiLabelTask(std::string name, std::unique_ptr<PackedSet> train,
                                         std::vector<PackedSet> evaluation, FineTuning parts,
                                         int64_t labels);

}  // namespace pbert::tasks
