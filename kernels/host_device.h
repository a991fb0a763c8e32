// PBERT_HOST_DEVICE: a function nvcc compiles for the host and the device,
// and a C++ compiler for the host, as the per-element arithmetic of the
// fused kernels is (kernels/lamb_math.h, kernels/layer_math.h).
#pragma once

#if defined(__CUDACC__)
#define PBERT_HOST_DEVICE __host__ __device__
#else
#define PBERT_HOST_DEVICE
#endif
