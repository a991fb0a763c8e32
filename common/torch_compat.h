// The differences between the LibTorch versions packed-bert builds against,
// in one place: 1.13 (Debian 12) and 2.x (Debian 13's 2.6, pip wheels,
// NVIDIA's containers). Header-only; included only by targets that link
// LibTorch. docs/building.md lists the supported versions.
#pragma once

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

#include <string>

#define PBERT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if PBERT_TORCH_AT_LEAST(2, 0)
#include <ATen/ops/scaled_dot_product_attention.h>
#else
#include <ATen/ops/_scaled_dot_product_attention.h>
#endif

namespace c10d {
class ProcessGroup;
class Backend;
struct TCPStoreOptions;
}  // namespace c10d

namespace pbert::torch_compat {

// "1.13.0", "2.6.0": the LibTorch this build compiled against.
inline std::string Version() { return TORCH_VERSION; }

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

// The key of a parameter's state in torch::optim::Optimizer::state(): its
// TensorImpl's address, as text in 1.13 and as the pointer in 2.x.
inline auto OptimizerStateKey(const at::Tensor& parameter) {
#if PBERT_TORCH_AT_LEAST(2, 0)
  return static_cast<void*>(parameter.unsafeGetTensorImpl());
#else
  return c10::guts::to_string(parameter.unsafeGetTensorImpl());
#endif
}

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

// What a c10d process group is to its user: 1.13's ProcessGroupGloo and
// ProcessGroupNCCL are ProcessGroups; since 2.0 they are Backends, which a
// ProcessGroup wraps. packed-bert calls the collectives on them directly.
#if PBERT_TORCH_AT_LEAST(2, 0)
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

// The rendezvous store's transport: since 2.4 TCPStore asks for libuv by
// default, which builds without it (Debian's) refuse; the classic socket
// server speaks the same protocol and is in every build.
template <class Options = c10d::TCPStoreOptions>
void UseClassicTcpStore(Options& options) {
#if PBERT_TORCH_AT_LEAST(2, 2)
  options.useLibUV = false;
#else
  (void)options;
#endif
}

}  // namespace pbert::torch_compat
