#include "train/trainee.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/attention.h"
#include "model/bert.h"

namespace pbert::train {
namespace {

// The parameters the task trains, by name; the others are frozen
// (requires_grad off), so that no hook, bucket or optimizer state is
// spent on them.
torch::OrderedDict<std::string, at::Tensor> Trained(const tasks::Task& task,
                                                    torch::nn::Module& model) {
  torch::OrderedDict<std::string, at::Tensor> out;
  for (auto& item : model.named_parameters()) {
    if (task.Trains(item.key())) {
      out.insert(item.key(), item.value());
    } else {
      item.value().set_requires_grad(false);
    }
  }
  return out;
}

}  // namespace

Trainee::Trainee(const TraineeOptions& options)
    : options_(options), randomness_(options.device) {}

Trainee::~Trainee() = default;

absl::StatusOr<std::unique_ptr<Trainee>> Trainee::Make(const TraineeOptions& options,
                                                       distributed::Communicator& communicator) {
  RETURN_IF_ERROR(model::CheckVarlenKernel(options.bert, options.device));
  if (options.precision == model::Precision::kFp8) {
    RETURN_IF_ERROR(model::CheckFp8(options.fp8, options.bert, options.device));
  }
  std::unique_ptr<Trainee> t(new Trainee(options));
  try {
    t->input_plan_ =
        model::InputPlan::For(options.bert, options.device, options.precision, options.dtype);
    if (options.cuda_graphs) {
      RETURN_IF_ERROR(options.graph_recorder
                          ? CheckOneShape(options.bert, t->input_plan_, options.precision)
                          : CheckCapturable(options.bert, t->input_plan_, options.precision));
    }
    RETURN_IF_ERROR(t->Build(communicator));
  } catch (const std::exception& e) {
    return absl::Status(
        IsOutOfMemory(e) ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kInternal,
        absl::StrCat("cannot build the model on ", options.device.str(), ": ", FirstLine(e),
                     IsOutOfMemory(e) ? "; it does not fit there: choose a smaller model" : ""));
  }
  return t;
}

absl::Status Trainee::Build(distributed::Communicator& communicator) {
  const TraineeOptions& options = options_;
  const tasks::Task& task = *options.task;
  model::Randomness::Seed(options.seed);
  model_ = task.MakeModel(options.bert);
  model_.module->to(options.device, options.dtype);
  if (options.master_weights && model::Bf16Autocast(options.precision) &&
      options.dtype == c10::kFloat) {
    // The seeded model becomes the masters; the model a copy in bf16, built
    // without drawing from the generators (every draw after this one is as
    // it would be without master weights).
    masters_ = std::move(model_);
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    const at::Tensor state = cpu.get_state();
    model_ = task.MakeModel(options.bert);
    cpu.set_state(state);
    model_.module->to(options.device, c10::kBFloat16);
    SyncModelWeights();
  }
  const torch::OrderedDict<std::string, at::Tensor> trained = Trained(task, weights());
  optimizer_ = std::make_unique<optim::Lamb>(
      optim::BertParamGroups(trained, options.lamb, options.exclude_from_trust_ratio),
      options.lamb);
  optimizer_->UseFusedKernels(options.fused_optimizer);
  if (masters_.module) {
    const auto copies = Trained(task, *model_.module);
    std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
    for (const auto& item : trained) pairs.emplace_back(item.value(), copies[item.key()]);
    optimizer_->BindModelWeights(pairs);
  }
  if (options.precision == model::Precision::kFp16) {
    scaler_ = std::make_unique<model::LossScaler>();
  }
  if (options.precision == model::Precision::kFp8) {
    fp8_ = std::make_unique<model::Fp8Scaling>(model::BertModelImpl::Fp8Products(options.bert),
                                               options.fp8, options.device);
    // A captured micro-batch's replays run only the kernels it recorded.
    fp8_->KeepWeightCasts(!options.cuda_graphs);
    model_.bert->UseFp8(*fp8_);
  }
  reducer_ = std::make_unique<distributed::GradientReducer>(
      communicator, model_.module->parameters(), options.bucket_bytes, options.overlap,
      /*fixed_gradients=*/options.cuda_graphs);
  if (options.cuda_graphs) {
    // Two fused-layer masks per layer (and on the CPU the embeddings' and
    // attention's), with room to spare.
    graphs_ = std::make_unique<CapturedMicroBatches>(
        options.device, 4 * options.bert.num_layers() + 64, options.graph_recorder);
  }
  return absl::OkStatus();
}

void Trainee::UpdateFp8(distributed::Communicator& communicator) {
  if (!fp8_) return;
  communicator.MaxInPlace(fp8_->amax());
  fp8_->Update();
}

absl::Status Trainee::RestoreFp8(const std::optional<model::Fp8ScalingState>& state) {
  if (!fp8_ || !state) return absl::OkStatus();
  return fp8_->Restore(*state);
}

void Trainee::SyncModelWeights() {
  if (!masters_.module) return;
  torch::NoGradGuard no_grad;
  const auto masters = masters_.module->named_parameters();
  for (auto& item : model_.module->named_parameters()) item.value().copy_(masters[item.key()]);
}

}  // namespace pbert::train
