// The fused LAMB of a CUDA build (optim/lamb_fused.h): checks the tensors,
// lays out their pointers for kernels/lamb_cuda.h, and launches the step on
// the current stream.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <tuple>

#include "kernels/lamb_cuda.h"
#include "optim/lamb.h"
#include "optim/lamb_fused.h"

namespace pbert::optim {

bool FusedLambBuilt() { return true; }

void FusedLambStep(const FusedLambGroup& group, const LambOptions& options) {
  const size_t n = group.weights.size();
  TORCH_CHECK(n > 0 && group.grads.size() == n && group.exp_avg.size() == n &&
                  group.exp_avg_sq.size() == n &&
                  (group.bf16_weights.empty() || group.bf16_weights.size() == n),
              "fused LAMB: one gradient, two moments (and a bf16 copy, if any) per weight");
  const at::Device device = group.weights.front().device();
  TORCH_CHECK(device.is_cuda(), "fused LAMB: the weights are on ", device.str(), ", not CUDA");
  const c10::cuda::CUDAGuard guard(device);
  const bool bf16_grads = group.grads.front().scalar_type() == at::kBFloat16;
  kernels::LambGroup k;
  k.bf16_grads = bf16_grads;
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& w = group.weights[i];
    const int64_t numel = w.numel();
    auto same = [&](const at::Tensor& t, at::ScalarType type, const char* what) {
      TORCH_CHECK(t.device() == device && t.scalar_type() == type && t.numel() == numel &&
                      t.is_contiguous(),
                  "fused LAMB: ", what, " ", i, " is not a dense ", c10::toString(type),
                  " tensor of ", numel, " elements on ", device.str());
    };
    same(w, at::kFloat, "weight");
    same(group.grads[i], bf16_grads ? at::kBFloat16 : at::kFloat, "gradient");
    same(group.exp_avg[i], at::kFloat, "first moment");
    same(group.exp_avg_sq[i], at::kFloat, "second moment");
    if (!group.bf16_weights.empty()) same(group.bf16_weights[i], at::kBFloat16, "bf16 copy");
    total += numel;
  }
  // The update directions, one buffer for the group; the norms, two per
  // tensor. Both freed on return: the caching allocator keeps them for
  // this stream's kernels.
  const at::Tensor update = at::empty({total}, group.weights.front().options());
  const at::Tensor norms = at::empty({2 * static_cast<int64_t>(n)},
                                     group.weights.front().options().dtype(at::kDouble));
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    k.weights.push_back(group.weights[i].data_ptr<float>());
    k.grads.push_back(group.grads[i].data_ptr());
    k.exp_avg.push_back(group.exp_avg[i].data_ptr<float>());
    k.exp_avg_sq.push_back(group.exp_avg_sq[i].data_ptr<float>());
    k.update.push_back(update.data_ptr<float>() + offset);
    if (!group.bf16_weights.empty()) {
      k.bf16_weights.push_back(
          reinterpret_cast<uint16_t*>(group.bf16_weights[i].data_ptr<at::BFloat16>()));
    }
    k.sizes.push_back(group.weights[i].numel());
    offset += group.weights[i].numel();
  }
  SetLambScalars(options, group.bias_correction1, group.bias_correction2, k);
  at::Tensor clip;
  if (group.clip.defined()) {
    TORCH_CHECK(group.clip.numel() == 1, "fused LAMB: the clipping coefficient is not a scalar");
    clip = group.clip.to(device, at::kDouble).contiguous();
    k.clip = clip.data_ptr<double>();
  }
  const cudaError_t error = kernels::LambStep(
      k, norms.data_ptr<double>(), c10::cuda::getCurrentCUDAStream(device.index()).stream());
  TORCH_CHECK(error == cudaSuccess, "fused LAMB: the CUDA kernels failed: ",
              cudaGetErrorString(error));
}

at::Tensor FusedSquaredNorms(const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(!tensors.empty(), "fused norms: no tensors");
  const at::Device device = tensors.front().device();
  const at::ScalarType type = tensors.front().scalar_type();
  TORCH_CHECK(device.is_cuda() && (type == at::kFloat || type == at::kBFloat16),
              "fused norms: the tensors are ", c10::toString(type), " on ", device.str(),
              ", not fp32 or bf16 on CUDA");
  const c10::cuda::CUDAGuard guard(device);
  std::vector<const void*> pointers;
  std::vector<int64_t> sizes;
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.device() == device && t.scalar_type() == type && t.is_contiguous(),
                "fused norms: every tensor must be a dense ", c10::toString(type), " tensor on ",
                device.str());
    pointers.push_back(t.data_ptr());
    sizes.push_back(t.numel());
  }
  at::Tensor norms = at::empty({static_cast<int64_t>(tensors.size())},
                               tensors.front().options().dtype(at::kDouble));
  const cudaError_t error =
      kernels::SquaredNorms(pointers, sizes, type == at::kBFloat16, norms.data_ptr<double>(),
                            c10::cuda::getCurrentCUDAStream(device.index()).stream());
  TORCH_CHECK(error == cudaSuccess, "fused norms: the CUDA kernel failed: ",
              cudaGetErrorString(error));
  return norms;
}

}  // namespace pbert::optim
