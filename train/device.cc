#include "train/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/torch_compat.h"
#include "gpu/gpu.h"

namespace pbert::train {

absl::StatusOr<c10::Device> ResolveDevice(DeviceChoice choice, int local_rank) {
  if (choice == DeviceChoice::kCpu) return c10::Device(c10::kCPU);
  if (!gpu::Built()) {
    if (choice == DeviceChoice::kAuto) return c10::Device(c10::kCPU);
    return absl::InvalidArgumentError(absl::StrCat(
        "run.device is cuda, but this packed-bert was built against LibTorch ",
        torch_compat::Version(), " without CUDA; build it against a CUDA LibTorch "
        "(scripts/gpu, docs/building.md) or set run.device: cpu"));
  }
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (gpus > local_rank) return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
  if (choice == DeviceChoice::kAuto && gpus == 0) return c10::Device(c10::kCPU);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (gpus == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run.device is ", NameOf(choice), ", but no GPU is visible to this process",
        visible != nullptr ? absl::StrCat(" (CUDA_VISIBLE_DEVICES=", visible, ")") : "",
        "; set run.device: cpu, or run on a machine with a GPU"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "run.device ", NameOf(choice), ": this process has local rank ", local_rank, " but sees ",
      gpus, gpus == 1 ? " GPU" : " GPUs", "; start at most one process per GPU (launch "
      "--nproc-per-node ", gpus, ")"));
}

absl::Status UseDevice(const c10::Device& device) {
  if (!device.is_cuda()) return absl::OkStatus();
  try {
    c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(device);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot use ", device.str(), ": ", FirstLine(e)));
  }
  return absl::OkStatus();
}

std::string DescribeDevice(const c10::Device& device) {
  if (!device.is_cuda()) return device.str();
  auto facts = gpu::Describe(device.index());
  if (!facts.ok()) return device.str();
  return absl::StrFormat("%s (%s, sm_%d%d, %.1f GiB)", device.str(), facts->name, facts->major,
                         facts->minor, static_cast<double>(facts->memory_bytes) / (1 << 30));
}

}  // namespace pbert::train
