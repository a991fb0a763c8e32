#include "train/captured_step.h"

#include <ATen/ATen.h>

#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "gpu/gpu.h"
#include "model/dropout.h"

namespace pbert::train {
namespace {

int64_t LongestSequence(const model::Inputs& inputs) {
  const auto* varlen = std::get_if<model::VarlenBoundaries>(&inputs.attention);
  return varlen != nullptr ? varlen->max_seqlen : 0;
}

}  // namespace

absl::Status CheckCapturable(const model::BertOptions& bert, const model::InputPlan& plan,
                             model::Precision precision) {
  if (!plan.device.is_cuda()) {
    return absl::InvalidArgumentError(
        "run.cuda_graphs: true captures the step on a GPU and this run trains on the CPU; set "
        "run.cuda_graphs: false, or train on a GPU (run.device)");
  }
  return CheckOneShape(bert, plan, precision);
}

absl::Status CheckOneShape(const model::BertOptions& bert, const model::InputPlan& plan,
                           model::Precision precision) {
  if (!bert.static_shapes()) {
    return absl::InvalidArgumentError(
        "run.cuda_graphs: true replays one shape of micro-batch; set model.static_shapes: true");
  }
  const bool one_shape = plan.attention == model::AttentionKind::kDense ||
                         (plan.attention == model::AttentionKind::kVarlen && plan.flash);
  if (!one_shape) {
    return absl::InvalidArgumentError(
        "run.cuda_graphs: true needs a layout of one shape: model.attention dense, or varlen "
        "through FlashAttention (bf16 or fp8 on a GPU of compute capability 8.0 or later, a head "
        "width that is a multiple of 8); the attention buckets change with every micro-batch");
  }
  if (precision == model::Precision::kFp16) {
    return absl::InvalidArgumentError(
        "run.cuda_graphs: true does not take model.precision fp16, whose loss scale changes "
        "between steps; use bf16");
  }
  return absl::OkStatus();
}

std::string ShapeKey(const model::Inputs& inputs) {
  model::Inputs copy = inputs;
  std::vector<std::string> parts;
  for (const at::Tensor* t : copy.Tensors()) {
    parts.push_back(absl::StrCat("[", absl::StrJoin(t->sizes(), ","), "]"));
  }
  parts.push_back(absl::StrCat("layout ", inputs.attention.index(), " longest ",
                               LongestSequence(inputs)));
  return absl::StrJoin(parts, " ");
}

// One shape's graph: its static buffers, its output and its seed slots.
struct CapturedMicroBatches::Shape {
  int eager = 0;  // micro-batches run eagerly so far
  model::Inputs inputs;
  at::Tensor totals;
  at::Tensor sums;
  std::unique_ptr<model::DropoutSeedSlots> seeds;
  Work work;
  std::unique_ptr<gpu::Graph> graph;
};

CapturedMicroBatches::CapturedMicroBatches(const c10::Device& device, int64_t dropout_draws,
                                           Recorder recorder)
    : device_(device), dropout_draws_(dropout_draws), recorder_(std::move(recorder)) {
  if (!recorder_) {
    recorder_ = [](const c10::Device& on, std::function<void()> work) {
      return gpu::Graph::Capture(on.index(), work);
    };
  }
}

CapturedMicroBatches::~CapturedMicroBatches() = default;

int CapturedMicroBatches::graphs() const {
  int n = 0;
  for (const auto& [key, shape] : shapes_) n += shape->graph != nullptr;
  return n;
}

absl::StatusOr<at::Tensor> CapturedMicroBatches::Run(const model::Inputs& inputs,
                                                     const at::Tensor& totals,
                                                     const std::function<void()>& reseed,
                                                     const Work& work) {
  const std::string key = ShapeKey(inputs);
  std::unique_ptr<Shape>& shape = shapes_[key];
  if (!shape) shape = std::make_unique<Shape>();
  Shape& s = *shape;
  try {
    if (!s.graph && s.eager < kWarmupMicroBatches) {
      ++s.eager;
      return work(inputs, totals);
    }
    if (!s.graph) {
      s.inputs = inputs;
      for (at::Tensor* t : s.inputs.Tensors()) *t = t->clone();
      s.totals = totals.clone();
      s.seeds = std::make_unique<model::DropoutSeedSlots>(device_, dropout_draws_);
      s.work = work;
      Shape* captured = &s;
      absl::StatusOr<std::unique_ptr<gpu::Graph>> graph = recorder_(device_, [captured] {
        const model::DropoutSeedSlots::Recording recording(*captured->seeds);
        captured->sums = captured->work(captured->inputs, captured->totals);
      });
      if (!graph.ok()) {
        return absl::Status(graph.status().code(),
                            absl::StrCat(graph.status().message(),
                                         "; run.cuda_graphs: false trains without capturing"));
      }
      s.graph = std::move(*graph);
      logging::Get("train")->info(
          "recorded a micro-batch's forward and backward as a graph, replayed from now on ({} "
          "dropout seeds in slots; shape {})",
          s.seeds->used(), key);
    }
    model::Inputs target = s.inputs;
    model::Inputs source = inputs;
    const std::vector<at::Tensor*> to = target.Tensors(), from = source.Tensors();
    for (size_t i = 0; i < to.size(); ++i) to[i]->copy_(*from[i], /*non_blocking=*/true);
    s.totals.copy_(totals, /*non_blocking=*/true);
    reseed();  // the capture drew from the generators: back to the micro-batch's start
    s.seeds->Refill();
    RETURN_IF_ERROR(s.graph->Replay());
    return s.sums;
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("the captured step failed on ", device_.str(), ": ", FirstLine(e)));
  }
}

}  // namespace pbert::train
