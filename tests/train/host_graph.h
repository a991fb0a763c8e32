// A CPU stand-in for a CUDA graph (gpu::Graph), so that the captured step's
// bookkeeping (train/captured_step.h: the static buffers, the generators
// reseeded and the seed slots refilled before each replay, the gradients
// accumulated by replays, the deferred all-reduce) runs, and is tested, on
// any machine. Recording runs nothing, as a capture does. Each replay runs
// the recorded host work on the graph's buffers: the first as the capture
// ran it (drawing each dropout seed and handing out its slot, so that the
// slots are counted), every later one as a graph's kernels run, taking the
// seeds from the slots that the step refilled (DropoutSeedSlots::HostReplay).
// What it cannot show is the CUDA graph itself: that the recorded kernels
// are the eager ones (CudaTest.ACapturedStepEqualsTheEagerOneAndResumes).
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "gpu/gpu.h"
#include "model/dropout.h"
#include "train/captured_step.h"

namespace pbert::testing {

class HostGraph : public gpu::Graph {
 public:
  explicit HostGraph(std::function<void()> work) : work_(std::move(work)) {}
  absl::Status Replay() override {
    if (replays_++ == 0) {
      work_();
    } else {
      const model::DropoutSeedSlots::HostReplay replay;
      work_();
    }
    return absl::OkStatus();
  }
  int replays() const { return replays_; }

 private:
  std::function<void()> work_;
  int replays_ = 0;
};

// A Recorder (TraineeOptions::graph_recorder) of HostGraphs; `recorded`
// counts the graphs it made.
inline train::CapturedMicroBatches::Recorder HostGraphs(std::shared_ptr<int> recorded) {
  return [recorded](const c10::Device&,
                    std::function<void()> work) -> absl::StatusOr<std::unique_ptr<gpu::Graph>> {
    ++*recorded;
    return std::make_unique<HostGraph>(std::move(work));
  };
}

}  // namespace pbert::testing
