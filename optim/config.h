// The config's optim section: LAMB, its learning-rate schedule, gradient
// clipping, accumulation, and the paper's adjustment for packed rows.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/config_field.h"
#include "optim/lamb.h"
#include "optim/packing_adjustment.h"
#include "optim/schedule.h"

namespace pbert::optim {

struct OptimConfig {
  ScheduleOptions schedule;  // lr, schedule, warmup, total steps, decay
  LambOptions lamb;          // betas, eps, weight decay, bias correction
  bool exclude_from_trust_ratio = true;
  double max_grad_norm = 1.0;
  int64_t accumulation_steps = 1;
  PackingAdjustment packing_adjustment = PackingAdjustment::kBetas;
  bool fused = true;

  template <class V>
  void Visit(V& v) {
    v.Include(&schedule);
    v.Include(&lamb);
    v.Field("exclude_from_trust_ratio", &exclude_from_trust_ratio,
            "bias and LayerNorm also skip the trust ratio");
    v.Field("max_grad_norm", &max_grad_norm, "global gradient clipping; 0 = none",
            config::InRange(0.0, 1e6));
    v.Field("accumulation_steps", &accumulation_steps, "micro-batches per optimizer step",
            config::InRange<int64_t>(1, 1 << 16));
    v.Field("packing_adjustment", &packing_adjustment,
            "betas: beta^p; batch: accumulation / p; p = the packing factor");
    v.Field("fused", &fused,
            "on CUDA, LAMB's fused multi-tensor kernels (clipping folded in); the CPU always "
            "runs LibTorch's _foreach operations");
  }
  absl::Status Validate() const { return schedule.Validate(); }

  // This section after the packing adjustment for rows of `packing_factor`
  // sequences on average (1: unpacked): the betas of LAMB and the
  // accumulation it trains with.
  absl::StatusOr<OptimConfig> AdjustedFor(double packing_factor) const;

  // What the adjustment did, for logs and config.yaml: "optimizer after the
  // packing adjustment (betas, packing factor 2.589...): beta1 ..., ...".
  std::string DescribeAdjustment(const OptimConfig& adjusted, double packing_factor) const;

  // This section's levers that cannot act on a GPU or not, each with why.
  void Inactive(bool device_is_cuda, config::InactiveKeys* keys) const;
};

}  // namespace pbert::optim
