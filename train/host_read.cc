#include "train/host_read.h"

#include <ATen/ATen.h>

#include <atomic>

#include "gpu/gpu.h"

namespace pbert::train {
namespace {

std::atomic<uint64_t> reads{0};

}  // namespace

std::vector<double> ReadToHost(const at::Tensor& values) {
  reads.fetch_add(1, std::memory_order_relaxed);
  // The one wait a step makes: allowed where waits are refused (tests).
  const gpu::WaitCheck allowed(/*refuse=*/false);
  const at::Tensor host = values.detach().to(at::kCPU, at::kDouble).contiguous();
  const double* data = host.data_ptr<double>();
  return std::vector<double>(data, data + host.numel());
}

at::Tensor ReadTensorToHost(const at::Tensor& values) {
  reads.fetch_add(1, std::memory_order_relaxed);
  const gpu::WaitCheck allowed(/*refuse=*/false);
  return values.detach().to(at::kCPU).contiguous();
}

uint64_t HostReads() { return reads.load(std::memory_order_relaxed); }

}  // namespace pbert::train
