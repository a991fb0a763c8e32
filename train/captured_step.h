// The captured step (run.cuda_graphs): forward and backward of a
// micro-batch recorded once per shape as a CUDA graph (gpu::Graph) and
// replayed for every micro-batch of that shape, so that the host launches
// one graph where it launched hundreds of kernels.
//
// A replay runs the recorded kernels on the recorded memory, so everything
// a micro-batch changes lives in fixed places:
// - its inputs and the step's totals: static buffers of the graph, which
//   each micro-batch's tensors are copied into before the replay (device
//   to device); model.static_shapes gives every micro-batch one shape;
// - dropout: the CUDA generator's masks (LibTorch's dropout,
//   FlashAttention) are drawn from the generator's state at each replay,
//   which the step seeds for each micro-batch as in eager mode; the fused
//   layers' masks from seeds in device memory (model::DropoutSeedSlots),
//   drawn from the CPU generator before each replay as eager mode draws
//   them;
// - the gradients: accumulated in place into the parameters' gradients
//   (LibTorch accumulates into a defined gradient in place), which the
//   first, eager micro-batches of each shape define and every step zeroes
//   in place;
// - the metric sums: the graph's output, read before the next replay.
//
// What stays outside the graph: the optimizer step, clipping, the one
// read of the step, and the all-reduce of the gradients, which starts
// after the step's last replay (the reducer's hooks run at capture only).
// The first kWarmupMicroBatches micro-batches of each shape run eagerly:
// they define the gradients and let LibTorch, cuBLAS and FlashAttention
// make what they make on first use, outside the capture.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpu/gpu.h"
#include "model/bert_options.h"
#include "model/inputs.h"
#include "model/precision.h"

namespace pbert::train {

// Why a run of this model, input plan and precision cannot capture its
// micro-batches, in one line naming run.cuda_graphs; OK where it can: on a
// GPU, with model.static_shapes, in a layout of one shape (dense, or
// varlen through FlashAttention), not in fp16 (whose loss scale changes
// between steps).
absl::Status CheckCapturable(const model::BertOptions& bert, const model::InputPlan& plan,
                             model::Precision precision);
// The same but for the device: what a stand-in for CUDA graphs (a
// Recorder of the tests) needs.
absl::Status CheckOneShape(const model::BertOptions& bert, const model::InputPlan& plan,
                           model::Precision precision);

// A graph's key: the sizes of every input tensor and the longest sequence.
std::string ShapeKey(const model::Inputs& inputs);

class CapturedMicroBatches {
 public:
  // Eager micro-batches of each shape before it is captured.
  static constexpr int kWarmupMicroBatches = 2;

  // Forward and backward of `inputs`, the loss divided by `totals` (the
  // step's, on the device): the micro-batch's metric sums, on the device.
  using Work = std::function<at::Tensor(const model::Inputs& inputs, const at::Tensor& totals)>;

  // Records `work` as a graph on `device`, without running it: CUDA
  // graphs (gpu::Graph::Capture), or a stand-in of the tests
  // (tests/train/host_graph.h) that runs it on the CPU at each replay.
  using Recorder = std::function<absl::StatusOr<std::unique_ptr<gpu::Graph>>(
      const c10::Device& device, std::function<void()> work)>;

  // `dropout_draws`: at most as many fused-layer dropout masks per
  // micro-batch; `recorder` null: CUDA graphs.
  CapturedMicroBatches(const c10::Device& device, int64_t dropout_draws,
                       Recorder recorder = nullptr);
  ~CapturedMicroBatches();

  // Runs `work` on `inputs` and `totals`: eagerly for the first micro-batches
  // of a shape, then captured once and replayed. `reseed` puts the
  // generators where this micro-batch starts (Randomness::Step::MicroBatch),
  // and has been called once before Run. `work` must stay valid for as long
  // as this object (it is recorded, not called, at capture). The sums
  // returned are overwritten by the next replay of their shape: use them
  // before.
  absl::StatusOr<at::Tensor> Run(const model::Inputs& inputs, const at::Tensor& totals,
                                 const std::function<void()>& reseed, const Work& work);

  // Shapes captured so far.
  int graphs() const;

 private:
  struct Shape;
  c10::Device device_;
  int64_t dropout_draws_;
  Recorder recorder_;
  std::map<std::string, std::unique_ptr<Shape>> shapes_;
};

}  // namespace pbert::train
