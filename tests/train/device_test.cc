// train/device.h: run.device resolved once. On a machine without a usable
// GPU (every CPU build, or a CUDA build that sees none), auto is the CPU and
// cuda is one line naming run.device and what to do; with GPUs, auto and
// cuda are cuda:LOCAL_RANK and a local rank beyond them is named.
#include "train/device.h"

#include <torch/cuda.h>

#include "gpu/gpu.h"
#include "gtest/gtest.h"

namespace pbert::train {
namespace {

int VisibleGpus() { return gpu::Built() ? static_cast<int>(torch::cuda::device_count()) : 0; }

TEST(DeviceTest, CpuIsAlwaysTheCpu) {
  auto device = ResolveDevice(DeviceChoice::kCpu, 3);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(*device, c10::Device(c10::kCPU));
  EXPECT_EQ(DescribeDevice(*device), "cpu");
  EXPECT_TRUE(UseDevice(*device).ok());
}

TEST(DeviceTest, AutoIsTheLocalRanksGpuOrTheCpu) {
  auto device = ResolveDevice(DeviceChoice::kAuto, 0);
  ASSERT_TRUE(device.ok()) << device.status();
  if (VisibleGpus() == 0) {
    EXPECT_EQ(*device, c10::Device(c10::kCPU));
  } else {
    EXPECT_EQ(*device, c10::Device(c10::kCUDA, 0));
  }
}

TEST(DeviceTest, CudaWithoutAGpuIsOneLineNamingRunDevice) {
  auto device = ResolveDevice(DeviceChoice::kCuda, 0);
  if (VisibleGpus() > 0) {
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(*device, c10::Device(c10::kCUDA, 0));
    // One process per GPU: a local rank with no GPU of its own is named.
    auto beyond = ResolveDevice(DeviceChoice::kCuda, VisibleGpus());
    ASSERT_FALSE(beyond.ok());
    EXPECT_NE(beyond.status().message().find("start at most one process per GPU"),
              std::string::npos)
        << beyond.status();
    return;
  }
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(device.status().message());
  EXPECT_EQ(message.rfind("run.device is cuda, but ", 0), 0u) << message;
  EXPECT_NE(message.find("run.device: cpu"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

}  // namespace
}  // namespace pbert::train
