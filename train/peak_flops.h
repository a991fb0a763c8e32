// The peak FLOP/s that a run's model FLOP/s is compared with for MFU (model
// FLOPs utilisation): a GPU's datasheet figure for the training precision,
// or, on a CPU, what a short matrix product reaches at start-up
// (docs/model.md, FLOPs and MFU).
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "model/precision.h"

namespace pbert::train {

struct PeakFlops {
  double flops = 0;    // per device, FLOP/s; 0: unknown (no MFU is reported)
  std::string source;  // where the figure comes from, for the log
};

// The dense (no sparsity) peak of the GPUs named in the table (H100, H200,
// A100) for `precision` (kBf16, kFp16 or kFp32, without TF32); 0 for others.
double GpuPeakFlops(const std::string& name, model::Precision precision);

// The memory bandwidth of the GPUs named in the table, bytes/s (H100 SXM
// 3.35 TB/s, H100 PCIe 2.0, H200 4.8, A100 2.0); 0 for others.
double GpuPeakBandwidth(const std::string& name);

// The peak of `device` for `precision` (never kAuto): from the table on a
// GPU; on a CPU, measured by the best of several 1024 x 1024 matrix products
// in that precision on the threads the process has (about 0.2 s).
PeakFlops DevicePeakFlops(const c10::Device& device, model::Precision precision);

}  // namespace pbert::train
