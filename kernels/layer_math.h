// The per-element arithmetic of the fused layer operations, one definition
// for the CPU and the GPU: the dropout mask (model/dropout.cc draws it on
// the CPU, kernels/layer_cuda.cu on the device, the same bits for the same
// seed) and exact GELU with its derivative.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace pbert::kernels {

// SplitMix64's finaliser: a bijective mix of a 64-bit counter.
PBERT_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One dropout draw: the seed of the mask and the drop threshold, p in units
// of 2^-32 (DrawDropout in model/dropout.h makes it). In a captured step
// (train/captured_step.h) the seed lives in device memory instead, written
// before each replay: `seed_slot` points there, and the CUDA kernels read
// the seed from it when they run (SeedOf); host code never sets it.
struct DropoutBits {
  uint64_t seed = 0;
  uint32_t threshold = 0;  // 0: nothing is dropped
  const uint64_t* seed_slot = nullptr;
};

#ifdef __CUDACC__
// The bits a kernel draws with: the seed read from its slot where it has
// one.
__device__ inline DropoutBits SeedOf(DropoutBits bits) {
  if (bits.seed_slot != nullptr) bits.seed = *bits.seed_slot;
  return bits;
}
#endif

// The hash of elements 2 j and 2 j + 1 of a mask: 32 bits each.
PBERT_HOST_DEVICE inline uint64_t DropoutPairHash(DropoutBits bits, int64_t j) {
  return Mix64(bits.seed + static_cast<uint64_t>(j) * 0x9e3779b97f4a7c15ULL);
}

// Whether a half (32 bits) of a pair's hash keeps its element.
PBERT_HOST_DEVICE inline bool DropoutHalfKeeps(DropoutBits bits, uint32_t half) {
  return half >= bits.threshold;
}

// Whether element i keeps its value: the low 32 bits of the hash of
// (seed, i / 2) for even i, the high ones for odd i, at or above the
// threshold. Counter-based, so any thread (or device) computes any element.
PBERT_HOST_DEVICE inline bool DropoutKeeps(DropoutBits bits, int64_t i) {
  const uint64_t hash = DropoutPairHash(bits, i / 2);
  return DropoutHalfKeeps(bits, static_cast<uint32_t>((i & 1) != 0 ? hash >> 32 : hash));
}

// Exact (erf) GELU, as BERT and ATen's at::gelu compute it, in fp32.
PBERT_HOST_DEVICE inline float Gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

// d gelu(x) / dx = Phi(x) + x phi(x), as ATen's gelu_backward.
PBERT_HOST_DEVICE inline float GeluGrad(float x) {
  const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
  const float pdf = expf(-0.5f * x * x) * 0.39894228040143268f;
  return cdf + x * pdf;
}

}  // namespace pbert::kernels
