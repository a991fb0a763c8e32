#include "kernels/fp8_cuda.h"

#include <cuda_bf16.h>

namespace pbert::kernels {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerThread = 4;  // a block of 32 x 8 threads takes a 32 x 32 tile

template <typename T>
__device__ inline float Load(const T* p, int64_t i);
template <>
__device__ inline float Load(const float* p, int64_t i) {
  return p[i];
}
template <>
__device__ inline float Load(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}

template <typename T>
__global__ void __launch_bounds__(kTile * kTile / kRowsPerThread)
    CastFp8Kernel(const T* x, int64_t rows, int64_t cols, int64_t padded_rows, const float* scale_in,
                  Fp8Kind kind, uint8_t* out, uint8_t* out_t, float* amax,
                  float* inverse_scale) {
  __shared__ uint8_t tile[kTile][kTile + 4];  // (+4: no bank conflicts on the transposed reads)
  __shared__ uint32_t block_largest;
  if (threadIdx.x == 0 && threadIdx.y == 0) block_largest = 0;
  __syncthreads();
  const float scale = *scale_in;
  if (inverse_scale != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 &&
      threadIdx.y == 0) {
    *inverse_scale = 1.0f / scale;
  }
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile;
  uint32_t largest = 0;
  for (int k = 0; k < kRowsPerThread; ++k) {
    const int local = threadIdx.y + k * (kTile / kRowsPerThread);
    const int64_t row = row0 + local;
    uint8_t q = 0;
    if (row < padded_rows && col < cols) {
      if (row < rows) {
        const float v = Load(x, row * cols + col);
        const uint32_t magnitude = MagnitudeBits(v);
        largest = magnitude > largest ? magnitude : largest;
        q = ToFp8(v * scale, kind);
      }
      out[row * cols + col] = q;
    }
    tile[local][threadIdx.x] = q;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const uint32_t other = __shfl_xor_sync(0xffffffffu, largest, offset);
    largest = other > largest ? other : largest;
  }
  if (threadIdx.x == 0) atomicMax(&block_largest, largest);
  __syncthreads();
  if (out_t != nullptr) {
    // The tile transposed: thread x writes row `row0 + x` of the columns
    // this thread row takes, so that consecutive threads write consecutive
    // bytes of out_t.
    const int64_t t_row = row0 + threadIdx.x;
    for (int k = 0; k < kRowsPerThread; ++k) {
      const int local = threadIdx.y + k * (kTile / kRowsPerThread);
      const int64_t t_col = static_cast<int64_t>(blockIdx.x) * kTile + local;
      if (t_col < cols && t_row < padded_rows) out_t[t_col * padded_rows + t_row] = tile[threadIdx.x][local];
    }
  }
  if (amax != nullptr && threadIdx.x == 0 && threadIdx.y == 0 && block_largest > 0) {
    atomicMax(reinterpret_cast<unsigned int*>(amax), block_largest);
  }
}

__global__ void UpdateFp8ScalesKernel(Fp8ScaleUpdate update) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < update.entries) UpdateFp8Entry(update, e);
}

}  // namespace

cudaError_t UpdateFp8Scales(const Fp8ScaleUpdate& update, cudaStream_t stream) {
  if (update.entries == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((update.entries + kThreads - 1) / kThreads);
  UpdateFp8ScalesKernel<<<blocks, kThreads, 0, stream>>>(update);
  return cudaGetLastError();
}

cudaError_t CastFp8(const Fp8Cast& c, cudaStream_t stream) {
  if (c.padded_rows == 0 || c.cols == 0) return cudaSuccess;
  if (c.padded_rows < c.rows) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((c.cols + kTile - 1) / kTile),
                  static_cast<unsigned>((c.padded_rows + kTile - 1) / kTile));
  const dim3 block(kTile, kTile / kRowsPerThread);
  if (grid.y > 65535) return cudaErrorInvalidValue;
  if (c.type == ElementType::kFloat) {
    CastFp8Kernel<float><<<grid, block, 0, stream>>>(static_cast<const float*>(c.x), c.rows, c.cols,
                                                     c.padded_rows, c.scale, c.kind, c.out, c.out_t,
                                                     c.amax, c.inverse_scale);
  } else {
    CastFp8Kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(c.x), c.rows, c.cols, c.padded_rows, c.scale, c.kind,
        c.out, c.out_t, c.amax, c.inverse_scale);
  }
  return cudaGetLastError();
}

}  // namespace pbert::kernels
