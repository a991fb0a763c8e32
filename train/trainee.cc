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

Trainee::Trainee(const TraineeOptions& options)
    : options_(options), randomness_(options.device) {}

Trainee::~Trainee() = default;

absl::StatusOr<std::unique_ptr<Trainee>> Trainee::Make(const TraineeOptions& options,
                                                       distributed::Communicator& communicator) {
  RETURN_IF_ERROR(model::CheckVarlenKernel(options.bert, options.device));
  std::unique_ptr<Trainee> t(new Trainee(options));
  try {
    t->input_plan_ =
        model::InputPlan::For(options.bert, options.device, options.precision, options.dtype);
    model::Randomness::Seed(options.seed);
    t->model_ = std::make_unique<model::BertForPreTraining>(options.bert);
    (*t->model_)->to(options.device, options.dtype);
    if (options.master_weights && model::Bf16Autocast(options.precision) &&
        options.dtype == c10::kFloat) {
      // The seeded model becomes the masters; the model a copy in bf16,
      // built without drawing from the generators (every draw after this
      // one is as it would be without master weights).
      t->masters_ = std::move(t->model_);
      at::Generator cpu = at::detail::getDefaultCPUGenerator();
      const at::Tensor state = cpu.get_state();
      t->model_ = std::make_unique<model::BertForPreTraining>(options.bert);
      cpu.set_state(state);
      (*t->model_)->to(options.device, c10::kBFloat16);
      t->SyncModelWeights();
    }
    model::BertForPreTraining& weights = t->weights();
    t->optimizer_ = std::make_unique<optim::Lamb>(
        optim::BertParamGroups(weights->named_parameters(), options.lamb,
                               options.exclude_from_trust_ratio),
        options.lamb);
    t->optimizer_->UseFusedKernels(options.fused_optimizer);
    if (t->masters_) {
      std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
      const auto copies = (*t->model_)->named_parameters();
      for (const auto& item : weights->named_parameters()) {
        pairs.emplace_back(item.value(), copies[item.key()]);
      }
      t->optimizer_->BindModelWeights(pairs);
    }
    if (options.precision == model::Precision::kFp16) {
      t->scaler_ = std::make_unique<model::LossScaler>();
    }
    if (options.precision == model::Precision::kFp8) {
      RETURN_IF_ERROR(model::CheckFp8(options.fp8, options.bert, options.device));
      t->fp8_ = std::make_unique<model::Fp8Scaling>(
          model::BertForPreTrainingImpl::Fp8Products(options.bert), options.fp8, options.device);
      (*t->model_)->UseFp8(*t->fp8_);
    }
    t->reducer_ = std::make_unique<distributed::GradientReducer>(
        communicator, (*t->model_)->parameters(), options.bucket_bytes, options.overlap);
    if (options.cuda_graphs) {
      RETURN_IF_ERROR(options.graph_recorder
                          ? CheckOneShape(options.bert, t->input_plan_, options.precision)
                          : CheckCapturable(options.bert, t->input_plan_, options.precision));
      // Two fused-layer masks per layer (and on the CPU the embeddings'
      // and attention's), with room to spare.
      t->graphs_ = std::make_unique<CapturedMicroBatches>(
          options.device, 4 * options.bert.num_layers() + 64, options.graph_recorder);
    }
  } catch (const std::exception& e) {
    return absl::Status(
        IsOutOfMemory(e) ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kInternal,
        absl::StrCat("cannot build the model on ", options.device.str(), ": ", FirstLine(e),
                     IsOutOfMemory(e) ? "; it does not fit there: choose a smaller model" : ""));
  }
  return t;
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
  if (!masters_) return;
  torch::NoGradGuard no_grad;
  const auto masters = (*masters_)->named_parameters();
  for (auto& item : (*model_)->named_parameters()) item.value().copy_(masters[item.key()]);
}

}  // namespace pbert::train
