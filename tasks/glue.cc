#include "tasks/glue.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/text_lines.h"

namespace pbert::tasks {
namespace {

const std::vector<GlueTask>& AllTasks() {
  static const auto* tasks = new std::vector<GlueTask>{
      {"cola", "sentence", "", "label", {"0", "1"}, {"mcc", "accuracy"}, "CoLA"},
      {"sst2", "sentence", "", "label", {"0", "1"}, {"accuracy"}, "SST-2"},
      {"mrpc", "#1 String", "#2 String", "Quality", {"0", "1"}, {"f1", "accuracy"}, "MRPC"},
      {"stsb", "sentence1", "sentence2", "score", {}, {"pearson", "spearman"}, "STS-B"},
      {"qqp", "question1", "question2", "is_duplicate", {"0", "1"}, {"f1", "accuracy"}, "QQP"},
      {"mnli",
       "sentence1",
       "sentence2",
       "gold_label",
       {"contradiction", "entailment", "neutral"},
       {"accuracy"},
       "MNLI"},
      {"qnli",
       "question",
       "sentence",
       "label",
       {"entailment", "not_entailment"},
       {"accuracy"},
       "QNLI"},
      {"rte",
       "sentence1",
       "sentence2",
       "label",
       {"entailment", "not_entailment"},
       {"accuracy"},
       "RTE"},
      {"wnli", "sentence1", "sentence2", "label", {"0", "1"}, {"accuracy"}, "WNLI"},
  };
  return *tasks;
}

// Average ranks (1-based), ties sharing the mean of their ranks.
std::vector<double> Ranks(const std::vector<float>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

double Pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  if (x.size() < 2) return std::nan("");
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0 || syy == 0) return std::nan("");
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

// A header's columns for a message: the first eight, each cut at 40
// characters (another file's first line may be anything).
std::string HeaderNames(const std::vector<std::string>& header) {
  std::vector<std::string> names;
  for (const std::string& name : header) {
    names.push_back(absl::StrCat("\"", name.size() > 40 ? name.substr(0, 40) + "..." : name, "\""));
  }
  return NameList(names);
}

}  // namespace

absl::Span<const GlueTask> GlueTasks() { return AllTasks(); }

const GlueTask* FindGlueTask(const std::string& name) {
  for (const auto& task : AllTasks()) {
    if (name == task.name) return &task;
  }
  return nullptr;
}

namespace {

// Where a file's columns are: its header's, or CoLA's own (source, label,
// mark, sentence).
struct GlueColumns {
  int first = 3, second = -1, label = 1, index = -1;
  size_t count = 4;
  bool headerless = false;         // CoLA's layout
  bool numbered = false;           // predicted in file order (no index column)
  bool header_is_example = false;  // a labeled CoLA file given to predict
};

// The columns of `header` (the first line of `path`, where `where` names
// it) for `task`: those it lacks named, a label column in a file to
// predict said so.
absl::StatusOr<GlueColumns> ColumnsOf(const GlueTask& task, const std::vector<std::string>& header,
                                      bool labeled, const std::string& path,
                                      const std::string& where) {
  GlueColumns c;
  c.count = header.size();
  if (!labeled && std::string(task.name) == "cola" && c.count == 4 &&
      (header[1] == "0" || header[1] == "1") &&
      std::find(header.begin(), header.end(), "sentence") == header.end()) {
    logging::Get("finetune")
        ->warn(
            "{}: a labeled CoLA file (no header; source, label, mark, sentence): predicted "
            "in file order (index 0, 1, ...), its labels not scored (a dev file to score is "
            "finetune.eval_file)",
            path);
    c.headerless = c.numbered = c.header_is_example = true;
    return c;
  }
  auto find = [&](const char* name) {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  c.first = find(task.first);
  c.second = *task.second ? find(task.second) : -1;
  c.label = find(task.label);
  c.index = find("index") >= 0 ? find("index") : find("id");
  std::vector<std::string> missing;
  if (c.first < 0) missing.push_back(task.first);
  if (*task.second && c.second < 0) missing.push_back(task.second);
  if (labeled && c.label < 0) missing.push_back(task.label);
  c.numbered = !labeled && c.index < 0 && c.label >= 0;
  if (!labeled && c.index < 0 && !c.numbered) missing.push_back("index");
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the header has no column \"", absl::StrJoin(missing, "\", \""), "\" of task ",
        task.name, " (it has ", HeaderNames(header), "): ",
        labeled ? "is it another task's file, or a test file without labels (predict it with "
                  "finetune.predict_file)?"
                : "is it another task's file?"));
  }
  if (!labeled && c.label >= 0) {
    logging::Get("finetune")
        ->warn(
            "{}: has a label column \"{}\": predicted{}, its labels not scored (a dev file to "
            "score is finetune.eval_file)",
            path, task.label, c.numbered ? " in file order (no index column: 0, 1, ...)" : "");
  }
  return c;
}

bool IsWholeNumber(const std::string& value) {
  return !value.empty() && std::all_of(value.begin(), value.end(), absl::ascii_isdigit);
}

// The label of `value`: a class's index, or a score (decimal notation
// only, no hexadecimal, inf or nan; finite as the float it is trained as).
absl::StatusOr<float> LabelOf(const GlueTask& task, const std::string& value) {
  if (task.regression()) {
    double score = 0;
    const bool decimal =
        !value.empty() && value.find_first_not_of("0123456789.eE+-") == std::string::npos;
    if (!decimal || !absl::SimpleAtod(value, &score) || !std::isfinite(static_cast<float>(score))) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", task.label, " \"", value,
                       "\" is not a number a float holds (decimal notation, within +-3.4e38)"));
    }
    return static_cast<float>(score);
  }
  auto it = std::find(task.labels.begin(), task.labels.end(), value);
  if (it == task.labels.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown label \"", value, "\" (", task.name,
                                                   "'s are \"", absl::StrJoin(task.labels, "\", \""),
                                                   "\")"));
  }
  return static_cast<float>(it - task.labels.begin());
}

// The example of a line's `fields` in columns `c` (the `n`th of a file
// predicted in file order).
absl::StatusOr<GlueExample> ExampleOf(const GlueTask& task, const GlueColumns& c, bool labeled,
                                      const std::vector<std::string>& fields, size_t n) {
  if (fields.size() != c.count) {
    return absl::InvalidArgumentError(absl::StrCat(
        fields.size(), " tab-separated columns, not the ", c.count,
        c.headerless ? " of a CoLA file (source, label, mark, sentence)" : " of its header"));
  }
  GlueExample example;
  example.first = fields[c.first];
  if (c.second >= 0) example.second = fields[c.second];
  if (c.numbered) {
    example.index = static_cast<int64_t>(n);
  } else if (!labeled) {
    const std::string& value = fields[c.index];
    if (!IsWholeNumber(value) || !absl::SimpleAtoi(value, &example.index)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the index \"", value, "\" is not a whole number"));
    }
  } else {
    ASSIGN_OR_RETURN(example.label, LabelOf(task, fields[c.label]));
  }
  return example;
}

}  // namespace

absl::StatusOr<std::vector<GlueExample>> ReadGlue(const GlueTask& task, const std::string& path,
                                                  bool labeled) {
  ASSIGN_OR_RETURN(TextLines lines, TextLines::Open(path, absl::StrCat(task.name, " file")));
  std::string line;
  auto where = [&] { return absl::StrCat(path, ": line ", lines.line_number()); };
  auto next = [&] {
    if (!lines.Next(&line)) return false;
    if (lines.line_number() == 1 && absl::StartsWith(line, "\xEF\xBB\xBF")) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  GlueColumns c;  // CoLA's train and dev files alone have no header (its test file has)
  c.headerless = labeled && std::string(task.name) == "cola";
  if (!c.headerless) {
    if (!next()) {
      RETURN_IF_ERROR(lines.status());
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": empty (a ", task.name, " file starts with a header line)"));
    }
    ASSIGN_OR_RETURN(c, ColumnsOf(task, absl::StrSplit(line, '\t'), labeled, path, where()));
  }
  std::vector<GlueExample> examples;
  std::unordered_map<int64_t, uint64_t> index_lines;  // a test file's index: its line
  while (std::exchange(c.header_is_example, false) || next()) {
    auto example = ExampleOf(task, c, labeled, absl::StrSplit(line, '\t'), examples.size());
    if (!example.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": ", example.status().message()));
    }
    example->line = lines.line_number();
    // One prediction an index: a second would stand twice in the submission.
    if (!labeled && !c.numbered) {
      if (const auto [at, added] = index_lines.emplace(example->index, example->line); !added) {
        return absl::InvalidArgumentError(absl::StrCat(where(), ": the index ", example->index,
                                                       " is line ", at->second,
                                                       "'s too; each example needs its own"));
      }
    }
    examples.push_back(std::move(*example));
  }
  RETURN_IF_ERROR(lines.status());
  if (examples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": holds no example"));
  }
  return examples;
}

std::string SubmissionTsv(const GlueTask& task, const std::vector<GlueExample>& examples,
                          const std::vector<float>& predictions) {
  std::string out = "index\tprediction\n";
  for (size_t i = 0; i < examples.size(); ++i) {
    const float p = predictions[i];
    absl::StrAppend(&out, examples[i].index, "\t",
                    task.regression() ? absl::StrFormat("%.9g", p)
                                      : std::string(task.labels[static_cast<size_t>(p)]),
                    "\n");
  }
  return out;
}

std::vector<Feature> MakeGlueFeatures(const std::vector<GlueExample>& examples,
                                      const data::Tokenizer& tokenizer, int max_seq_length) {
  const data::SpecialTokens& special = tokenizer.vocabulary().special();
  std::vector<Feature> features;
  features.reserve(examples.size());
  for (const GlueExample& example : examples) {
    std::vector<int32_t> a = tokenizer.Encode(example.first);
    std::vector<int32_t> b = tokenizer.Encode(example.second);
    const bool pair = !example.second.empty();
    const size_t room = static_cast<size_t>(max_seq_length - (pair ? 3 : 2));
    while (a.size() + b.size() > room) (a.size() > b.size() ? a : b).pop_back();
    Feature f;
    data::Instance& s = f.sequence;
    s.input_ids.push_back(special.cls);
    s.input_ids.insert(s.input_ids.end(), a.begin(), a.end());
    s.input_ids.push_back(special.sep);
    s.segment_ids.assign(s.input_ids.size(), 0);
    if (pair) {
      s.input_ids.insert(s.input_ids.end(), b.begin(), b.end());
      s.input_ids.push_back(special.sep);
      s.segment_ids.resize(s.input_ids.size(), 1);
    }
    f.label = example.label;
    features.push_back(std::move(f));
  }
  return features;
}

double Accuracy(const std::vector<float>& predictions, const std::vector<float>& labels) {
  if (labels.empty()) return 0;
  size_t right = 0;
  for (size_t i = 0; i < labels.size(); ++i) right += predictions[i] == labels[i];
  return static_cast<double>(right) / static_cast<double>(labels.size());
}

double BinaryF1(const std::vector<float>& predictions, const std::vector<float>& labels) {
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const bool p = predictions[i] == 1, t = labels[i] == 1;
    tp += p && t;
    fp += p && !t;
    fn += !p && t;
  }
  return tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn);
}

double MatthewsCorrelation(const std::vector<float>& predictions,
                           const std::vector<float>& labels) {
  // sklearn's multiclass form: from the confusion matrix's sums.
  std::map<float, double> t_sum, p_sum;
  double correct = 0;
  const double n = static_cast<double>(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    t_sum[labels[i]] += 1;
    p_sum[predictions[i]] += 1;
    correct += predictions[i] == labels[i];
  }
  double tp = 0, tt = 0, pp = 0;
  for (const auto& [k, v] : t_sum) {
    tt += v * v;
    auto it = p_sum.find(k);
    if (it != p_sum.end()) tp += v * it->second;
  }
  for (const auto& [k, v] : p_sum) pp += v * v;
  const double cov_ytyp = correct * n - tp, cov_ypyp = n * n - pp, cov_ytyt = n * n - tt;
  if (cov_ypyp * cov_ytyt == 0) return 0.0;
  return cov_ytyp / std::sqrt(cov_ytyt * cov_ypyp);
}

double PearsonCorrelation(const std::vector<float>& x, const std::vector<float>& y) {
  return Pearson(std::vector<double>(x.begin(), x.end()), std::vector<double>(y.begin(), y.end()));
}

double SpearmanCorrelation(const std::vector<float>& x, const std::vector<float>& y) {
  return Pearson(Ranks(x), Ranks(y));
}

std::vector<std::pair<std::string, double>> GlueMetrics(const GlueTask& task,
                                                        const std::vector<float>& predictions,
                                                        const std::vector<float>& labels) {
  std::vector<std::pair<std::string, double>> out;
  for (const std::string metric : task.metrics) {
    double value = 0;
    if (metric == "accuracy") value = Accuracy(predictions, labels);
    if (metric == "f1") value = BinaryF1(predictions, labels);
    if (metric == "mcc") value = MatthewsCorrelation(predictions, labels);
    if (metric == "pearson") value = PearsonCorrelation(predictions, labels);
    if (metric == "spearman") value = SpearmanCorrelation(predictions, labels);
    out.emplace_back(metric, value);
  }
  return out;
}

}  // namespace pbert::tasks
