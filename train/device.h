// Where a process trains: the `run.device` choice, resolved once per
// process (train, score) and carried from there in the training plan.
#pragma once

#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "common/choices.h"

namespace pbert::train {

enum class DeviceChoice {
  kAuto,  // cuda:LOCAL_RANK where LibTorch has CUDA and a GPU is visible, else the CPU
  kCpu,
  kCuda,  // cuda:LOCAL_RANK, or an error
};
inline constexpr Choice<DeviceChoice> kDeviceChoices[] = {
    {"auto", DeviceChoice::kAuto}, {"cpu", DeviceChoice::kCpu}, {"cuda", DeviceChoice::kCuda}};
constexpr ChoiceList<DeviceChoice> ChoicesOf(DeviceChoice) { return kDeviceChoices; }

// The device for `choice` and this process's local rank (one GPU per
// process on a node). kCuda where LibTorch has no CUDA, or no GPU for this
// local rank is visible, is an error naming run.device and what to do.
absl::StatusOr<c10::Device> ResolveDevice(DeviceChoice choice, int local_rank);

// Makes `device` the current CUDA device of the process (what NCCL and
// kernels without an explicit device use); nothing on the CPU.
absl::Status UseDevice(const c10::Device& device);

// "cpu", or "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB)" for logs.
std::string DescribeDevice(const c10::Device& device);

}  // namespace pbert::train
