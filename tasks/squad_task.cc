// SQuAD (1.1, or 2.0 with finetune.version_2_with_negative) as a task: the
// span head over the official files' features (tasks/squad.h), each
// feature's start and end logits gathered into its row, then answered as
// run_squad.py answers (predictions.json, nbest_predictions.json, 2.0's
// null_odds.json) and, for a dev file, scored as the official script
// scores.
#include <ATen/ATen.h>

#include <map>
#include <tuple>

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

// What answering a file needs: its questions, their features, the
// tokenizer and the options.
struct SquadDev {
  SquadSet set;
  SquadFeatures features;
  std::shared_ptr<const data::Tokenizer> tokenizer;
  SquadOptions options;
  bool labeled = true;  // a dev file to score (false: questions to predict)
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
    ASSIGN_OR_RETURN(SquadPredictions answers, PredictAnswers(dev_->set, dev_->features, spans,
                                                              *dev_->tokenizer, dev_->options));
    Scored scored;
    scored.files = {{"predictions.json", PredictionsJson(answers)},
                    {"nbest_predictions.json", NbestJson(answers)}};
    if (dev_->options.version_2_with_negative) {
      scored.files.emplace_back("null_odds.json", NullOddsJson(answers));
    }
    scored.counts = {{"questions", static_cast<double>(answers.size())}};
    if (!dev_->labeled) return scored;
    const SquadScore s = ScoreSquad(dev_->set, answers);
    scored.metrics = {{"exact_match", s.exact_match}, {"f1", s.f1}};
    if (dev_->options.version_2_with_negative) {
      // evaluate-v2.0.py's names, with the null odds as its --na-prob-file.
      scored.metrics.insert(scored.metrics.end(), {{"HasAns_exact", s.has_answer_exact},
                                                   {"HasAns_f1", s.has_answer_f1},
                                                   {"NoAns_exact", s.no_answer_exact},
                                                   {"NoAns_f1", s.no_answer_f1},
                                                   {"best_exact", s.best_exact},
                                                   {"best_exact_thresh", s.best_exact_thresh},
                                                   {"best_f1", s.best_f1},
                                                   {"best_f1_thresh", s.best_f1_thresh}});
    }
    return scored;
  }

 private:
  std::shared_ptr<const SquadDev> dev_;
  at::Tensor gathered_;
};

// The set of SQuAD file `path` (named by `key`), read as `reading` says,
// its features packed; and what answering it needs, into `dev`.
absl::StatusOr<PackedSet> SquadSetOf(const std::string& name, const std::string& key,
                                     const std::string& path, const SquadReading& reading,
                                     const TaskSetup& setup, SquadDev* dev) {
  ASSIGN_OR_RETURN(dev->set, ReadSquad(path, reading));
  ASSIGN_OR_RETURN(dev->features, MakeSquadFeatures(dev->set, *dev->tokenizer, dev->options,
                                                    /*training=*/false));
  dev->labeled = reading.answers;
  logging::Get("finetune")
      ->info("{}: {} questions, {} features", path, dev->set.examples.size(),
             dev->features.features.size());
  ASSIGN_OR_RETURN(PackedSet set, PackFeatures(name, key, path, FeaturesOf(dev->features), setup));
  set.labeled = reading.answers;
  return set;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> MakeSquad(const TaskSetup& setup) {
  auto log = logging::Get("finetune");
  const FinetuneConfig& c = setup.finetune;
  ASSIGN_OR_RETURN(std::shared_ptr<const data::Tokenizer> tokenizer, FineTuningTokenizer(setup));
  const int length = c.SequenceLength();
  SquadOptions options = c.squad;
  options.max_seq_length = length;
  const bool v2 = options.version_2_with_negative;
  std::unique_ptr<PackedSet> train_set;
  if (setup.training) {
    ASSIGN_OR_RETURN(SquadSet set, ReadSquad(c.train_file, {v2, true}));
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
  // The dev file, scored; the file to predict (questions without answers).
  std::vector<PackedSet> evaluation;
  std::map<std::string, std::shared_ptr<const SquadDev>> devs;  // by set
  for (const auto& [name, key, path, answers] :
       {std::tuple{"dev", "finetune.eval_file", c.eval_file, true},
        std::tuple{"predict", "finetune.predict_file", c.predict_file, false}}) {
    if (path.empty()) continue;
    auto dev = std::make_shared<SquadDev>();
    dev->tokenizer = tokenizer;
    dev->options = options;
    ASSIGN_OR_RETURN(PackedSet set, SquadSetOf(name, key, path, {v2, answers}, setup, dev.get()));
    evaluation.push_back(std::move(set));
    devs[name] = std::move(dev);
  }
  FineTuning parts;
  parts.export_head.architecture = "BertForQuestionAnswering";
  parts.export_head.pooler = false;
  parts.evaluate = [devs, length](const PackedSet& set, const c10::Device& device) {
    return std::make_unique<SquadEvaluation>(devs.at(set.name), length, device);
  };
  return MakeSpanTask(c.task, std::move(train_set), std::move(evaluation), std::move(parts));
}

}  // namespace pbert::tasks
