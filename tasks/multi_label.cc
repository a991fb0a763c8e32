#include "tasks/multi_label.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/printable.h"
#include "common/status.h"
#include "common/text_lines.h"
#include "model/task_heads.h"

namespace pbert::tasks {
namespace {

// The tensors of Inputs::task, over the [B,D] sequence slots: each slot's
// labels ([B,D,C], 1 for each of its labels) and its feature.
enum MultiLabelTensor { kLabelsOf, kLabelFeature };

const std::vector<std::string>& MultiLabelSumNames() {
  static const std::vector<std::string> names = {"sequences", "true_positives", "predicted_labels",
                                                 "true_labels"};
  return names;
}

double F1Of(double tp, double predicted, double actual) {
  return predicted + actual > 0 ? 2 * tp / (predicted + actual) : 0.0;
}

class MultiLabelTask : public FineTuningTask {
 public:
  MultiLabelTask(std::string name, std::unique_ptr<PackedSet> train,
                 std::vector<PackedSet> evaluation, FineTuning parts, int64_t labels)
      : FineTuningTask(std::move(name), std::move(train), std::move(evaluation), std::move(parts)),
        labels_(labels) {}

  TaskModel MakeModel(const model::BertOptions& options) const override {
    auto impl = std::make_shared<model::BertForSequenceClassificationImpl>(options, labels_);
    return {impl, impl->bert};
  }
  absl::StatusOr<Totals> AddInputs(const PackedSet& set, const data::PackedBatch& batch,
                                   const model::InputPlan&, model::Inputs* inputs) const override {
    ASSIGN_OR_RETURN(const std::vector<Feature>* features, FeaturesOf(set));
    ASSIGN_OR_RETURN(const std::vector<int64_t> records, RecordsOf(*features, batch));
    const int64_t B = batch.rows(), D = batch.cls_positions.size(1);
    at::Tensor labels = at::zeros({B, D, labels_}, at::kFloat);
    at::Tensor feature = at::full({B, D}, static_cast<int64_t>(features->size()), at::kLong);
    auto hot = labels.accessor<float, 3>();
    auto owners = feature.accessor<int64_t, 2>();
    const std::vector<std::pair<int64_t, int64_t>> slots = SlotsOf(batch);
    for (size_t i = 0; i < records.size(); ++i) {
      const auto [r, slot] = slots[i];
      for (const int32_t k : (*features)[records[i]].label_set) {
        if (k < 0 || k >= labels_) {
          return absl::InternalError(absl::StrCat("a feature holds label ", k, " of ", labels_));
        }
        hot[r][slot][k] = 1.0f;
      }
      owners[r][slot] = records[i];
    }
    inputs->task = {labels, feature};
    return Totals{static_cast<double>(batch.sequences.size())};
  }
  Outputs Forward(torch::nn::Module& model, const model::Inputs& inputs) const override {
    return {ModuleAs<model::BertForSequenceClassificationImpl>(model).forward(inputs)};
  }
  // Each sequence's binary cross-entropy, its mean over the labels (the
  // mean BCEWithLogitsLoss takes over a batch's labels), over the step's
  // sequences.
  MicroBatchSums Sums(const Outputs& outputs, const model::Inputs& inputs,
                      const at::Tensor& totals) const override {
    const at::Tensor x = outputs[0].to(at::kDouble);  // [B,D,C]
    const at::Tensor y = inputs.task[kLabelsOf].to(at::kDouble);
    const at::Tensor mask = inputs.slot_valid.to(at::kDouble).unsqueeze(-1);
    const at::Tensor bce = x.clamp_min(0) - x * y + at::log1p(at::exp(-x.abs()));
    const at::Tensor sum = (bce.mean(-1, /*keepdim=*/true) * mask).sum();
    const at::Tensor predicted = x.ge(0).to(at::kDouble) * mask;
    const at::Tensor actual = y * mask;
    const at::Tensor loss = PerStepSequences(sum, totals);
    return {loss, at::stack({mask.sum(), (predicted * actual).sum(), predicted.sum(), actual.sum()})
                      .detach()};
  }
  const std::vector<std::string>& SumNames() const override { return MultiLabelSumNames(); }
  Metrics TrainMetrics(const std::vector<double>& sums) const override {
    return {{"micro_f1", F1Of(sums[1], sums[2], sums[3])}};
  }
  double TrainingFlops(const model::BertOptions& options, const model::BatchWork& work,
                       const Totals&) const override {
    return ClassifierFlops(options, work, labels_);
  }

 private:
  int64_t labels_;
};

// A file of the task: its texts and whether they have labels.
struct MultiLabelFile {
  std::vector<LabeledText> texts;
  bool labeled = true;
};

// Each text's probability of each label in its feature's row of an
// [F+1, C] tensor (the last row takes the unused slots); scored at the
// threshold, or written with the probabilities.
class MultiLabelEvaluation : public SetEvaluation {
 public:
  MultiLabelEvaluation(std::shared_ptr<const MultiLabelFile> file, std::vector<std::string> names,
                       double threshold, const c10::Device& device)
      : file_(std::move(file)),
        names_(std::move(names)),
        threshold_(threshold),
        gathered_(at::zeros(
            {static_cast<int64_t>(file_->texts.size()) + 1, static_cast<int64_t>(names_.size())},
            at::TensorOptions().dtype(at::kFloat).device(device))) {}

  void Add(const Outputs& outputs, const model::Inputs& inputs) override {
    const at::Tensor p = at::sigmoid(outputs[0].to(at::kFloat));
    gathered_.index_copy_(0, inputs.task[kLabelFeature].reshape({-1}),
                          p.reshape({-1, gathered_.size(1)}));
  }
  const at::Tensor& Shared() const override { return gathered_; }
  absl::StatusOr<Scored> Score(const at::Tensor& summed) override {
    const at::Tensor host = summed.to(at::kCPU, at::kFloat).contiguous();
    const auto rows = host.accessor<float, 2>();
    std::vector<std::vector<float>> probabilities(file_->texts.size());
    std::string tsv = absl::StrCat("id\tlabels\t", absl::StrJoin(names_, "\t"), "\n");
    for (size_t i = 0; i < file_->texts.size(); ++i) {
      std::vector<std::string> chosen, columns;
      for (size_t k = 0; k < names_.size(); ++k) {
        probabilities[i].push_back(rows[i][k]);
        if (rows[i][k] >= threshold_) chosen.push_back(std::to_string(k));
        columns.push_back(absl::StrFormat("%.6f", rows[i][k]));
      }
      absl::StrAppend(&tsv, file_->texts[i].id, "\t", absl::StrJoin(chosen, ","), "\t",
                      absl::StrJoin(columns, "\t"), "\n");
    }
    Scored scored;
    scored.counts = {{"examples", static_cast<double>(file_->texts.size())}};
    scored.files = {{"predictions.tsv", std::move(tsv)}};
    if (file_->labeled) scored.metrics = MultiLabelMetrics(probabilities, file_->texts, threshold_);
    return scored;
  }

 private:
  std::shared_ptr<const MultiLabelFile> file_;
  std::vector<std::string> names_;
  double threshold_;
  at::Tensor gathered_;
};

// The ids of `field` ("3,27"), each a whole number below `classes`.
absl::StatusOr<std::vector<int32_t>> LabelIds(absl::string_view field, int64_t classes) {
  std::set<int32_t> ids;
  for (absl::string_view id : absl::StrSplit(field, ',')) {
    id = absl::StripAsciiWhitespace(id);
    int32_t k = -1;
    if (id.empty() || !std::all_of(id.begin(), id.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(id, &k) || k >= classes) {
      return absl::InvalidArgumentError(absl::StrCat("the label id \"", Printable(id),
                                                     "\" is not a whole number below ", classes,
                                                     " (the task's labels)"));
    }
    ids.insert(k);
  }
  return std::vector<int32_t>(ids.begin(), ids.end());
}

}  // namespace

absl::StatusOr<std::vector<LabeledText>> ReadMultiLabel(const std::string& path, bool labeled,
                                                        int64_t classes) {
  ASSIGN_OR_RETURN(TextLines lines, TextLines::Open(path, "multi-label file"));
  std::vector<LabeledText> out;
  for (std::string line; lines.Next(&line);) {
    if (lines.line_number() == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto where = [&] { return absl::StrCat(path, ":", lines.line_number(), ": "); };
    const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    if ((labeled && fields.size() < 2) || fields.size() > 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), fields.size(), " tab-separated columns, not the text, its label ids ",
          "(comma-separated) and an id"));
    }
    LabeledText text;
    text.line = lines.line_number();
    text.text = std::string(fields[0]);
    if (absl::StripAsciiWhitespace(text.text).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "an empty text"));
    }
    text.id = fields.size() == 3 ? std::string(fields[2]) : std::to_string(text.line);
    if (labeled) {
      auto ids = LabelIds(fields[1], classes);
      if (!ids.ok())
        return absl::InvalidArgumentError(where() + std::string(ids.status().message()));
      text.labels = std::move(*ids);
    }
    out.push_back(std::move(text));
  }
  RETURN_IF_ERROR(lines.status());
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": no line; a multi-label file holds a text a line: text TAB label ids TAB id"));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> MultiLabelNames(const std::string& labels,
                                                         const std::string& beside) {
  std::vector<std::string> names = ListOfLabels(labels);
  if (!names.empty()) return names;
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(beside).parent_path();
  std::error_code error;
  for (const char* file : {"labels.txt", "emotions.txt"}) {
    const std::string path = (folder / file).string();
    if (!fs::is_regular_file(path, error)) continue;
    ASSIGN_OR_RETURN(TextLines lines, TextLines::Open(path, "label names"));
    std::set<std::string> seen;
    for (std::string line; lines.Next(&line);) {
      const std::string name(absl::StripAsciiWhitespace(line));
      if (name.empty()) continue;
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", lines.line_number(), ": the label \"", Printable(name), "\" a second time"));
      }
      names.push_back(name);
    }
    RETURN_IF_ERROR(lines.status());
    if (names.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no label name"));
    return names;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "multilabel needs its label names: finetune.labels (comma-separated, in id order), or ",
      "labels.txt or emotions.txt (a name a line) beside ", beside));
}

Metrics MultiLabelMetrics(const std::vector<std::vector<float>>& probabilities,
                          const std::vector<LabeledText>& labels, double threshold) {
  const size_t classes = probabilities.empty() ? 0 : probabilities[0].size();
  std::vector<double> tp(classes, 0), predicted(classes, 0), actual(classes, 0);
  double exact = 0;
  for (size_t i = 0; i < labels.size() && i < probabilities.size(); ++i) {
    std::vector<bool> truth(classes, false);
    for (const int32_t k : labels[i].labels) truth[k] = true;
    bool all = true;
    for (size_t k = 0; k < classes; ++k) {
      const bool p = probabilities[i][k] >= threshold;
      tp[k] += p && truth[k];
      predicted[k] += p;
      actual[k] += truth[k];
      all = all && p == truth[k];
    }
    exact += all;
  }
  double all_tp = 0, all_predicted = 0, all_actual = 0, macro = 0;
  for (size_t k = 0; k < classes; ++k) {
    all_tp += tp[k];
    all_predicted += predicted[k];
    all_actual += actual[k];
    macro += F1Of(tp[k], predicted[k], actual[k]);
  }
  return {{"micro_f1", F1Of(all_tp, all_predicted, all_actual)},
          {"macro_f1", classes > 0 ? macro / static_cast<double>(classes) : 0.0},
          {"micro_precision", all_predicted > 0 ? all_tp / all_predicted : 0.0},
          {"micro_recall", all_actual > 0 ? all_tp / all_actual : 0.0},
          {"exact_match", labels.empty() ? 0.0 : exact / static_cast<double>(labels.size())}};
}

absl::StatusOr<std::unique_ptr<Task>> MakeMultiLabel(const TaskSetup& setup) {
  const FinetuneConfig& c = setup.finetune;
  RETURN_IF_ERROR(CheckOneFileOfEach(setup));
  ASSIGN_OR_RETURN(std::shared_ptr<const data::Tokenizer> tokenizer, FineTuningTokenizer(setup));
  const std::string& first =
      setup.training ? c.train_file : (c.eval_file.empty() ? c.predict_file : c.eval_file);
  ASSIGN_OR_RETURN(const std::vector<std::string> names, MultiLabelNames(c.labels, first));
  const auto classes = static_cast<int64_t>(names.size());
  std::unique_ptr<PackedSet> train_set;
  std::vector<PackedSet> evaluation;
  std::map<std::string, std::shared_ptr<const MultiLabelFile>> by_set;
  for (const auto& [name, key, path, labeled] :
       {std::tuple{"train", "finetune.train_file", c.train_file, true},
        std::tuple{"dev", "finetune.eval_file", c.eval_file, true},
        std::tuple{"predict", "finetune.predict_file", c.predict_file, false}}) {
    const bool train = std::string(name) == "train";
    if (path.empty() || (train && !setup.training)) continue;
    auto file = std::make_shared<MultiLabelFile>();
    file->labeled = labeled;
    ASSIGN_OR_RETURN(file->texts, ReadMultiLabel(path, labeled, classes));
    logging::Get("finetune")->info("{}: {} texts", path, file->texts.size());
    std::vector<GlueExample> examples;
    for (const LabeledText& t : file->texts) examples.push_back({t.text, "", 0, 0, t.line});
    std::vector<Feature> features = MakeGlueFeatures(examples, *tokenizer, c.SequenceLength());
    for (size_t i = 0; i < features.size(); ++i) features[i].label_set = file->texts[i].labels;
    ASSIGN_OR_RETURN(PackedSet set, PackFeatures(name, key, path, std::move(features), setup));
    set.labeled = labeled;
    if (train) {
      train_set = std::make_unique<PackedSet>(std::move(set));
      continue;
    }
    by_set[name] = std::move(file);
    evaluation.push_back(std::move(set));
  }
  FineTuning parts;
  parts.export_head.architecture = "BertForSequenceClassification";
  parts.export_head.labels = names;
  parts.export_head.problem_type = "multi_label_classification";
  const double threshold = c.threshold;
  parts.evaluate = [by_set, names, threshold](const PackedSet& set, const c10::Device& device) {
    return std::make_unique<MultiLabelEvaluation>(by_set.at(set.name), names, threshold, device);
  };
  return MakeMultiLabelTask(c.task, std::move(train_set), std::move(evaluation), std::move(parts),
                            classes);
}

std::unique_ptr<Task> MakeMultiLabelTask(std::string name, std::unique_ptr<PackedSet> train,
                                         std::vector<PackedSet> evaluation, FineTuning parts,
                                         int64_t labels) {
  return std::make_unique<MultiLabelTask>(std::move(name), std::move(train), std::move(evaluation),
                                          std::move(parts), labels);
}

}  // namespace pbert::tasks
