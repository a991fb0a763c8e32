#include "train/trainee.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/bert.h"

namespace pbert::train {

Trainee::Trainee(const TraineeOptions& options)
    : options_(options), randomness_(options.device) {}

Trainee::~Trainee() = default;

absl::StatusOr<std::unique_ptr<Trainee>> Trainee::Make(const TraineeOptions& options,
                                                       distributed::Communicator& communicator) {
  std::unique_ptr<Trainee> t(new Trainee(options));
  try {
    t->input_plan_ =
        model::InputPlan::For(options.bert, options.device, options.precision, options.dtype);
    model::Randomness::Seed(options.seed);
    t->model_ = std::make_unique<model::BertForPreTraining>(options.bert);
    (*t->model_)->to(options.device, options.dtype);
    t->optimizer_ = std::make_unique<optim::Lamb>(
        optim::BertParamGroups((*t->model_)->named_parameters(), options.lamb,
                               options.exclude_from_trust_ratio),
        options.lamb);
    if (options.precision == model::Precision::kFp16) {
      t->scaler_ = std::make_unique<model::LossScaler>();
    }
    t->reducer_ = std::make_unique<distributed::GradientReducer>(
        communicator, (*t->model_)->parameters(), options.bucket_bytes, options.overlap);
  } catch (const std::exception& e) {
    return absl::Status(
        IsOutOfMemory(e) ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kInternal,
        absl::StrCat("cannot build the model on ", options.device.str(), ": ", FirstLine(e),
                     IsOutOfMemory(e) ? "; it does not fit there: choose a smaller model" : ""));
  }
  return t;
}

}  // namespace pbert::train
