// A GLUE task as a task: the classifier (or STS-B's score) over the pairs
// of the task's TSV files (tasks/glue.h), each example's predicted class or
// score gathered into its row; a dev file scored with the task's metrics
// (MNLI's matched and mismatched both), a test file predicted into the
// benchmark's submission file.
#include <ATen/ATen.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "tasks/fine_tuning.h"

namespace pbert::tasks {
namespace {

// One file of the task: its examples, scored (a dev file) or predicted
// into the submission file `submission` (a test file).
struct GlueFile {
  std::vector<GlueExample> examples;
  bool labeled = true;
  std::string submission;  // "MNLI-m.tsv", ...
};

// Each example's predicted class (or score) in its row of an [F+1] tensor
// (the last row takes the unused slots).
class GlueEvaluation : public SetEvaluation {
 public:
  GlueEvaluation(const GlueTask& glue, std::shared_ptr<const GlueFile> file,
                 const c10::Device& device)
      : glue_(glue),
        file_(std::move(file)),
        gathered_(at::zeros({static_cast<int64_t>(file_->examples.size()) + 1},
                            at::TensorOptions().dtype(at::kFloat).device(device))) {}

  void Add(const Outputs& outputs, const model::Inputs& inputs) override {
    const at::Tensor& logits = outputs[0];  // [B,D,C]
    const at::Tensor predicted =
        glue_.regression() ? logits.select(-1, 0).to(at::kFloat) : logits.argmax(-1).to(at::kFloat);
    gathered_.index_copy_(0, inputs.task[kClassFeature].reshape({-1}), predicted.reshape({-1}));
  }
  const at::Tensor& Shared() const override { return gathered_; }
  absl::StatusOr<Scored> Score(const at::Tensor& summed) override {
    const at::Tensor host = summed.to(at::kCPU, at::kFloat).contiguous();
    const std::vector<float> predicted(host.data_ptr<float>(),
                                       host.data_ptr<float>() + file_->examples.size());
    Scored scored;
    scored.counts = {{"examples", static_cast<double>(file_->examples.size())}};
    if (!file_->labeled) {
      scored.files = {{file_->submission, SubmissionTsv(glue_, file_->examples, predicted)}};
      return scored;
    }
    std::vector<float> labels;
    for (const GlueExample& e : file_->examples) labels.push_back(e.label);
    scored.metrics = GlueMetrics(glue_, predicted, labels);
    return scored;
  }

 private:
  const GlueTask& glue_;
  std::shared_ptr<const GlueFile> file_;
  at::Tensor gathered_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> MakeGlue(const GlueTask& glue, const TaskSetup& setup) {
  auto log = logging::Get("finetune");
  const FinetuneConfig& c = setup.finetune;
  const bool mnli = std::string(glue.name) == "mnli";
  if (!mnli) RETURN_IF_ERROR(CheckOneFileOfEach(setup));
  ASSIGN_OR_RETURN(std::shared_ptr<const data::Tokenizer> tokenizer, FineTuningTokenizer(setup));
  const int length = c.SequenceLength();
  std::unique_ptr<PackedSet> train_set;
  if (setup.training) {
    ASSIGN_OR_RETURN(auto examples, ReadGlue(glue, c.train_file));
    log->info("{}: {} examples", c.train_file, examples.size());
    ASSIGN_OR_RETURN(PackedSet train,
                     PackFeatures("train", "finetune.train_file", c.train_file,
                                  MakeGlueFeatures(examples, *tokenizer, length), setup));
    train_set = std::make_unique<PackedSet>(std::move(train));
  }
  // The dev files, scored, and the test files, predicted.
  const std::string submission = glue.submission;
  std::vector<PackedSet> evaluation;
  std::map<std::string, std::shared_ptr<const GlueFile>> files;  // by set
  struct FileOf {
    const char* name;
    const char* key;
    const std::string& path;
    bool labeled;
    std::string submission;
  };
  for (const FileOf& f :
       {FileOf{"dev", "finetune.eval_file", c.eval_file, true, ""},
        FileOf{"mismatched", "finetune.eval_mismatched_file", c.eval_mismatched_file, true, ""},
        FileOf{"predict", "finetune.predict_file", c.predict_file, false,
               mnli ? "MNLI-m.tsv" : submission + ".tsv"},
        FileOf{"predict_mismatched", "finetune.predict_mismatched_file", c.predict_mismatched_file,
               false, "MNLI-mm.tsv"}}) {
    const auto& [name, key, path, labeled, tsv] = f;
    if (path.empty()) continue;
    auto file = std::make_shared<GlueFile>();
    ASSIGN_OR_RETURN(file->examples, ReadGlue(glue, path, labeled));
    file->labeled = labeled;
    file->submission = tsv;
    log->info("{}: {} examples", path, file->examples.size());
    ASSIGN_OR_RETURN(
        PackedSet set,
        PackFeatures(name, key, path, MakeGlueFeatures(file->examples, *tokenizer, length), setup));
    set.labeled = labeled;
    evaluation.push_back(std::move(set));
    files[name] = std::move(file);
  }
  FineTuning parts;
  parts.export_head.architecture = "BertForSequenceClassification";
  parts.export_head.problem_type =
      glue.regression() ? "regression" : "single_label_classification";
  for (const char* label : glue.labels) parts.export_head.labels.emplace_back(label);
  const GlueTask* task = &glue;
  parts.evaluate = [task, files](const PackedSet& set, const c10::Device& device) {
    return std::make_unique<GlueEvaluation>(*task, files.at(set.name), device);
  };
  return MakeClassTask(c.task, std::move(train_set), std::move(evaluation), std::move(parts),
                       glue.classes());
}

}  // namespace pbert::tasks
