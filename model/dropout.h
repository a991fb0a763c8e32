// Dropout with a counter-based random mask, drawn in parallel.
//
// LibTorch 1.13 built without MKL (Debian's) draws dropout masks with
// bernoulli_, one Mersenne-Twister number per element on one thread: at BERT's
// shapes that was the costliest operator of a CPU training step, ahead of
// the matrix products (bench/step --profile). Here the keep/drop decision of
// element i is a bit of a SplitMix64 hash of (seed, i): computed in parallel,
// the same for any thread count, fused with the scaling into one pass, and
// kept as one byte per element for the backward pass. The seed is drawn from
// LibTorch's default CPU generator, so torch::manual_seed and a saved
// generator state reproduce the masks, as they do for nn::Dropout.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "kernels/layer_math.h"

namespace pbert::model {

// One dropout mask's draw: its seed from LibTorch's default CPU generator
// (so torch::manual_seed and a saved generator state reproduce it) and p
// in units of 2^-32. The mask itself is kernels::DropoutKeeps, on the CPU
// (DropoutMask) and in the fused layers' CUDA kernels alike.
kernels::DropoutBits DrawDropout(double p);
// 1 / (1 - p) for the p the threshold stands for: the expectation exact.
double DropoutScale(const kernels::DropoutBits& bits);
// The mask of `n` elements, one byte each (1: kept), on the CPU.
at::Tensor DropoutMask(int64_t n, const kernels::DropoutBits& bits);
// x * mask * scale, elementwise (x contiguous or not, any floating dtype,
// on the CPU), in x's shape.
at::Tensor ApplyDropoutMask(const at::Tensor& x, const at::Tensor& mask, double scale);

// Where a captured micro-batch (train/captured_step.h) keeps the seeds of
// its dropout masks. A CUDA graph replays its kernels with the arguments
// they were captured with, so a seed passed by value would draw the same
// masks at every replay. While a Recording of these slots is alive on a
// thread, each DrawDropout there draws its seed as always and also hands
// out the next slot (DropoutBits::seed_slot), from which the fused layers'
// kernels read the seed when they run. Before each replay, Refill draws as
// many seeds, in the same order, from LibTorch's default CPU generator and
// writes them to the slots: the masks an eager micro-batch would draw from
// that generator state, and the generator left where those draws leave it.
class DropoutSeedSlots {
 public:
  // `capacity` seeds (int64) on `device`.
  DropoutSeedSlots(const c10::Device& device, int64_t capacity);

  class Recording {
   public:
    explicit Recording(DropoutSeedSlots& slots);  // from slot 0; one per thread at a time
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;
  };

  // A CPU stand-in for a graph's replay (tests/train/host_graph.h): while
  // one is alive on this thread, a Recording's DrawDropout calls draw
  // nothing and take their seeds from the slots in turn (on the CPU), as
  // the kernels of a replay read them.
  class HostReplay {
   public:
    HostReplay();
    ~HostReplay();
    HostReplay(const HostReplay&) = delete;
    HostReplay& operator=(const HostReplay&) = delete;
  };

  // The slots the last recording handed out.
  int64_t used() const { return used_; }
  // Draws used() seeds from the CPU generator, as that many DrawDropout
  // calls would, and writes them to the slots, ordered on the device's
  // current stream before the work queued after it.
  void Refill();
  // The slots' values, on the CPU (tests).
  at::Tensor Values() const;

 private:
  friend kernels::DropoutBits DrawDropout(double p);
  const uint64_t* Take();  // the next slot; throws past the capacity
  // The next slot, which on the CPU holds `seed` at once: a stand-in's
  // first run of the recorded work reads it there, as a replay's kernels
  // read what Refill wrote (a GPU's capture runs no kernel).
  const uint64_t* Take(uint64_t seed);

  at::Tensor slots_;
  int64_t used_ = 0;
};

// In training, each element of `x` is zeroed with probability `p` and the
// others are scaled by 1/(1-p); otherwise, and for p == 0, returns `x`.
// Differentiable in `x`. Any floating dtype; x need not be contiguous.
// Tensors on other devices get LibTorch's dropout.
at::Tensor Dropout(const at::Tensor& x, double p, bool training);

}  // namespace pbert::model
