// SQuAD as a task: the span head over the official files' features
// (tasks/squad.h), each dev feature's start and end logits gathered into
// its row, then answered and scored as run_squad.py and the official
// script do.
#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "tasks/fine_tuning.h"
#include "tasks/squad.h"

namespace pbert::tasks {
namespace {

std::vector<Feature> FeaturesOf(const SquadFeatures& squad) {
  std::vector<Feature> out;
  out.reserve(squad.features.size());
  for (const auto& f : squad.features) out.push_back(f.feature);
  return out;
}

// What answering a dev file needs: its questions, their features, the
// tokenizer and the options.
struct SquadDev {
  SquadSet set;
  SquadFeatures features;
  std::shared_ptr<const data::Tokenizer> tokenizer;
  SquadOptions options;
};

// Each feature's start and end logits over the row's S positions, in the
// feature's row of a [F+1, 2, S] tensor (the last row takes the padding
// sequences of static shapes).
class SquadEvaluation : public SetEvaluation {
 public:
  SquadEvaluation(std::shared_ptr<const SquadDev> dev, int64_t max_len, const c10::Device& device)
      : dev_(std::move(dev)),
        gathered_(at::zeros({static_cast<int64_t>(dev_->features.features.size()) + 1, 2, max_len},
                            at::TensorOptions().dtype(at::kFloat).device(device))) {}

  void Add(const Outputs& outputs, const model::Inputs& inputs) override {
    const int64_t L = outputs[0].size(1);
    const at::Tensor both = at::stack({outputs[0], outputs[1]}, 1).to(at::kFloat);  // [N,2,L]
    gathered_.narrow(2, 0, L).index_copy_(0, inputs.task[kSpanFeature], both);
  }
  const at::Tensor& Shared() const override { return gathered_; }
  absl::StatusOr<Scored> Score(const at::Tensor& summed) override {
    const at::Tensor host = summed.to(at::kCPU, at::kFloat).contiguous();
    std::vector<SpanLogits> spans;
    spans.reserve(dev_->features.features.size());
    for (size_t f = 0; f < dev_->features.features.size(); ++f) {
      const int64_t n = dev_->features.features[f].feature.sequence.length();
      const float* start = host[static_cast<int64_t>(f)][0].data_ptr<float>();
      const float* end = host[static_cast<int64_t>(f)][1].data_ptr<float>();
      spans.push_back({std::vector<float>(start, start + n), std::vector<float>(end, end + n)});
    }
    ASSIGN_OR_RETURN(SquadPredictions answers,
                     PredictAnswers(dev_->set, dev_->features, spans, *dev_->tokenizer,
                                    dev_->options));
    const SquadScore score = ScoreSquad(dev_->set, answers);
    Scored scored;
    scored.metrics = {{"exact_match", score.exact_match}, {"f1", score.f1}};
    scored.counts = {{"questions", static_cast<double>(score.questions)}};
    scored.files = {{"predictions.json", PredictionsJson(answers)}};
    return scored;
  }

 private:
  std::shared_ptr<const SquadDev> dev_;
  at::Tensor gathered_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> MakeSquad(const TaskSetup& setup) {
  auto log = logging::Get("finetune");
  const FinetuneConfig& c = setup.finetune;
  ASSIGN_OR_RETURN(std::shared_ptr<const data::Tokenizer> tokenizer, FineTuningTokenizer(setup));
  const int length = c.SequenceLength();
  SquadOptions options = c.squad;
  options.max_seq_length = length;
  FineTuning parts;
  std::unique_ptr<PackedSet> train_set;
  std::vector<PackedSet> evaluation;
  parts.head = HeadKind::kSpan;
  parts.export_head = {"BertForQuestionAnswering", {}, false};
  if (setup.training) {
    ASSIGN_OR_RETURN(SquadSet set, ReadSquad(c.train_file));
    ASSIGN_OR_RETURN(SquadFeatures features,
                     MakeSquadFeatures(set, *tokenizer, options, /*training=*/true));
    log->info("{}: {} questions, {} features of at most {} tokens{}{}", c.train_file,
              set.examples.size(), features.features.size(), length,
              features.unanswerable > 0
                  ? absl::StrCat("; ", features.unanswerable,
                                 " questions left out whose answer their words do not hold")
                  : "",
              features.truncated_questions > 0
                  ? absl::StrCat("; ", features.truncated_questions, " questions cut")
                  : "");
    ASSIGN_OR_RETURN(PackedSet train, PackFeatures("train", "finetune.train_file", c.train_file,
                                                   FeaturesOf(features), setup));
    train_set = std::make_unique<PackedSet>(std::move(train));
  }
  auto dev = std::make_shared<SquadDev>();
  ASSIGN_OR_RETURN(dev->set, ReadSquad(c.eval_file));
  ASSIGN_OR_RETURN(dev->features, MakeSquadFeatures(dev->set, *tokenizer, options, false));
  dev->tokenizer = tokenizer;
  dev->options = options;
  log->info("{}: {} questions, {} features", c.eval_file, dev->set.examples.size(),
            dev->features.features.size());
  ASSIGN_OR_RETURN(PackedSet eval, PackFeatures("dev", "finetune.eval_file", c.eval_file,
                                                FeaturesOf(dev->features), setup));
  evaluation.push_back(std::move(eval));
  std::shared_ptr<const SquadDev> shared = dev;
  parts.evaluate = [shared, length](const PackedSet&, const c10::Device& device) {
    return std::make_unique<SquadEvaluation>(shared, length, device);
  };
  return MakeFineTuningTask(c.task, std::move(train_set), std::move(evaluation),
                            std::move(parts));
}

}  // namespace pbert::tasks
