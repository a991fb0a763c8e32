#include "kernels/lamb_cuda.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/multi_tensor.h"

namespace pbert::kernels {
namespace {

constexpr int kMaxTensors = 24;  // per launch
constexpr int kMaxBlocks = 320;  // per launch
constexpr int kChunk = 16384;    // elements per block
constexpr int kThreads = 512;

// One launch's work: its plan (which tensors, and which chunk of which
// tensor each block takes) and each slot's buffers (kept under the 4 KB of
// a kernel's parameters).
struct Launch {
  MultiTensorPlan<kMaxTensors, kMaxBlocks> plan;  // plan.tensor: its place in the group (norms)
  float* w[kMaxTensors];
  const void* g[kMaxTensors];
  float* m[kMaxTensors];
  float* v[kMaxTensors];
  float* u[kMaxTensors];
  __nv_bfloat16* w16[kMaxTensors];  // null: no bf16 copy
};

// Sums `value` over the block into `out` (one atomic add per block).
__device__ void BlockSum(double value, double* out) {
  __shared__ double partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < kThreads / 32 ? partial[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2)
      value += __shfl_down_sync(0xffffffffu, value, offset);
    if (lane == 0) atomicAdd(out, value);
  }
  __syncthreads();
}

__device__ inline float ToFloat(float x) { return x; }
__device__ inline float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename G>
__global__ void __launch_bounds__(kThreads)
    LambDirectionKernel(Launch launch, LambScalars s, const double* clip, double* norms,
                        int tensors) {
  if (clip != nullptr) s.clip = static_cast<float>(*clip);
  const int t = launch.plan.block_slot[blockIdx.x];
  const G* g = static_cast<const G*>(launch.g[t]);
  const int64_t begin = static_cast<int64_t>(launch.plan.block_chunk[blockIdx.x]) * kChunk;
  const int64_t n = launch.plan.n[t];
  const int64_t end = begin + kChunk < n ? begin + kChunk : n;
  double w_sq = 0, u_sq = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float w = launch.w[t][i];
    float m = launch.m[t][i], v = launch.v[t][i];
    const float u = LambDirection(ToFloat(g[i]), w, m, v, s);
    launch.m[t][i] = m;
    launch.v[t][i] = v;
    launch.u[t][i] = u;
    w_sq += static_cast<double>(w) * w;
    u_sq += static_cast<double>(u) * u;
  }
  BlockSum(w_sq, norms + launch.plan.tensor[t]);
  BlockSum(u_sq, norms + tensors + launch.plan.tensor[t]);
}

__global__ void __launch_bounds__(kThreads)
    LambApplyKernel(Launch launch, const double* norms, int tensors, bool trust_ratio, float lr) {
  const int t = launch.plan.block_slot[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(launch.plan.block_chunk[blockIdx.x]) * kChunk;
  const int64_t n = launch.plan.n[t];
  const int64_t end = begin + kChunk < n ? begin + kChunk : n;
  const int k = launch.plan.tensor[t];
  const float ratio = LambTrustRatio(sqrt(norms[k]), sqrt(norms[tensors + k]), trust_ratio);
  __nv_bfloat16* w16 = launch.w16[t];
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float w = LambApply(launch.w[t][i], launch.u[t][i], ratio, lr);
    launch.w[t][i] = w;
    if (w16 != nullptr) w16[i] = __float2bfloat16_rn(w);
  }
}

// Calls `run(launch, blocks)` for each launch that covers the group's
// tensors chunk by chunk (ForEachPlan).
template <typename Run>
cudaError_t ForEachLaunch(const LambGroup& group, Run run) {
  Launch launch{};
  return ForEachPlan<kMaxTensors, kMaxBlocks>(
      group.sizes, kChunk, [&](const MultiTensorPlan<kMaxTensors, kMaxBlocks>& plan) {
        launch.plan = plan;
        for (int slot = 0; slot < plan.slots; ++slot) {
          const int i = plan.tensor[slot];
          launch.w[slot] = group.weights[i];
          launch.g[slot] = group.grads[i];
          launch.m[slot] = group.exp_avg[i];
          launch.v[slot] = group.exp_avg_sq[i];
          launch.u[slot] = group.update[i];
          launch.w16[slot] = group.bf16_weights.empty()
                                 ? nullptr
                                 : reinterpret_cast<__nv_bfloat16*>(group.bf16_weights[i]);
        }
        return run(launch, plan.blocks);
      });
}

constexpr int kMaxNormTensors = 96;  // per launch of SquaredNormsKernel

struct NormLaunch {
  MultiTensorPlan<kMaxNormTensors, kMaxBlocks> plan;
  const void* x[kMaxNormTensors];
};

template <typename T>
__global__ void __launch_bounds__(kThreads) SquaredNormsKernel(NormLaunch launch, double* norms) {
  const int t = launch.plan.block_slot[blockIdx.x];
  const T* x = static_cast<const T*>(launch.x[t]);
  const int64_t begin = static_cast<int64_t>(launch.plan.block_chunk[blockIdx.x]) * kChunk;
  const int64_t n = launch.plan.n[t];
  const int64_t end = begin + kChunk < n ? begin + kChunk : n;
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double v = ToFloat(x[i]);
    sum += v * v;
  }
  BlockSum(sum, norms + launch.plan.tensor[t]);
}

}  // namespace

cudaError_t SquaredNorms(const std::vector<const void*>& tensors, const std::vector<int64_t>& sizes,
                         bool bf16, double* norms, cudaStream_t stream) {
  if (tensors.empty()) return cudaSuccess;
  if (cudaError_t e = cudaMemsetAsync(norms, 0, sizeof(double) * tensors.size(), stream);
      e != cudaSuccess) {
    return e;
  }
  NormLaunch launch{};
  return ForEachPlan<kMaxNormTensors, kMaxBlocks>(
      sizes, kChunk, [&](const MultiTensorPlan<kMaxNormTensors, kMaxBlocks>& plan) {
        launch.plan = plan;
        for (int slot = 0; slot < plan.slots; ++slot) launch.x[slot] = tensors[plan.tensor[slot]];
        if (bf16) {
          SquaredNormsKernel<__nv_bfloat16><<<plan.blocks, kThreads, 0, stream>>>(launch, norms);
        } else {
          SquaredNormsKernel<float><<<plan.blocks, kThreads, 0, stream>>>(launch, norms);
        }
        return cudaGetLastError();
      });
}

cudaError_t LambStep(const LambGroup& group, double* norms, cudaStream_t stream) {
  const int tensors = static_cast<int>(group.sizes.size());
  if (tensors == 0) return cudaSuccess;
  if (cudaError_t e = cudaMemsetAsync(norms, 0, sizeof(double) * 2 * tensors, stream);
      e != cudaSuccess) {
    return e;
  }
  cudaError_t e = ForEachLaunch(group, [&](const Launch& launch, int blocks) {
    if (group.bf16_grads) {
      LambDirectionKernel<__nv_bfloat16>
          <<<blocks, kThreads, 0, stream>>>(launch, group.scalars, group.clip, norms, tensors);
    } else {
      LambDirectionKernel<float>
          <<<blocks, kThreads, 0, stream>>>(launch, group.scalars, group.clip, norms, tensors);
    }
    return cudaGetLastError();
  });
  if (e != cudaSuccess) return e;
  return ForEachLaunch(group, [&](const Launch& launch, int blocks) {
    LambApplyKernel<<<blocks, kThreads, 0, stream>>>(launch, norms, tensors, group.trust_ratio,
                                                     group.lr);
    return cudaGetLastError();
  });
}

}  // namespace pbert::kernels
