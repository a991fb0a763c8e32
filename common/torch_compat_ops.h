// The differences between LibTorch versions in the operators packed-bert
// calls (attention, autocast); the rest is in common/torch_compat.h.
#pragma once

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "common/torch_compat.h"

#include <ATen/ops/_foreach_mul.h>
#if PBERT_TORCH_AT_LEAST(2, 2)
#include <ATen/ops/_foreach_copy.h>
#endif
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/stack.h>

#include <vector>

#if PBERT_TORCH_AT_LEAST(2, 6)
#include <ATen/ops/_flash_attention_forward.h>
#endif
#if PBERT_TORCH_AT_LEAST(2, 0)
#include <ATen/ops/scaled_dot_product_attention.h>
#else
#include <ATen/ops/_scaled_dot_product_attention.h>
#endif

namespace pbert::torch_compat {

// softmax(q k^T / sqrt(d) + mask) v with dropout on the probabilities, on
// [..., L, d] tensors; `mask` is additive or boolean (true: attend). 1.13
// has the private op (a tuple); 2.x the public one, with the fused CPU
// kernels behind it.
inline at::Tensor ScaledDotProductAttention(const at::Tensor& q, const at::Tensor& k,
                                            const at::Tensor& v, const at::Tensor& mask,
                                            double dropout_p) {
#if PBERT_TORCH_AT_LEAST(2, 0)
  return at::scaled_dot_product_attention(q, k, v, mask, dropout_p);
#else
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v, mask, dropout_p));
#endif
}

// The L2 norm of each tensor of `tensors`, accumulated in double, as one
// [N] float64 tensor on their device. Since 2.4 _foreach_norm takes the
// accumulation dtype (one multi-tensor kernel on CUDA); before, one norm
// per tensor.
inline at::Tensor ForeachNorms(const std::vector<at::Tensor>& tensors) {
#if PBERT_TORCH_AT_LEAST(2, 4)
  return at::stack(at::_foreach_norm(tensors, 2, at::kDouble));
#else
  std::vector<at::Tensor> norms;
  norms.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    norms.push_back(at::linalg_vector_norm(t, 2, c10::nullopt, false, at::kDouble));
  }
  return at::stack(norms);
#endif
}

// Multiplies every tensor of `tensors` in place by the 0-dim tensor
// `factor`, on the device, in one multi-tensor call: since 2.1 the
// overload for one device scalar (a few kernels on CUDA); before, the list
// overload with `factor` for each.
inline void ForeachMulByTensor(std::vector<at::Tensor>& tensors, const at::Tensor& factor) {
  if (tensors.empty()) return;
#if PBERT_TORCH_AT_LEAST(2, 1)
  at::_foreach_mul_(tensors, factor);
#else
  at::_foreach_mul_(tensors, std::vector<at::Tensor>(tensors.size(), factor));
#endif
}

// Copies each of `src` into `dst` (the dtypes may differ: a cast). Since
// 2.2 one multi-tensor call; before, one copy per tensor.
inline void ForeachCopy(std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& src) {
  if (dst.empty()) return;
#if PBERT_TORCH_AT_LEAST(2, 2)
  at::_foreach_copy_(dst, src);
#else
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
#endif
}

// FlashAttention's variable-length forward (CUDA, fp16/bf16, head width a
// multiple of 8 up to 256): q, k, v [T, heads, d] of N sequences whose
// starts among the T, then T, are `cu_seqlens` ([N+1] int32); each attends
// within itself. Differentiable through the dispatcher (its backward is
// _flash_attention_backward); dropout draws from the CUDA generator. The
// 15-argument interface is 2.6's (and 2.11's); before 2.6 there is none
// (PBERT_HAS_FLASH_VARLEN unset).
#if PBERT_TORCH_AT_LEAST(2, 6)
#define PBERT_HAS_FLASH_VARLEN 1
inline at::Tensor FlashAttentionVarlen(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const at::Tensor& cu_seqlens,
                                       int64_t max_seqlen, double dropout_p) {
  return std::get<0>(at::_flash_attention_forward(
      q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, dropout_p, /*is_causal=*/false,
      /*return_debug_mask=*/false));
}
#endif

// Autocast's state for one device type: 1.13 has one function per device
// (set_cpu_enabled, set_autocast_gpu_dtype); 2.x takes the device type.
inline bool AutocastEnabled(c10::DeviceType device) {
#if PBERT_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                         : at::autocast::is_cpu_enabled();
#endif
}

inline void SetAutocastEnabled(c10::DeviceType device, bool enabled) {
#if PBERT_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

inline c10::ScalarType AutocastDtype(c10::DeviceType device) {
#if PBERT_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

// The dtype of a product of `x` by a weight: autocast's where it is on for
// x's device, else x's own.
inline c10::ScalarType ProductDtype(const at::Tensor& x) {
  const c10::DeviceType device = x.device().type();
  return AutocastEnabled(device) ? AutocastDtype(device) : x.scalar_type();
}

inline void SetAutocastDtype(c10::DeviceType device, c10::ScalarType dtype) {
#if PBERT_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

}  // namespace pbert::torch_compat
