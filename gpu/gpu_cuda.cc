// The CUDA build's side of gpu/gpu.h, through LibTorch's CUDA headers (and
// the CUDA toolkit's, which they include). Compiled on every CI run against
// Debian 13's LibTorch headers and the CUDA toolkit (the CUDA compile lane,
// docs/building.md); linked only into CUDA builds.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/torch_compat.h"
#include "gpu/gpu.h"

namespace pbert::gpu {
namespace {

// CUDA errors arrive as c10::Error; each function returns them as a status.
template <class F>
auto Guarded(const char* what, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", FirstLine(e)));
  }
}

class CudaEventTimer : public EventTimer {
 public:
  explicit CudaEventTimer(int index)
      : index_(static_cast<c10::DeviceIndex>(index)),
        start_(cudaEventDefault),
        stop_(cudaEventDefault) {}
  void Start() override {
    c10::cuda::CUDAGuard guard(index_);
    start_.record();
  }
  double StopSeconds() override {
    c10::cuda::CUDAGuard guard(index_);
    stop_.record();
    stop_.synchronize();
    return start_.elapsed_time(stop_) / 1000.0;
  }

 private:
  c10::DeviceIndex index_;
  at::cuda::CUDAEvent start_, stop_;
};

class CudaGraph : public Graph {
 public:
  explicit CudaGraph(c10::DeviceIndex index) : index_(index) {}
  absl::Status Replay() override {
    return Guarded("replaying the captured step (a CUDA graph) failed", [&] {
      c10::cuda::CUDAGuard guard(index_);
      graph_.replay();
      return absl::OkStatus();
    });
  }
  at::cuda::CUDAGraph& graph() { return graph_; }

 private:
  c10::DeviceIndex index_;
  at::cuda::CUDAGraph graph_;
};

}  // namespace

bool Built() { return true; }

// Why an earlier capture in this process failed ("" while none has). A
// capture that fails part-way can leave LibTorch's state behind (up to at
// least 2.12: the CUDA generator still registered with the capture, the
// caching allocator still sending this thread's allocations to the graph's
// pool), which no public call undoes: every later capture in the process
// is refused, naming the first failure, and work outside graphs goes on.
namespace {
std::mutex capture_mutex;
std::string& FailedCapture() {
  static std::string why;
  return why;
}
}  // namespace

absl::StatusOr<std::unique_ptr<Graph>> Graph::Capture(int index,
                                                      const std::function<void()>& work) {
  {
    const std::lock_guard<std::mutex> lock(capture_mutex);
    if (!FailedCapture().empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "an earlier capture in this process failed (", FailedCapture(),
          "), which can leave LibTorch's CUDA state behind: no more CUDA graphs in this "
          "process; start it again with run.cuda_graphs: false"));
    }
  }
  const auto device = static_cast<c10::DeviceIndex>(index);
  auto graph = std::make_unique<CudaGraph>(device);
  try {
    c10::cuda::CUDAGuard guard(device);
    // What the eager steps before left cached is given back first: the
    // graph's pool holds a micro-batch's activations of its own.
    c10::cuda::CUDACachingAllocator::emptyCache();
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device);
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device);
    at::cuda::CUDAEvent queued;  // the side stream starts after the work queued so far
    queued.record(current);
    queued.block(side);
    {
      const c10::cuda::CUDAStreamGuard on_side(side);
#if PBERT_TORCH_AT_LEAST(2, 1)
      // Thread-local: the loader's threads pin memory and copy batches
      // while this one captures; only this thread's calls are checked.
      graph->graph().capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#else
      graph->graph().capture_begin();  // global: no mode to choose
#endif
      try {
        work();
      } catch (...) {
        try {
          graph->graph().capture_end();  // ends the (invalidated) capture; its error is the first's
        } catch (const std::exception&) {
        }
        throw;
      }
      graph->graph().capture_end();
    }
    at::cuda::CUDAEvent captured;
    captured.record(side);
    captured.block(current);
  } catch (const std::exception& e) {
    const std::lock_guard<std::mutex> lock(capture_mutex);
    FailedCapture() = FirstLine(e);
    return absl::InternalError(
        absl::StrCat("capturing the step as a CUDA graph failed: ", FirstLine(e)));
  }
  return graph;
}

absl::StatusOr<DeviceFacts> Describe(int index) {
  return Guarded("cannot read the GPU's properties", [&]() -> absl::StatusOr<DeviceFacts> {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
    DeviceFacts facts;
    facts.name = p->name;
    facts.major = p->major;
    facts.minor = p->minor;
    facts.multiprocessors = p->multiProcessorCount;
    facts.memory_bytes = static_cast<int64_t>(p->totalGlobalMem);
    return facts;
  });
}

int64_t CudnnVersion() {
  // LibTorch's CUDA library links cuDNN where it has it, so the symbol is
  // among the loaded ones; its C interface has been stable since cuDNN 1.
  using GetVersion = size_t (*)();
  const auto get = reinterpret_cast<GetVersion>(dlsym(RTLD_DEFAULT, "cudnnGetVersion"));
  return get == nullptr ? 0 : static_cast<int64_t>(get());
}

absl::StatusOr<MemoryStats> Memory(int index) {
  return Guarded("cannot read the GPU's memory statistics", [&]() -> absl::StatusOr<MemoryStats> {
    // The caching allocator answers only once CUDA is initialised in this
    // process: a first allocation initialises it (then a cached block).
    (void)at::empty({1}, at::TensorOptions().device(c10::kCUDA,
                                                    static_cast<c10::DeviceIndex>(index)));
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
    constexpr size_t kAll = 0;  // StatType::AGGREGATE
    MemoryStats m;
    m.allocated = stats.allocated_bytes[kAll].current;
    m.peak_allocated = stats.allocated_bytes[kAll].peak;
    m.reserved = stats.reserved_bytes[kAll].current;
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
    size_t free = 0, total = 0;
    C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    m.device_free = static_cast<int64_t>(free);
    return m;
  });
}

absl::Status ResetPeakMemory(int index) {
  return Guarded("cannot reset the GPU's peak memory", [&] {
    (void)at::empty({1}, at::TensorOptions().device(c10::kCUDA,
                                                    static_cast<c10::DeviceIndex>(index)));
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
    return absl::OkStatus();
  });
}

absl::Status ReleaseCachedMemory(int index) {
  return Guarded("cannot release the GPU's cached memory", [&] {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
    c10::cuda::CUDACachingAllocator::emptyCache();
    return absl::OkStatus();
  });
}

absl::Status Synchronize(int index) {
  return Guarded("the GPU failed", [&] {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
    c10::cuda::device_synchronize();
    return absl::OkStatus();
  });
}

WaitCheck::WaitCheck(bool refuse)
    : previous_(static_cast<int>(c10::cuda::warning_state().get_sync_debug_mode())) {
  c10::cuda::warning_state().set_sync_debug_mode(refuse ? c10::cuda::SyncDebugMode::L_ERROR
                                                        : c10::cuda::SyncDebugMode::L_DISABLED);
}

WaitCheck::~WaitCheck() {
  c10::cuda::warning_state().set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(previous_));
}

absl::StatusOr<std::unique_ptr<EventTimer>> EventTimer::Create(int index) {
  return Guarded("cannot create CUDA events",
                 [&]() -> absl::StatusOr<std::unique_ptr<EventTimer>> {
                   return std::make_unique<CudaEventTimer>(index);
                 });
}

}  // namespace pbert::gpu
