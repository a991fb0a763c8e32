#include "train/finetune_step.h"

#include <ATen/ATen.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pbert::train {

using tasks::HeadKind;

TaskModel::TaskModel(const model::BertOptions& options, HeadKind head, int64_t labels)
    : head_(head) {
  if (head == HeadKind::kSpan) {
    qa_ = model::BertForQuestionAnswering(options);
  } else {
    classifier_ = model::BertForSequenceClassification(options, labels);
  }
}

torch::nn::Module& TaskModel::module() {
  return qa_ ? static_cast<torch::nn::Module&>(*qa_) : *classifier_;
}

model::BertModel& TaskModel::bert() { return qa_ ? qa_->bert : classifier_->bert; }

torch::OrderedDict<std::string, at::Tensor> TaskModel::trained() {
  torch::OrderedDict<std::string, at::Tensor> out;
  for (const auto& p : module().named_parameters()) {
    if (qa_ && p.key().rfind("bert.pooler.", 0) == 0) continue;
    out.insert(p.key(), p.value());
  }
  return out;
}

TaskModel::Output TaskModel::Run(const MicroBatch& batch, const tasks::TaskBatch& targets,
                                 const model::InputPlan& plan) {
  Output out;
  const c10::Device& device = plan.device;
  if (qa_) {
    const model::SequenceTokens host =
        tasks::TokensOf(targets.batch, plan.attention == model::AttentionKind::kVarlen);
    // Host numbers to the device without a wait (model::HostToDevice).
    const model::SequenceTokens tokens{model::HostToDevice(host.token, device),
                                       model::HostToDevice(host.valid, device)};
    out.spans = qa_->forward(batch.inputs, tokens);
    out.sums = tasks::SpanSums(out.spans, model::HostToDevice(targets.start, device),
                               model::HostToDevice(targets.end, device));
  } else {
    out.classes = classifier_->forward(batch.inputs);
    out.sums = tasks::ClassSums(out.classes, model::HostToDevice(targets.labels, device),
                                batch.inputs.nsp_valid, head_);
  }
  return out;
}

std::unique_ptr<optim::Lamb> MakeFinetuneOptimizer(TaskModel& task,
                                                   const optim::LambOptions& options,
                                                   tasks::FinetuneOptimizer kind, bool fused) {
  auto groups = optim::BertParamGroups(task.trained(), options, /*exclude_from_trust_ratio=*/true);
  if (kind == tasks::FinetuneOptimizer::kAdamW) {
    for (auto& group : groups) static_cast<optim::LambOptions&>(group.options()).trust_ratio(false);
  }
  auto optimizer = std::make_unique<optim::Lamb>(std::move(groups), options);
  optimizer->UseFusedKernels(fused);
  return optimizer;
}

absl::StatusOr<FinetuneStepResult> FinetuneStep(TaskModel& task, optim::Lamb& optimizer,
                                                const StepShare& share,
                                                const model::InputPlan& plan,
                                                model::Precision precision, double lr,
                                                double max_grad_norm,
                                                const model::Randomness& randomness,
                                                distributed::Communicator& communicator) {
  FinetuneStepResult result;
  try {
    task.module().train();
    model::Randomness::Step random(randomness);
    std::vector<at::Tensor> parameters;
    for (const auto& p : task.trained()) {
      parameters.push_back(p.value());
      parameters.back().mutable_grad() = at::Tensor();
    }
    const auto options = at::TensorOptions().dtype(at::kDouble).device(plan.device);
    // This rank's loss sum, sequences right and real tokens.
    at::Tensor stats = at::zeros({3}, options);
    for (const StepShare::Part& part : share.parts) {
      random.MicroBatch(part.index);
      TaskModel::Output out;
      {
        model::AutocastGuard autocast(precision, plan.device.type());
        out = task.Run(*part.batch, *part.targets, plan);
      }
      // Each sequence's loss, averaged over the step's sequences.
      (out.sums.loss / share.step_sequences).backward();
      stats = stats + at::stack({out.sums.loss.detach(), out.sums.correct,
                                 at::scalar_tensor(static_cast<double>(part.targets->batch.tokens),
                                                   options)});
    }
    if (communicator.world_size() > 1) {
      // The gradients of every rank, summed in one flat buffer.
      std::vector<at::Tensor> flat;
      for (auto& p : parameters) {
        if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
        flat.push_back(p.grad().reshape({-1}));
      }
      at::Tensor sum = at::cat(flat);
      communicator.SumInPlace(sum);
      int64_t at = 0;
      for (auto& p : parameters) {
        const int64_t n = p.numel();
        p.mutable_grad().copy_(sum.narrow(0, at, n).view_as(p));
        at += n;
      }
      communicator.SumInPlace(stats);
    }
    // The step's one read: the loss, the count and the tokens, before the
    // update.
    const at::Tensor read = stats.cpu();
    result.loss = read[0].item<double>() / share.step_sequences;
    result.correct = read[1].item<double>();
    result.tokens = read[2].item<double>();
    if (!std::isfinite(result.loss)) return result;
    optim::ClipGradNorm(parameters, max_grad_norm);
    for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
    optimizer.step();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("fine-tuning step: ", FirstLine(e)));
  }
  return result;
}

}  // namespace pbert::train
