// What only a CUDA build of LibTorch knows about a GPU: its facts (name,
// compute capability, memory), the caching allocator's memory statistics,
// and GPU-time timers (CUDA events). A CPU build links gpu_none.cc instead,
// whose every function says that this build has no CUDA; the rest of
// packed-bert asks for a device through LibTorch's device-independent
// interface (train/device.h) and never includes a CUDA header.
#pragma once

#include <cstdint>
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

// The caching allocator's bytes on device `index`: allocated now and at
// most since the last ResetPeakMemory, and reserved from the driver.
struct MemoryStats {
  int64_t allocated = 0, peak_allocated = 0, reserved = 0;
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

}  // namespace pbert::gpu
