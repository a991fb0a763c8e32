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

namespace pbert::model {

// In training, each element of `x` is zeroed with probability `p` and the
// others are scaled by 1/(1-p); otherwise, and for p == 0, returns `x`.
// Differentiable in `x`. Any floating dtype; x need not be contiguous.
// Tensors on other devices get LibTorch's dropout.
at::Tensor Dropout(const at::Tensor& x, double p, bool training);

}  // namespace pbert::model
