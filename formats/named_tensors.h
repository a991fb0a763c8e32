// What every tensor file reader returns: tensors with their names, in a
// file's order.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace pbert::formats {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace pbert::formats
