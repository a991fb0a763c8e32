#include "train/peak_flops.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "gpu/gpu.h"

namespace pbert::train {

double GpuPeakFlops(const std::string& name, model::Precision precision) {
  struct Row {
    const char* name;  // matched in the device's name
    double half, fp32;  // dense bf16/fp16 tensor cores; fp32 without TF32
  };
  // NVIDIA's datasheets; the PCIe H100 before the SXM one it is a name of.
  static constexpr Row kTable[] = {{"H100 PCIe", 756.5e12, 51.2e12},
                                   {"H100", 989.4e12, 66.9e12},
                                   {"H200", 989.4e12, 66.9e12},
                                   {"A100", 312e12, 19.5e12}};
  for (const Row& row : kTable) {
    if (absl::StrContains(name, row.name)) {
      return precision == model::Precision::kFp32 ? row.fp32 : row.half;
    }
  }
  return 0;
}

double GpuPeakBandwidth(const std::string& name) {
  struct Row {
    const char* name;
    double bytes;
  };
  static constexpr Row kTable[] = {
      {"H100 PCIe", 2.0e12}, {"H100", 3.35e12}, {"H200", 4.8e12}, {"A100", 2.0e12}};
  for (const Row& row : kTable) {
    if (absl::StrContains(name, row.name)) return row.bytes;
  }
  return 0;
}

PeakFlops DevicePeakFlops(const c10::Device& device, model::Precision precision) {
  // fp8 against the bf16 peak: only its encoder's products run at twice it.
  const char* precision_name = precision == model::Precision::kFp32 ? "fp32"
                               : model::Bf16Autocast(precision)     ? "bf16"
                                                                    : "fp16";
  if (device.is_cuda()) {
    auto facts = gpu::Describe(device.index());
    if (!facts.ok()) return {};
    const double peak = GpuPeakFlops(facts->name, precision);
    if (peak == 0) return {0, absl::StrFormat("%s: no peak known for it", facts->name)};
    return {peak, absl::StrFormat("%s, dense %s (datasheet)", facts->name, precision_name)};
  }
  // The CPU has no datasheet figure that LibTorch reaches: the best of
  // several products of the size a BERT layer multiplies is what a step's
  // matrix products can reach on these threads.
  constexpr int64_t n = 1024;
  try {
    const at::ScalarType type =
        model::Bf16Autocast(precision) ? at::kBFloat16 : at::kFloat;
    const at::Tensor a = at::full({n, n}, 0.5, at::TensorOptions().dtype(type));
    const at::Tensor b = at::full({n, n}, 0.25, at::TensorOptions().dtype(type));
    at::Tensor c = at::mm(a, b);  // warm-up: threads, packing buffers
    double best = 1e30, spent = 0;
    for (int i = 0; i < 20 && (i < 3 || spent < 0.2); ++i) {
      const auto start = std::chrono::steady_clock::now();
      at::mm_out(c, a, b);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best = std::min(best, s);
      spent += s;
    }
    return {2.0 * n * n * n / best,
            absl::StrFormat("measured: best %dx%d %s matrix product on %d threads", n, n,
                            precision_name, at::get_num_threads())};
  } catch (const std::exception&) {
    return {};  // no MFU, rather than no run
  }
}

}  // namespace pbert::train
