#include "train/evaluation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "train/checkpointer.h"

namespace pbert::train {

Evaluation::Evaluation(std::vector<std::unique_ptr<Evaluator>> evaluators,
                       const EvaluationOptions& options)
    : evaluators_(std::move(evaluators)), options_(options) {
  state_.next_samples = options.every_samples;
}

uint64_t Evaluation::sequences() const {
  uint64_t n = 0;
  for (const auto& evaluator : evaluators_) n += evaluator->sequences();
  return n;
}

absl::StatusOr<tasks::Scored> Evaluation::Run(torch::nn::Module& model,
                                              distributed::Communicator& communicator,
                                              uint64_t samples) {
  tasks::Scored all;
  for (size_t i = 0; i < evaluators_.size(); ++i) {
    ASSIGN_OR_RETURN(tasks::Scored scored, evaluators_[i]->Run(model, communicator));
    const std::string prefix = i == 0 ? "" : absl::StrCat(evaluators_[i]->set().name, "_");
    for (const auto& [name, value] : scored.metrics) all.metrics.emplace_back(prefix + name, value);
    for (const auto& [name, value] : scored.counts) all.counts.emplace_back(prefix + name, value);
    for (auto& [name, text] : scored.files) all.files.emplace_back(prefix + name, std::move(text));
  }
  if (all.metrics.empty()) return all;
  const double score = options_.target_metric.empty()
                           ? all.metrics.front().second
                           : tasks::MetricOf(all.metrics, options_.target_metric);
  state_.evaluations += 1;
  state_.last_score = score;
  state_.best_score = state_.evaluations == 1 ? score : std::max(state_.best_score, score);
  state_.metrics = all.metrics;
  if (!options_.target_metric.empty() && score >= options_.target &&
      state_.samples_to_target == 0) {
    state_.samples_to_target = samples;
  }
  if (options_.every_samples > 0) {
    while (state_.next_samples <= samples) state_.next_samples += options_.every_samples;
  }
  return all;
}

absl::StatusOr<model::Precision> EvaluationPrecision(model::Precision configured,
                                                     const c10::Device& device) {
  if (configured == model::Precision::kFp8) {
    logging::Get("eval")->warn(
        "model.precision fp8: the weights are evaluated in bf16 (a run's fp8 scales belong to "
        "its checkpoints' training state, not to its weights)");
    configured = model::Precision::kBf16;
  }
  return model::ResolvePrecision(configured, device);
}

absl::StatusOr<tasks::Scored> EvaluateWeights(const tasks::Task& task, const std::string& path,
                                              const model::BertOptions& bert,
                                              model::Precision precision, const c10::Device& device,
                                              const data::LoaderOptions& options,
                                              distributed::Communicator& communicator) {
  std::vector<std::unique_ptr<Evaluator>> evaluators;
  for (const tasks::PackedSet& set : task.evaluation()) {
    evaluators.push_back(std::make_unique<Evaluator>(task, set, options, bert, precision, device));
  }
  Evaluation evaluation(std::move(evaluators), {});
  tasks::TaskModel model;
  try {
    model = task.MakeModel(bert);
    RETURN_IF_ERROR(LoadVerifiedWeights(path, *model.module));
    model.module->to(device);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot build the model on ", device.str(), ": ",
                                            FirstLine(e)));
  }
  return evaluation.Run(*model.module, communicator, 0);
}

}  // namespace pbert::train
