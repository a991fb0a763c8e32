// The sums a step (or an interval of steps) produces, added over
// micro-batches and ranks before anything is divided, so that a metric is
// the same whether the sequences came packed or not, on one rank or many:
// the loss, the task's own sums (tasks::Task::SumNames), and what the host
// knows of the batches.
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <vector>

namespace at {
class Tensor;
}

namespace pbert::train {

struct StepMetrics {
  double loss = 0;           // the optimised loss, over the step
  std::vector<double> sums;  // the task's, in its SumNames() order
  double tokens = 0;         // real tokens
  double rows = 0;           // rows of max_len tokens (real + padding)
  double sequences = 0;
  double flops = 0;  // the model's training FLOPs (tasks::Task::TrainingFlops)

  // The host's fields on `device` after `device_sums` ([1 + K]: the loss,
  // then the task's K sums, on the device; undefined: zeros), for one sum
  // over the ranks and one read.
  at::Tensor WithDeviceSums(const at::Tensor& device_sums, size_t task_sums,
                            const c10::Device& device) const;
  // The other way: from what WithDeviceSums laid out (summed, read).
  static StepMetrics FromVector(const std::vector<double>& values, size_t task_sums);
  // Adds a whole other set (the next step of an interval).
  void Add(const StepMetrics& other);

  // Share of the rows' token slots that are padding.
  double PaddingShare(int max_len) const {
    return rows > 0 ? 1.0 - tokens / (rows * max_len) : 0.0;
  }
};

}  // namespace pbert::train
