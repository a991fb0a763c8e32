// LAMB's per-element arithmetic, one definition for the CPU and the GPU:
// the fused CUDA kernels (kernels/lamb_cuda.cu) run it on the device, and a
// CPU test (tests/optim/lamb_math_test.cc) checks it against optim::Lamb,
// LibTorch's multi-tensor operations, to a few ulps. In fp32, rounding as
// those operations round (each scalar a float, each operation its own).
#pragma once

#include <cmath>

#include "kernels/host_device.h"

namespace pbert::kernels {

// The scalars of one step of one parameter group.
struct LambScalars {
  float beta1 = 0.9f, one_minus_beta1 = 0.1f;  // (1 - beta1, rounded once, as ATen's alpha)
  float beta2 = 0.999f, one_minus_beta2 = 0.001f;
  float bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^t, or 1
  float eps = 1e-6f, weight_decay = 0;
  float clip = 1;  // the clipping coefficient min(1, max_norm / norm), folded in
};

// Phase 1 of a step for one element: the moments m and v move towards the
// (clipped) gradient g, and the update direction is returned:
//   g' = clip g;  m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   u = (m / c1) / (sqrt(v / c2) + eps) + weight_decay w
PBERT_HOST_DEVICE inline float LambDirection(float g, float w, float& m, float& v,
                                             const LambScalars& s) {
  g = g * s.clip;
  m = m * s.beta1;
  m = m + s.one_minus_beta1 * g;
  v = v * s.beta2;
  v = v + s.one_minus_beta2 * g * g;
  const float denominator = sqrtf(v / s.bias_correction2) + s.eps;
  return (m / s.bias_correction1) / denominator + s.weight_decay * w;
}

// A tensor's trust ratio ||w|| / ||u|| from the norms (accumulated in
// double), 1 where either is 0 or the group takes none.
PBERT_HOST_DEVICE inline float LambTrustRatio(double w_norm, double u_norm, bool trust_ratio) {
  return trust_ratio && w_norm > 0 && u_norm > 0 ? static_cast<float>(w_norm / u_norm) : 1.0f;
}

// Phase 2 for one element: w - lr (ratio u).
PBERT_HOST_DEVICE inline float LambApply(float w, float u, float ratio, float lr) {
  return w + (-lr) * (u * ratio);
}

}  // namespace pbert::kernels
