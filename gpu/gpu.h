// What only a CUDA build of LibTorch knows about a GPU: its facts (name,
// compute capability, memory), the caching allocator's memory statistics,
// and GPU-time timers (CUDA events). A CPU build links gpu_none.cc instead,
// whose every function says that this build has no CUDA; the rest of
// packed-bert asks for a device through LibTorch's device-independent
// interface (train/device.h) and never includes a CUDA header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pbert::gpu {

// True in a build against a CUDA LibTorch.
bool Built();

struct DeviceFacts {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  int64_t memory_bytes = 0;
};
absl::StatusOr<DeviceFacts> Describe(int index);

// The version of the cuDNN library this process has loaded, as cuDNN's
// cudnnGetVersion says it (91800 for 9.18.0; what PyTorch's
// torch.backends.cudnn.version() reads), looked up among the loaded
// libraries; 0 where none is loaded (a CPU build, a LibTorch without cuDNN
// or with cuDNN linked in statically, which hides the symbol).
int64_t CudnnVersion();

// The caching allocator's bytes on device `index`: allocated now and at
// most since the last ResetPeakMemory, and reserved from the driver.
struct MemoryStats {
  int64_t allocated = 0, peak_allocated = 0, reserved = 0;
  int64_t device_free = 0;  // the driver's free bytes on the device (other processes' use counted)
};
absl::StatusOr<MemoryStats> Memory(int index);
absl::Status ResetPeakMemory(int index);
// Returns the caching allocator's unused blocks on device `index` to the
// driver, so that another process can have them.
absl::Status ReleaseCachedMemory(int index);

// Waits until device `index` has finished all work queued so far.
absl::Status Synchronize(int index);

// LibTorch's CUDA synchronization debug mode, set for a scope and then
// restored: with `refuse`, every operation that makes the host wait for a
// GPU throws (c10::Error) instead; without, waits are allowed again (the
// training step's one read, train/host_read.h, opens such a scope). A CPU
// build: nothing.
class WaitCheck {
 public:
  explicit WaitCheck(bool refuse);
  ~WaitCheck();
  WaitCheck(const WaitCheck&) = delete;
  WaitCheck& operator=(const WaitCheck&) = delete;

 private:
  int previous_ = 0;
};

// GPU time on the current stream of device `index` between Start and
// Stop, from two CUDA events; Stop waits for the second.
class EventTimer {
 public:
  static absl::StatusOr<std::unique_ptr<EventTimer>> Create(int index);
  virtual ~EventTimer() = default;
  virtual void Start() = 0;
  virtual double StopSeconds() = 0;
};

// A CUDA graph: the GPU work that `work` queues on device `index`,
// recorded once (on a side stream, in a memory pool of the graph's own,
// with nothing run) and then launched as a whole by each Replay on the
// current stream, with the arguments and memory it was recorded with.
// LibTorch's default CUDA generator is registered with the graph: each
// replay draws from the generator's state at the time, as the eager work
// would. The host work inside `work` runs at capture only. An exception in
// `work`, or an operation that cannot be captured (a wait for the GPU, a
// copy from pageable memory), ends the capture and comes back as the
// status.
class Graph {
 public:
  static absl::StatusOr<std::unique_ptr<Graph>> Capture(int index,
                                                        const std::function<void()>& work);
  virtual ~Graph() = default;
  virtual absl::Status Replay() = 0;
};

}  // namespace pbert::gpu
