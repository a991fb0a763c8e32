#include "kernels/layer_cuda.h"

#include <cuda_bf16.h>

#include <type_traits>

namespace pbert::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxRowBlocks = 1 << 16;  // blocks of a forward kernel

__device__ inline float Load(const float* p, int64_t i) { return p[i]; }
__device__ inline float Load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ inline void Store(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void Store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
// The value as stored in T (rounded to nearest even for bf16).
template <typename T>
__device__ inline float Round(float v) {
  if constexpr (sizeof(T) == 2) {
    return __bfloat162float(__float2bfloat16_rn(v));
  } else {
    return v;
  }
}

// The sums of a and b over the block, in every thread; the same order of
// additions in every run.
__device__ inline float2 BlockSums(float a, float b) {
  __shared__ float2 partial[kWarps];
  for (int offset = 16; offset > 0; offset /= 2) {
    a += __shfl_xor_sync(0xffffffffu, a, offset);
    b += __shfl_xor_sync(0xffffffffu, b, offset);
  }
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = make_float2(a, b);
  __syncthreads();
  float2 total = make_float2(0.f, 0.f);
  for (int w = 0; w < kWarps; ++w) {
    total.x += partial[w].x;
    total.y += partial[w].y;
  }
  __syncthreads();  // before the next call writes `partial`
  return total;
}

template <typename T, typename P>
__global__ void __launch_bounds__(kThreads)
    BiasGeluForwardKernel(const T* y, const P* bias, T* out, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * cols;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
      Store(out, row + c, Gelu(Load(y, row + c) + Load(bias, c)));
    }
  }
}

// Each thread owns columns threadIdx.x + k * kThreads of every row its
// block takes, and sums them in shared memory that no other thread touches.
template <typename T, typename P>
__global__ void __launch_bounds__(kThreads)
    BiasGeluBackwardKernel(const T* grad, const T* y, const P* bias, T* dy, float* partials,
                           int64_t rows, int64_t cols) {
  extern __shared__ float bias_sum[];
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) bias_sum[c] = 0.f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * cols;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
      const float d = Load(grad, row + c) * GeluGrad(Load(y, row + c) + Load(bias, c));
      Store(dy, row + c, d);
      bias_sum[c] += d;
    }
  }
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
    partials[blockIdx.x * cols + c] = bias_sum[c];
  }
}

template <typename T, typename P>
__global__ void __launch_bounds__(kThreads)
    NormForwardKernel(const T* y, const P* bias, const P* residual, const P* gamma, const P* beta,
                      P* z, P* out, float* mean_out, float* rstd_out, int64_t rows, int64_t cols,
                      DropoutBits slot_bits, float scale, float eps) {
  const DropoutBits bits = SeedOf(slot_bits);
  const float inv_cols = 1.f / static_cast<float>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * cols;
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
      const float kept = DropoutKeeps(bits, row + c) ? scale : 0.f;
      const float v = Round<P>((Load(y, row + c) + Load(bias, c)) * kept + Load(residual, row + c));
      Store(z, row + c, v);
      sum += v;
    }
    const float mean = BlockSums(sum, 0.f).x * inv_cols;
    float squares = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
      const float d = Load(z, row + c) - mean;  // this thread's own store
      squares += d * d;
    }
    const float rstd = rsqrtf(BlockSums(squares, 0.f).x * inv_cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
      Store(out, row + c, (Load(z, row + c) - mean) * rstd * Load(gamma, c) + Load(beta, c));
    }
    if (threadIdx.x == 0) {
      mean_out[r] = mean;
      rstd_out[r] = rstd;
    }
  }
}

// dz = rstd (g gamma - mean(g gamma) - xhat mean(g gamma xhat)), as ATen's
// LayerNorm backward; dy = dz through the dropout mask.
template <typename T, typename P>
__global__ void __launch_bounds__(kThreads)
    NormBackwardKernel(const P* grad, const P* z, const float* mean_in, const float* rstd_in,
                       const P* gamma, P* dz, T* dy, float* bias_partials, float* gamma_partials,
                       float* beta_partials, int64_t rows, int64_t cols, DropoutBits slot_bits,
                       float scale) {
  const DropoutBits bits = SeedOf(slot_bits);
  extern __shared__ float sums[];  // bias, gamma, beta: cols each
  float* bias_sum = sums;
  float* gamma_sum = sums + cols;
  float* beta_sum = sums + 2 * cols;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
    bias_sum[c] = gamma_sum[c] = beta_sum[c] = 0.f;
  }
  const float inv_cols = 1.f / static_cast<float>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * cols;
    const float mean = mean_in[r], rstd = rstd_in[r];
    float sum_g = 0.f, sum_gx = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
      const float g = Load(grad, row + c);
      const float xhat = (Load(z, row + c) - mean) * rstd;
      const float gg = g * Load(gamma, c);
      sum_g += gg;
      sum_gx += gg * xhat;
      gamma_sum[c] += g * xhat;
      beta_sum[c] += g;
    }
    const float2 s = BlockSums(sum_g, sum_gx);
    const float mean_g = s.x * inv_cols, mean_gx = s.y * inv_cols;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
      const float xhat = (Load(z, row + c) - mean) * rstd;
      const float d = rstd * (Load(grad, row + c) * Load(gamma, c) - mean_g - xhat * mean_gx);
      Store(dz, row + c, d);
      const float du = DropoutKeeps(bits, row + c) ? d * scale : 0.f;
      Store(dy, row + c, du);
      bias_sum[c] += du;
    }
  }
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
    bias_partials[blockIdx.x * cols + c] = bias_sum[c];
    gamma_partials[blockIdx.x * cols + c] = gamma_sum[c];
    beta_partials[blockIdx.x * cols + c] = beta_sum[c];
  }
}

// Calls f(T*, P*) with the two element types' null pointers: one
// instantiation per pair.
template <typename F>
cudaError_t Dispatch(ElementType act, ElementType param, F f) {
  using B = __nv_bfloat16;
  if (act == ElementType::kFloat) {
    if (param == ElementType::kFloat) return f(static_cast<float*>(nullptr), static_cast<float*>(nullptr));
    return f(static_cast<float*>(nullptr), static_cast<B*>(nullptr));
  }
  if (param == ElementType::kFloat) return f(static_cast<B*>(nullptr), static_cast<float*>(nullptr));
  return f(static_cast<B*>(nullptr), static_cast<B*>(nullptr));
}

int RowBlocks(int64_t rows) { return static_cast<int>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks); }

}  // namespace

cudaError_t BiasGeluForward(const void* y, const void* bias, void* out, int64_t rows, int64_t cols,
                            ElementType act, ElementType param, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return Dispatch(act, param, [&](auto* t, auto* p) {
    using T = std::remove_pointer_t<decltype(t)>;
    using P = std::remove_pointer_t<decltype(p)>;
    BiasGeluForwardKernel<T, P><<<RowBlocks(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(y), static_cast<const P*>(bias), static_cast<T*>(out), rows, cols);
    return cudaGetLastError();
  });
}

cudaError_t BiasGeluBackward(const void* grad, const void* y, const void* bias, void* dy,
                             float* bias_partials, int64_t rows, int64_t cols, ElementType act,
                             ElementType param, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (cols > kMaxGeluCols) return cudaErrorInvalidValue;
  return Dispatch(act, param, [&](auto* t, auto* p) {
    using T = std::remove_pointer_t<decltype(t)>;
    using P = std::remove_pointer_t<decltype(p)>;
    const size_t shared = sizeof(float) * static_cast<size_t>(cols);
    BiasGeluBackwardKernel<T, P><<<static_cast<int>(ColumnBlocks(rows)), kThreads, shared, stream>>>(
        static_cast<const T*>(grad), static_cast<const T*>(y), static_cast<const P*>(bias),
        static_cast<T*>(dy), bias_partials, rows, cols);
    return cudaGetLastError();
  });
}

cudaError_t BiasDropoutAddNormForward(const NormForward& a, int64_t rows, int64_t cols,
                                      DropoutBits bits, float scale, float eps, ElementType act,
                                      ElementType param, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return Dispatch(act, param, [&](auto* t, auto* p) {
    using T = std::remove_pointer_t<decltype(t)>;
    using P = std::remove_pointer_t<decltype(p)>;
    NormForwardKernel<T, P><<<RowBlocks(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(a.y), static_cast<const P*>(a.bias),
        static_cast<const P*>(a.residual), static_cast<const P*>(a.gamma),
        static_cast<const P*>(a.beta), static_cast<P*>(a.z), static_cast<P*>(a.out), a.mean,
        a.rstd, rows, cols, bits, scale, eps);
    return cudaGetLastError();
  });
}

cudaError_t BiasDropoutAddNormBackward(const NormBackward& a, int64_t rows, int64_t cols,
                                       DropoutBits bits, float scale, ElementType act,
                                       ElementType param, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (cols > kMaxNormCols) return cudaErrorInvalidValue;
  return Dispatch(act, param, [&](auto* t, auto* p) {
    using T = std::remove_pointer_t<decltype(t)>;
    using P = std::remove_pointer_t<decltype(p)>;
    const size_t shared = 3 * sizeof(float) * static_cast<size_t>(cols);
    NormBackwardKernel<T, P><<<static_cast<int>(ColumnBlocks(rows)), kThreads, shared, stream>>>(
        static_cast<const P*>(a.grad), static_cast<const P*>(a.z), a.mean, a.rstd,
        static_cast<const P*>(a.gamma), static_cast<P*>(a.dz), static_cast<T*>(a.dy),
        a.bias_partials, a.gamma_partials, a.beta_partials, rows, cols, bits, scale);
    return cudaGetLastError();
  });
}

}  // namespace pbert::kernels
