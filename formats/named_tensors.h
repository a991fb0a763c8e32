// What every tensor file reader returns: tensors with their names, in a
// file's order.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace pbert::formats {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The most dimensions a tensor of a file may have: every reader refuses
// more (a model's tensors have at most 4; LibTorch's own limit is far
// beyond what a sane file holds, and each dimension costs memory).
inline constexpr size_t kMaxTensorRank = 8;

}  // namespace pbert::formats
