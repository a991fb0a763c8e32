// The GLUE tasks as their TSV files are distributed (download_glue_data.py):
// each task's columns, found by the header's names (CoLA's train and dev
// files have no header: source, label, mark, sentence), its label set,
// sentence pairs featurized as Google's run_classifier.py does ([CLS] A
// [SEP] B [SEP], the longer side cut first), each task's metric as the
// GLUE benchmark reports it, and the test files (an index column, no
// label) predicted into the benchmark's submission files. docs/finetuning.md.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/tokenizer.h"
#include "tasks/feature.h"

namespace pbert::tasks {

struct GlueTask {
  const char* name;                  // "cola", "sst2", ...
  const char* first;                 // the header's column of the first sentence
  const char* second;                // of the second ("" for single sentences)
  const char* label;                 // of the label
  std::vector<const char*> labels;   // the label values, in class order; empty: a score (STS-B)
  std::vector<const char*> metrics;  // what an evaluation reports, the first the task's own
  const char* submission;  // the benchmark's name of its predictions: "CoLA" (CoLA.tsv), ...

  bool regression() const { return labels.empty(); }
  int classes() const { return regression() ? 1 : static_cast<int>(labels.size()); }
};

// The GLUE tasks, by name; an error lists them.
absl::Span<const GlueTask> GlueTasks();
const GlueTask* FindGlueTask(const std::string& name);

struct GlueExample {
  std::string first, second;
  float label = 0;    // the class's index, or the score
  int64_t index = 0;  // a test file's
  uint64_t line = 0;
};

// Reads a train or dev file of `task` (`labeled`), or a test file (not:
// its index column, "index", or QQP's "id", and no label; one that has
// labels, a train or dev file, is said so and read without them, numbered
// 0, 1, ... in file order where it has no index column), checking its header, every
// line's columns, label (a class of the task, or a score finite as a
// float in decimal notation) and index (a whole number); an error names
// the file and line, and a file of another task says which columns it
// lacks. A UTF-8 byte-order mark before the header is no part of it.
absl::StatusOr<std::vector<GlueExample>> ReadGlue(const GlueTask& task, const std::string& path,
                                                  bool labeled = true);

// The benchmark's submission file of `predictions` (class indices, or
// scores) of `examples` (a test file's): "index\tprediction", then each
// example's index and label name, or score to 9 significant digits (the
// float itself).
std::string SubmissionTsv(const GlueTask& task, const std::vector<GlueExample>& examples,
                          const std::vector<float>& predictions);

// [CLS] first [SEP] (second [SEP]) of at most `max_seq_length` tokens, the
// pair cut one token at a time from the longer side (run_classifier.py's
// _truncate_seq_pair).
std::vector<Feature> MakeGlueFeatures(const std::vector<GlueExample>& examples,
                                      const data::Tokenizer& tokenizer, int max_seq_length);

// The task's metrics of `predictions` (class indices, or scores) against
// `labels`, in task.metrics' order: accuracy; F1 of class 1 (MRPC, QQP);
// Matthews correlation (CoLA); Pearson and Spearman correlation (STS-B).
std::vector<std::pair<std::string, double>> GlueMetrics(const GlueTask& task,
                                                        const std::vector<float>& predictions,
                                                        const std::vector<float>& labels);

double Accuracy(const std::vector<float>& predictions, const std::vector<float>& labels);
double BinaryF1(const std::vector<float>& predictions, const std::vector<float>& labels);
double MatthewsCorrelation(const std::vector<float>& predictions, const std::vector<float>& labels);
double PearsonCorrelation(const std::vector<float>& x, const std::vector<float>& y);
double SpearmanCorrelation(const std::vector<float>& x, const std::vector<float>& y);

}  // namespace pbert::tasks
