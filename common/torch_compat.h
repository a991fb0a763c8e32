// The differences between the LibTorch versions packed-bert builds against,
// in one place: 1.13 (Debian 12) and 2.x (Debian 13's 2.6, pip wheels,
// NVIDIA's containers). Header-only; included only by targets that link
// LibTorch; the operators' differences, whose headers cost more to compile,
// are in torch_compat_ops.h beside it. docs/building.md lists the supported
// versions.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/version.h>

#include <string>

#define PBERT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace c10d {
class ProcessGroup;
class Backend;
struct TCPStoreOptions;
}  // namespace c10d

namespace pbert::torch_compat {

// "1.13.0", "2.6.0": the LibTorch this build compiled against.
inline std::string Version() { return TORCH_VERSION; }

// The key of a parameter's state in torch::optim::Optimizer::state(): its
// TensorImpl's address, as text in 1.13 and as the pointer in 2.x.
inline auto OptimizerStateKey(const at::Tensor& parameter) {
#if PBERT_TORCH_AT_LEAST(2, 0)
  return static_cast<void*>(parameter.unsafeGetTensorImpl());
#else
  return c10::guts::to_string(parameter.unsafeGetTensorImpl());
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
