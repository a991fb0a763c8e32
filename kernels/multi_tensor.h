// The plan of a multi-tensor launch, after apex's multi_tensor_apply: a
// list of tensors (by their sizes) cut into chunks of `chunk` elements, one
// block a chunk, packed into launches of at most kTensors tensors and
// kBlocks blocks; a tensor whose chunks do not fit in one launch goes on in
// the next, in its first slot. Host code, no CUDA header, so that the
// planning is tested on the CPU (tests/kernels/multi_tensor_test.cc); the
// LAMB step and the gradient norm (kernels/lamb_cuda.cu) launch through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace pbert::kernels {

template <int kTensors, int kBlocks>
struct MultiTensorPlan {
  static_assert(kTensors <= 256, "a block's slot is one byte");
  int tensor[kTensors];   // each slot's tensor: its index in the caller's list
  int64_t n[kTensors];    // its elements
  unsigned char block_slot[kBlocks];  // each block's slot
  int block_chunk[kBlocks];           // and the chunk of that slot's tensor
  int slots = 0, blocks = 0;
};

// Calls run(plan) for each launch covering every chunk of every non-empty
// tensor of `sizes` once, in order; stops at the first call that returns
// other than a value-initialised result (cudaSuccess) and returns it.
template <int kTensors, int kBlocks, typename Run>
auto ForEachPlan(const std::vector<int64_t>& sizes, int64_t chunk, Run run) {
  using Result = decltype(run(std::declval<const MultiTensorPlan<kTensors, kBlocks>&>()));
  MultiTensorPlan<kTensors, kBlocks> plan{};
  int slot = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) continue;
    plan.tensor[slot] = static_cast<int>(i);
    plan.n[slot] = sizes[i];
    const int64_t chunks = (sizes[i] + chunk - 1) / chunk;
    for (int64_t c = 0; c < chunks; ++c) {
      plan.block_slot[plan.blocks] = static_cast<unsigned char>(slot);
      plan.block_chunk[plan.blocks] = static_cast<int>(c);
      ++plan.blocks;
      const bool last_chunk = c + 1 == chunks;
      if (plan.blocks == kBlocks || (last_chunk && slot + 1 == kTensors)) {
        plan.slots = slot + 1;
        if (Result r = run(plan); r != Result{}) return r;
        plan.blocks = 0;
        if (last_chunk) {
          slot = -1;
        } else {  // the tensor goes on in the next launch, as its first
          plan.tensor[0] = plan.tensor[slot];
          plan.n[0] = plan.n[slot];
          slot = 0;
        }
      }
    }
    ++slot;
  }
  if (plan.blocks == 0) return Result{};
  plan.slots = slot;
  return run(plan);
}

}  // namespace pbert::kernels
