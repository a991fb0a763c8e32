// A CPU stand-in for a CUDA graph (gpu::Graph), so that the captured step's
// bookkeeping (train/captured_step.h: the static buffers, the generators
// reseeded and the seed slots refilled before each replay, the gradients
// accumulated by replays, the deferred all-reduce) runs, and is tested, on
// any machine. Recording runs nothing, as a capture does. Each replay runs
// the recorded host work on the graph's buffers: the first as the capture
// ran it (drawing each dropout seed and handing out its slot, so that the
// slots are counted), every later one as a graph's kernels run, taking the
// seeds from the slots that the step refilled (DropoutSeedSlots::HostReplay).
//
// It also watches, through LibTorch's operator callbacks (RecordFunction),
// for what a CUDA graph cannot hold, and lists it in problems():
// - an operation that reads tensor values on the host (item, nonzero,
//   masked_select, equal, ...): on a GPU a wait that a capture refuses, or
//   a value frozen at capture;
// - a buffer that the work reads without having made it (a parameter, a
//   gradient, an input, an fp8 scale, a seed slot) at another address in a
//   later replay than in the first replay after the capture (the capture
//   itself runs other host work: it draws the dropout seeds): a graph
//   reads the old address.
// What it cannot show is the CUDA graph itself: that the recorded kernels
// are the eager ones (CudaTest.ACapturedStepEqualsTheEagerOneAndResumes),
// nor a copy between host and device (every tensor here is on the host).
#pragma once

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/torch_compat.h"
#include "gpu/gpu.h"
#include "model/dropout.h"
#include "train/captured_step.h"

namespace pbert::testing {

// The operations whose result depends on tensor values read on the host.
inline bool ReadsTheHost(const char* op) {
  static const char* const kReads[] = {
      "aten::_local_scalar_dense", "aten::item",         "aten::nonzero",
      "aten::nonzero_static",      "aten::is_nonzero",   "aten::equal",
      "aten::allclose",            "aten::masked_select", "aten::unique",
      "aten::_unique",             "aten::_unique2",     "aten::unique_consecutive",
      "aten::bincount",            "aten::histc",        "aten::tolist"};
  for (const char* read : kReads) {
    if (std::strcmp(op, read) == 0) return true;
  }
  return false;
}

// One run of recorded work, as LibTorch's operator callbacks saw it.
struct WorkTrace {
  std::vector<std::string> host_reads;
  // Each read of a buffer the work did not make: the operation's position
  // and name and the input's index, and the buffer's address.
  std::vector<std::pair<std::string, const void*>> outside;
  std::unordered_set<const void*> made;  // the buffers of the work's own results
  int64_t ops = 0;
};

namespace internal {
inline thread_local WorkTrace* tracing = nullptr;

inline void Buffers(const c10::IValue& value, const std::function<void(const void*)>& each) {
  auto one = [&](const at::Tensor& t) {
    // (A number that an operation wrapped as a tensor is no buffer.)
    if (t.defined() && !t.unsafeGetTensorImpl()->is_wrapped_number() && t.has_storage() &&
        t.storage().data() != nullptr) {
      each(t.storage().data());
    }
  };
  if (value.isTensor()) {
    one(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) one(t);
  }
}

inline std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  WorkTrace* trace = tracing;
  if (trace == nullptr) return nullptr;
  const char* name = fn.name();
  const int64_t op = trace->ops++;
  if (ReadsTheHost(name)) trace->host_reads.push_back(name);
  const auto inputs = fn.inputs();
  for (size_t k = 0; k < inputs.size(); ++k) {
    Buffers(inputs[k], [&](const void* buffer) {
      if (trace->made.count(buffer) == 0) {
        trace->outside.emplace_back(absl::StrCat("#", op, " ", name, " input ", k), buffer);
      }
    });
  }
  return nullptr;
}

inline void OnEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  WorkTrace* trace = tracing;
  if (trace == nullptr) return;
  for (const c10::IValue& output : fn.outputs()) {
    Buffers(output, [&](const void* buffer) { trace->made.insert(buffer); });
  }
}
}  // namespace internal

// Every buffer the CPU allocator hands out while it is in force (on this
// thread), as made by the work.
class AllocationsMade : public c10::MemoryReportingInfoBase {
 public:
  explicit AllocationsMade(WorkTrace* trace) : trace_(trace) {}
#if PBERT_TORCH_AT_LEAST(2, 0)
  void reportMemoryUsage(void* ptr, int64_t alloc_size, size_t, size_t, c10::Device) override {
#else
  void reportMemoryUsage(void* ptr, int64_t alloc_size, int64_t, int64_t, c10::Device) override {
#endif
    if (alloc_size > 0) trace_->made.insert(ptr);
  }
  bool memoryProfilingEnabled() const override { return true; }

 private:
  WorkTrace* trace_;
};

// Runs `work` with its operations and allocations traced on this thread.
inline WorkTrace Trace(const std::function<void()>& work) {
  WorkTrace trace;
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(internal::OnStart, internal::OnEnd)
          .needsInputs(true)
          .needsOutputs(true));
  const c10::DebugInfoGuard allocations(c10::DebugInfoKind::PROFILER_STATE,
                                        std::make_shared<AllocationsMade>(&trace));
  internal::tracing = &trace;
  try {
    work();
  } catch (...) {
    internal::tracing = nullptr;
    at::removeCallback(handle);
    throw;
  }
  internal::tracing = nullptr;
  at::removeCallback(handle);
  return trace;
}

// What the HostGraphs of a recorder saw: the problems above, and the most
// buffers from outside that one replay read (none would mean that the watch
// saw nothing).
struct GraphWatch {
  std::vector<std::string> problems;
  size_t outside_reads = 0;
};

class HostGraph : public gpu::Graph {
 public:
  explicit HostGraph(std::function<void()> work, std::shared_ptr<GraphWatch> watch)
      : work_(std::move(work)), watch_(std::move(watch)) {}
  absl::Status Replay() override {
    WorkTrace trace;
    if (replays_++ == 0) {
      trace = Trace(work_);
    } else {
      const model::DropoutSeedSlots::HostReplay replay;
      trace = Trace(work_);
    }
    std::vector<std::string>* problems = &watch_->problems;
    watch_->outside_reads = std::max(watch_->outside_reads, trace.outside.size());
    for (const std::string& op : trace.host_reads) {
      problems->push_back(absl::StrCat("replay ", replays_, ": ", op, " reads tensor values on "
                                        "the host"));
    }
    // The capture runs other host work than a replay (it draws the dropout
    // seeds and hands out their slots): the first replay after it is the
    // reference for the buffers read from outside.
    if (replays_ <= 2) {
      captured_ = std::move(trace.outside);
      return absl::OkStatus();
    }
    if (trace.outside.size() != captured_.size()) {
      problems->push_back(absl::StrCat("replay ", replays_, " read ", trace.outside.size(),
                                        " outside buffers, replay 2 ", captured_.size()));
    } else {
      for (size_t k = 0; k < captured_.size(); ++k) {
        if (trace.outside[k] != captured_[k]) {
          problems->push_back(absl::StrCat("replay ", replays_, ": ", trace.outside[k].first,
                                            " reads a buffer at another address than in "
                                            "replay 2 (", captured_[k].first, ")"));
          break;
        }
      }
    }
    return absl::OkStatus();
  }
  int replays() const { return replays_; }

 private:
  std::function<void()> work_;
  std::shared_ptr<GraphWatch> watch_;
  std::vector<std::pair<std::string, const void*>> captured_;
  int replays_ = 0;
};

// A Recorder (TraineeOptions::graph_recorder) of HostGraphs; `recorded`
// counts the graphs it made, `watch` collects what they saw.
inline train::CapturedMicroBatches::Recorder HostGraphs(
    std::shared_ptr<int> recorded,
    std::shared_ptr<GraphWatch> watch = std::make_shared<GraphWatch>()) {
  return [recorded, watch](const c10::Device&, std::function<void()> work)
             -> absl::StatusOr<std::unique_ptr<gpu::Graph>> {
    ++*recorded;
    return std::make_unique<HostGraph>(std::move(work), watch);
  };
}

}  // namespace pbert::testing
