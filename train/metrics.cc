#include "train/metrics.h"

#include <ATen/ATen.h>

#include "model/inputs.h"

namespace pbert::train {

at::Tensor StepMetrics::WithDeviceSums(const at::Tensor& device_sums, size_t task_sums,
                                       const c10::Device& device) const {
  at::Tensor host = model::HostToDevice(at::tensor({tokens, rows, sequences, flops}, at::kDouble),
                                        device);
  at::Tensor computed = device_sums.defined()
                            ? device_sums
                            : at::zeros({static_cast<int64_t>(task_sums) + 1},
                                        at::TensorOptions().dtype(at::kDouble).device(device));
  return at::cat({computed, host});
}

StepMetrics StepMetrics::FromVector(const std::vector<double>& values, size_t task_sums) {
  StepMetrics m;
  size_t i = 0;
  auto next = [&] { return i < values.size() ? values[i++] : 0.0; };
  m.loss = next();
  for (size_t k = 0; k < task_sums; ++k) m.sums.push_back(next());
  m.tokens = next();
  m.rows = next();
  m.sequences = next();
  m.flops = next();
  return m;
}

void StepMetrics::Add(const StepMetrics& o) {
  loss += o.loss;
  if (sums.size() < o.sums.size()) sums.resize(o.sums.size(), 0.0);
  for (size_t k = 0; k < o.sums.size(); ++k) sums[k] += o.sums[k];
  tokens += o.tokens;
  rows += o.rows;
  sequences += o.sequences;
  flops += o.flops;
}

}  // namespace pbert::train
