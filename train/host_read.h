// The one way the training step and the evaluator read values back from
// the training device. On a GPU a read waits for every kernel queued before
// it, so the host cannot queue the next kernels meanwhile: a step makes one
// read, at its end, which carries the metrics, the gradient norm and the
// finite check; an evaluation makes one. Tests count them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace pbert::train {

// `values` (1-D, any floating or bool dtype, on any device) as doubles on
// the host.
std::vector<double> ReadToHost(const at::Tensor& values);

// `values` (any shape and dtype, on any device) on the host, as it is: the
// one read of an evaluation that gathers outputs.
at::Tensor ReadTensorToHost(const at::Tensor& values);

// How many reads this process has made.
uint64_t HostReads();

}  // namespace pbert::train
