// A GLUE task as a task: the classifier (or STS-B's score) over the pairs
// of the task's TSV files (tasks/glue.h), each dev example's predicted
// class or score gathered into its row, then scored with the task's
// metrics.
#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "tasks/fine_tuning.h"

namespace pbert::tasks {
namespace {

// Each example's predicted class (or score) in its row of an [F+1] tensor
// (the last row takes the unused slots).
class GlueEvaluation : public SetEvaluation {
 public:
  GlueEvaluation(const GlueTask& glue, std::shared_ptr<const std::vector<float>> labels,
                 const c10::Device& device)
      : glue_(glue),
        labels_(std::move(labels)),
        gathered_(at::zeros({static_cast<int64_t>(labels_->size()) + 1},
                            at::TensorOptions().dtype(at::kFloat).device(device))) {}

  void Add(const Outputs& outputs, const model::Inputs& inputs) override {
    const at::Tensor& logits = outputs[0];  // [B,D,C]
    const at::Tensor predicted = glue_.regression() ? logits.select(-1, 0).to(at::kFloat)
                                                    : logits.argmax(-1).to(at::kFloat);
    gathered_.index_copy_(0, inputs.task[kClassFeature].reshape({-1}), predicted.reshape({-1}));
  }
  const at::Tensor& Shared() const override { return gathered_; }
  absl::StatusOr<Scored> Score(const at::Tensor& summed) override {
    const at::Tensor host = summed.to(at::kCPU, at::kFloat).contiguous();
    const std::vector<float> predicted(host.data_ptr<float>(),
                                       host.data_ptr<float>() + labels_->size());
    Scored scored;
    scored.metrics = GlueMetrics(glue_, predicted, *labels_);
    scored.counts = {{"examples", static_cast<double>(labels_->size())}};
    return scored;
  }

 private:
  const GlueTask& glue_;
  std::shared_ptr<const std::vector<float>> labels_;
  at::Tensor gathered_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> MakeGlue(const GlueTask& glue, const TaskSetup& setup) {
  auto log = logging::Get("finetune");
  const FinetuneConfig& c = setup.finetune;
  ASSIGN_OR_RETURN(std::shared_ptr<const data::Tokenizer> tokenizer, FineTuningTokenizer(setup));
  const int length = c.SequenceLength();
  FineTuning parts;
  std::unique_ptr<PackedSet> train_set;
  std::vector<PackedSet> evaluation;
  parts.head = glue.regression() ? HeadKind::kScore : HeadKind::kClasses;
  parts.labels = glue.classes();
  parts.export_head.architecture = "BertForSequenceClassification";
  parts.export_head.regression = glue.regression();
  for (const char* label : glue.labels) parts.export_head.labels.emplace_back(label);
  if (setup.training) {
    ASSIGN_OR_RETURN(auto examples, ReadGlue(glue, c.train_file));
    log->info("{}: {} examples", c.train_file, examples.size());
    ASSIGN_OR_RETURN(PackedSet train,
                     PackFeatures("train", "finetune.train_file", c.train_file,
                                  MakeGlueFeatures(examples, *tokenizer, length), setup));
    train_set = std::make_unique<PackedSet>(std::move(train));
  }
  ASSIGN_OR_RETURN(auto examples, ReadGlue(glue, c.eval_file));
  log->info("{}: {} examples", c.eval_file, examples.size());
  auto labels = std::make_shared<std::vector<float>>();
  for (const auto& e : examples) labels->push_back(e.label);
  ASSIGN_OR_RETURN(PackedSet eval,
                   PackFeatures("dev", "finetune.eval_file", c.eval_file,
                                MakeGlueFeatures(examples, *tokenizer, length), setup));
  evaluation.push_back(std::move(eval));
  std::shared_ptr<const std::vector<float>> shared = labels;
  const GlueTask* task = &glue;
  parts.evaluate = [task, shared](const PackedSet&, const c10::Device& device) {
    return std::make_unique<GlueEvaluation>(*task, shared, device);
  };
  return MakeFineTuningTask(c.task, std::move(train_set), std::move(evaluation),
                            std::move(parts));
}

}  // namespace pbert::tasks
