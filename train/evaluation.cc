#include "train/evaluation.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "model/attention.h"
#include "model/config.h"
#include "model/weights.h"
#include "tasks/pretraining.h"
#include "tasks/tasks.h"
#include "train/checkpointer.h"

namespace pbert::train {

Evaluation::Evaluation(std::vector<std::unique_ptr<Evaluator>> evaluators,
                       const EvaluationOptions& options)
    : options_(options) {
  for (auto& evaluator : evaluators) {
    (evaluator->set().labeled ? scored_ : predicted_).push_back(std::move(evaluator));
  }
  state_.next_samples = options.every_samples;
}

uint64_t Evaluation::sequences() const {
  uint64_t n = 0;
  for (const auto& evaluator : scored_) n += evaluator->sequences();
  return n;
}

absl::StatusOr<tasks::Scored> Evaluation::Run(torch::nn::Module& model,
                                              distributed::Communicator& communicator,
                                              uint64_t samples) {
  tasks::Scored all;
  for (size_t i = 0; i < scored_.size(); ++i) {
    ASSIGN_OR_RETURN(tasks::Scored scored, scored_[i]->Run(model, communicator));
    const std::string prefix = i == 0 ? "" : absl::StrCat(scored_[i]->set().name, "_");
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

absl::StatusOr<tasks::Scored> Evaluation::Predict(torch::nn::Module& model,
                                                  distributed::Communicator& communicator) const {
  tasks::Scored all;
  for (const auto& predictor : predicted_) {
    ASSIGN_OR_RETURN(tasks::Scored predicted, predictor->Run(model, communicator));
    const std::string& name = predictor->set().name;
    for (const auto& [count, value] : predicted.counts) {
      all.counts.emplace_back(absl::StrCat(name, "_", count), value);
    }
    for (auto& file : predicted.files) all.files.push_back(std::move(file));
  }
  return all;
}

absl::StatusOr<model::Precision> EvaluationPrecision(const model::ModelConfig& model,
                                                     const c10::Device& device) {
  RETURN_IF_ERROR(model::CheckVarlenKernel(model.bert, device));
  model::Precision configured = model.precision;
  if (configured == model::Precision::kFp8) {
    logging::Get("eval")->warn(
        "model.precision fp8: the weights are evaluated in bf16 (a run's fp8 scales belong to "
        "its checkpoints' training state, not to its weights)");
    configured = model::Precision::kBf16;
  }
  return model::ResolvePrecision(configured, device);
}

absl::StatusOr<WeightsEvaluation> EvaluateWeights(const tasks::Task& task, const std::string& path,
                                                  const model::BertOptions& bert,
                                                  model::Precision precision,
                                                  const c10::Device& device,
                                                  const data::LoaderOptions& options,
                                                  distributed::Communicator& communicator) {
  std::vector<std::unique_ptr<Evaluator>> evaluators;
  for (const tasks::PackedSet& set : task.evaluation()) {
    evaluators.push_back(std::make_unique<Evaluator>(task, set, options, bert, precision, device));
  }
  Evaluation evaluation(std::move(evaluators), {});
  // Weights that say what they were trained for are evaluated only as that.
  const std::string trained_for = TaskOfWeights(path);
  const auto pretraining = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds pretraining weights, not a model fine-tuned for ", task.name(),
                     ": fine-tune them first (--init ", path, "), then evaluate the run's model"));
  };
  const tasks::WeightsOrigin origin = task.OriginOf(trained_for);
  if (origin == tasks::WeightsOrigin::kPretraining) return pretraining();
  if (origin == tasks::WeightsOrigin::kOtherTask) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a model fine-tuned for ", trained_for, ", not for ", task.name(),
                     ": evaluate it as ", trained_for, " (finetune.task), or fine-tune it for ",
                     task.name(), " first (--init)"));
  }
  tasks::TaskModel model;
  try {
    model = task.MakeModel(bert);
    // (A model for SQuAD has no use for the pooler, which its export leaves out.)
    const absl::Status loaded = LoadVerifiedWeights(
        path, *model.module, [&task](const std::string& name) { return task.Trains(name); });
    if (!loaded.ok()) {
      if (auto weights = model::ReadWeights(path); weights.ok()) {
        for (const auto& [name, tensor] : weights->tensors) {
          if (tasks::IsPretrainingHead(name)) return pretraining();
        }
      }
    }
    RETURN_IF_ERROR(loaded);
    model.module->to(device);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("cannot build the model on ", device.str(), ": ", FirstLine(e)));
  }
  WeightsEvaluation out;
  ASSIGN_OR_RETURN(out.scored, evaluation.Run(*model.module, communicator, 0));
  ASSIGN_OR_RETURN(out.predicted, evaluation.Predict(*model.module, communicator));
  return out;
}

}  // namespace pbert::train
