// What a weights reader's caller does with its tensors: read each one
// whole (a tensor that points outside its bytes shows under the sanitizers).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "formats/named_tensors.h"

namespace pbert::fuzz {

inline uint64_t TouchTensors(const formats::NamedTensors& tensors) {
  uint64_t sum = 0;
  for (const auto& [name, tensor] : tensors) {
    sum += name.size();
    if (!tensor.defined()) continue;
    const at::Tensor t = tensor.contiguous();
    const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
    const size_t size = static_cast<size_t>(t.numel()) * t.element_size();
    for (size_t k = 0; k < size; ++k) sum += bytes[k];
  }
  return sum;
}

}  // namespace pbert::fuzz
