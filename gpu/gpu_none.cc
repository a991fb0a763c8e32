// The CPU build's side of gpu/gpu.h: no CUDA, said in one line each.
#include "gpu/gpu.h"

namespace pbert::gpu {
namespace {

absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "this packed-bert was built against a LibTorch without CUDA; build it against a CUDA "
      "LibTorch (docs/building.md, scripts/gpu) to use a GPU");
}

}  // namespace

bool Built() { return false; }
absl::StatusOr<DeviceFacts> Describe(int) { return NoCuda(); }
int64_t CudnnVersion() { return 0; }
absl::StatusOr<MemoryStats> Memory(int) { return NoCuda(); }
absl::Status ResetPeakMemory(int) { return NoCuda(); }
absl::Status ReleaseCachedMemory(int) { return NoCuda(); }
absl::Status Synchronize(int) { return NoCuda(); }
absl::StatusOr<std::unique_ptr<EventTimer>> EventTimer::Create(int) { return NoCuda(); }
absl::StatusOr<std::unique_ptr<Graph>> Graph::Capture(int, const std::function<void()>&) {
  return NoCuda();
}
WaitCheck::WaitCheck(bool) {}
WaitCheck::~WaitCheck() = default;

}  // namespace pbert::gpu
