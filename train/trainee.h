// What a training step updates, built one way for the trainer, the
// benchmarks and the tests, for any task (tasks/task.h): the task's model,
// seeded and moved once to its device, with the encoder-level levers (fp8
// scales, master copies) on its encoder; LAMB (or AdamW: LAMB without the
// trust ratio) over BERT's two parameter groups of what the task trains;
// the loss scaler (fp16); the gradient reducer; and the owner of the random
// generators.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "distributed/communicator.h"
#include "distributed/gradient_reducer.h"
#include "model/bert_options.h"
#include "model/fp8.h"
#include "model/inputs.h"
#include "model/precision.h"
#include "model/random_state.h"
#include "optim/lamb.h"
#include "tasks/pretraining.h"
#include "tasks/task.h"
#include "train/captured_step.h"

namespace pbert::train {

struct TraineeOptions {
  // The task whose model is trained: pretraining unless said.
  std::shared_ptr<const tasks::Task> task = tasks::PretrainingOn({});
  model::BertOptions bert;
  optim::LambOptions lamb;  // after the packing adjustment; trust_ratio off: AdamW
  bool exclude_from_trust_ratio = true;
  model::Precision precision = model::Precision::kFp32;  // resolved for the device
  c10::Device device = c10::kCPU;
  uint64_t seed = 0;  // seeds the weights and every generator
  int64_t bucket_bytes = 25 << 20;  // gradient all-reduce buckets
  bool overlap = true;              // all-reduce while backward runs
  c10::ScalarType dtype = c10::kFloat;  // of the parameters (the tests use double)
  // In bf16 (and fp32 parameters): the model computes with bf16 weights and
  // LAMB keeps fp32 master weights (weights()); else autocast casts fp32
  // weights in each micro-batch.
  bool master_weights = false;
  bool fused_optimizer = true;  // LAMB's fused kernels on CUDA (optim::Lamb)
  model::Fp8Options fp8;  // with precision kFp8
  // Forward and backward of each micro-batch replayed as a CUDA graph
  // (run.cuda_graphs, train/captured_step.h); refused where it cannot run.
  bool cuda_graphs = false;
  // How the micro-batches are recorded: null, CUDA graphs; the tests give
  // a stand-in that runs on the CPU (tests/train/host_graph.h).
  CapturedMicroBatches::Recorder graph_recorder;
};

class Trainee {
 public:
  // Checks every lever once (model.varlen_kernel, fp8, the captured step)
  // and builds the trainee; an error names the key.
  static absl::StatusOr<std::unique_ptr<Trainee>> Make(const TraineeOptions& options,
                                                       distributed::Communicator& communicator);
  ~Trainee();

  const tasks::Task& task() const { return *options_.task; }
  // The model the step computes with (bf16 weights with master weights).
  torch::nn::Module& model() { return *model_.module; }
  const std::shared_ptr<torch::nn::Module>& model_ptr() const { return model_.module; }
  // The weights that are saved, loaded and broadcast, and that LAMB
  // updates: the fp32 master weights, or the model itself without them.
  torch::nn::Module& weights() { return masters_.module ? *masters_.module : *model_.module; }
  // The encoder of weights(): where a fine-tuning run's pretrained weights go.
  model::BertModel& weights_encoder() { return masters_.module ? masters_.bert : model_.bert; }
  // After the weights() were loaded or received: the model's copy of them.
  void SyncModelWeights();
  bool has_master_weights() const { return masters_.module != nullptr; }
  optim::Lamb& optimizer() { return *optimizer_; }
  model::LossScaler* scaler() { return scaler_.get(); }  // null but for fp16
  // The encoder products' scales: null but for fp8. After each step its
  // maxima are taken over the ranks and its scales updated (UpdateFp8).
  model::Fp8Scaling* fp8() { return fp8_.get(); }
  void UpdateFp8(distributed::Communicator& communicator);
  // A checkpoint's fp8 scales, where it has them (a checkpoint of another
  // precision has none: the scales start afresh); refused if of another
  // shape.
  absl::Status RestoreFp8(const std::optional<model::Fp8ScalingState>& state);
  distributed::GradientReducer& reducer() { return *reducer_; }
  // The captured micro-batches: null without cuda_graphs.
  CapturedMicroBatches* graphs() { return graphs_.get(); }
  const model::Randomness& randomness() const { return randomness_; }
  const c10::Device& device() const { return options_.device; }
  model::Precision precision() const { return options_.precision; }
  const model::BertOptions& bert_options() const { return options_.bert; }
  // How micro-batches become the model's inputs (FlashAttention or not):
  // decided once, when the trainee is made.
  const model::InputPlan& input_plan() const { return input_plan_; }

 private:
  explicit Trainee(const TraineeOptions& options);
  absl::Status Build(distributed::Communicator& communicator);

  TraineeOptions options_;
  model::InputPlan input_plan_;
  model::Randomness randomness_;
  tasks::TaskModel model_;
  tasks::TaskModel masters_;  // none without master weights
  std::unique_ptr<optim::Lamb> optimizer_;
  std::unique_ptr<model::LossScaler> scaler_;
  std::unique_ptr<model::Fp8Scaling> fp8_;
  std::unique_ptr<distributed::GradientReducer> reducer_;
  std::unique_ptr<CapturedMicroBatches> graphs_;
};

}  // namespace pbert::train
